"""`role-rubric monitor`: calibrated adherence per role over time, with alarms that hold their false-alarm rate.

Its keys: calibration.schema.commands_monitor `Monitor` (`role-rubric monitor --help`); the library:
calibration.monitor.
"""

from __future__ import annotations

import logging
from pathlib import Path

from calibration.schema.commands_monitor import Monitor as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric monitor data=DIR model=MODEL window=7d out=DIR`: OUT/windows.jsonl's path; a new alarm
    raises MonitorAlarm (exit status 1) once everything is written. Imports inside, so that `role-rubric --help`
    loads no stage."""
    from calibration.monitor import monitor
    from calibration.monitor.alarms import MonitorAlarm
    from rubric.files import out_lock

    with out_lock(cfg.out) as out:
        result = monitor(
            cfg.data,
            cfg.model,
            out,
            window=cfg.window,
            origin=cfg.origin,
            until=cfg.until,
            alpha=cfg.alpha,
            horizon=cfg.horizon,
            reference=cfg.reference,
            fail_under=cfg.fail_under,
            drop=cfg.drop,
            shift=cfg.shift,
            questions=cfg.questions,
            canary=cfg.canary,
            width=cfg.width,
            adheres_at=cfg.adheres_at,
            allow_judge_mismatch=cfg.allow_judge_mismatch,
        )
    for line in _lines(result):
        log.info(line)
    if result["alarms"]:
        first = result["alarms"][0]
        raise MonitorAlarm(
            f"{len(result['alarms'])} new alarm(s), appended to {result['paths']['alarms']}; the first: window "
            f"{first['window']}, {first['role']}: {first['what']} ({_strength(first)}); next: {first['next']}.",
            fix="",
        )
    return result["paths"]["windows"]


def _lines(result: dict) -> list[str]:
    lines = []
    for record in result["windows"]:
        rows = record["rows"]
        if not rows:
            lines.append(f"monitor: window {record['window']}: no conversation")
            continue
        parts = []
        for role, row in rows.items():
            band = row["band"]
            shown = f"{role} {row['rate']:.3f}" + (f" [{band[0]:.3f}, {band[1]:.3f}]" if band else "")
            p = (row.get("shift") or {}).get("p_value")
            parts.append(shown + (f" shift p={p:.2g}" if p is not None else ""))
        lines.append(
            f"monitor: window {record['window']} ({record['conversations']} conversations): " + "; ".join(parts)
        )
    lines += _open_lines(result)
    lines.append(
        f"monitor: {len(result['windows'])} new window(s), {result['skipped']} already monitored"
        + (f", {result['waiting']} conversations in windows still open" if result["waiting"] else "")
    )
    paths = result["paths"]
    lines.append("monitor: wrote " + ", ".join(str(p) for p in paths.values()))
    for a in result["alarms"]:
        lines.append(f"monitor: ALARM window {a['window']}, {a['role']}: {a['what']} ({_strength(a)})")
    if not result["alarms"]:
        lines.append("monitor: no new alarm")
    return lines


def _strength(alarm: dict) -> str:
    """How strong the evidence is, against the level it alarms at: an e-value against 1/level (the sequential
    checks) or a p-value against the level (the shift check)."""
    if alarm.get("e_value") is not None:
        return f"e-value {alarm['e_value']:.3g} >= {1 / alarm['level']:.3g}"
    if alarm.get("p_value") is not None:
        return f"p={alarm['p_value']:.2g} < {alarm['level']:.2g}"
    return "a change of judge"


def _open_lines(result: dict) -> list[str]:
    """The window still open (provisional, never tested), the first window's closing time where none has
    closed yet, and the canary's test."""
    lines = []
    first, open_ = result.get("first_window"), result.get("provisional")
    if first is not None:
        lines.append(
            f"monitor: no window is complete yet: the first, from {first['start']}, closes at {first['end']}; "
            "run again after it (the state is saved)"
        )
    if open_ is not None:
        shown = "; ".join(f"{g} {r['rate']:.3f}" for g, r in open_["rows"].items())
        lines.append(
            f"monitor: window {open_['window']} is open until {open_['closes']} ({open_['conversations']} "
            f"conversations so far, provisional, never tested): {shown}"
        )
    checked = result.get("canary")
    if checked is not None:
        test = checked["test"]
        lines.append(
            f"monitor: canary: {test['n']} fixed conversations read again by {checked['identity']}: mean change "
            f"{test['mean_difference']:+.3f}, p={test['p_value']:.2g} (level {test['level']:.2g})"
            + ("; the rate checks resume under this judge" if checked["released"] else "")
        )
    return lines
