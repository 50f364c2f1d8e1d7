"""`role-rubric monitor`'s stage: the new windows of the data, each measured per role, tested, and recorded in
OUT (calibration/monitor/state.py). Windows: calibration/monitor/windows.py; what is measured:
calibration/monitor/statistics.py; the alarms and their guarantee: calibration/monitor/alarms.py."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict
from pathlib import Path

import numpy as np

from calibration.monitor import alarms as al
from calibration.monitor import sequential as sq
from calibration.monitor import state as st
from calibration.monitor import statistics as ms
from calibration.monitor.alarms import ALL
from calibration.monitor.judge import canary_run, window_judge
from calibration.monitor.windows import Window, open_window, parse_window, plan_windows, read_conversations
from rubric.errors import InputError

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["monitor"]


def monitor(
    data,
    model,
    out,
    *,
    window: str = "7d",
    origin: str | None = None,
    until: str | None = None,
    alpha: float = 0.05,
    horizon: int = 52,
    reference: int = 8,
    fail_under: float | None = None,
    drop: float | None = None,
    shift: bool = True,
    questions: bool = True,
    width: float = 0.05,
    adheres_at: float | None = None,
    allow_judge_mismatch: bool = False,
    canary: str | Path | None = None,
    now: dt.datetime | None = None,
) -> dict:
    """Compute the new windows of `data` (a directory or a list of them) into OUT; returns {"windows": the new
    windows' records, "alarms": the new alarms, "skipped": windows already monitored, "waiting": conversations
    in windows still open, "provisional": the open window's record (or None), "first_window": when the first
    window closes where none has yet, "canary": the canary's test where one ran, "paths": what was written}.
    now: the clock (default: the machine's)."""
    from calibration import load_model

    directories = [Path(d) for d in ([data] if isinstance(data, str | Path) else list(data))]
    out, model_dir = Path(out), Path(model)
    length = parse_window(window)
    for d in [*directories, *([Path(canary)] if canary is not None else [])]:
        if not d.is_dir():
            raise InputError("dataset directory not found.", path=d, fix="pass the folder gather wrote.")
    settings = {
        "window": window,
        "alpha": alpha,
        "horizon": horizon,
        "reference": reference,
        "fail_under": fail_under,
        "drop": drop,
        "shift": shift,
        "questions": questions,
        "width": width,
        "adheres_at": adheres_at,
        "canary": None if canary is None else str(canary),
    }
    state = st.open_state(out, checksum=st.model_checksum(model_dir), model=model_dir, settings=settings)
    found = [read_conversations(d, i, need_time=length is not None) for i, d in enumerate(directories)]
    role_of = {(c.directory, c.conversation_id): c.role for convs in found for c in convs}
    windows, new, waiting, clock = plan_windows(
        directories, found, length, state, out, origin=origin, until=until, now=now
    )
    if state["first_index"] is None and new:
        state["first_index"] = new[0].index
    current = open_window([c for f in found for c in f], length, _origin(state), clock) if clock else None
    model_obj = load_model(model_dir) if (new or canary is not None or current) else None
    scorer = _Scorer(directories, found, model_obj, adheres_at, allow_judge_mismatch, model_dir)
    records, new_alarms = [], []
    checked = _canary(canary, model_obj, state, settings, adheres_at, new_alarms)
    for w in new:
        record = _window(w, scorer.of(w), role_of, state, model_obj, settings, directories)
        records.append(record)
        new_alarms += [a for row in record["rows"].values() for a in row.get("alarms", [])]
        state["windows"].append(
            {"id": w.id, "index": w.index, "fingerprint": w.fingerprint(), "conversations": w.n_conversations}
        )
    paths, provisional = _write(out, state, records, new_alarms, current, scorer, role_of)
    return {
        "windows": records,
        "alarms": new_alarms,
        "skipped": len(windows) - len(new),
        "waiting": waiting,
        "provisional": provisional,
        "first_window": None if state["windows"] or clock is None else _first_window(state, length, clock),
        "canary": checked,
        "paths": paths,
    }


def _write(
    out: Path, state: dict, records: list, new_alarms: list, current, scorer, role_of
) -> tuple[dict, dict | None]:
    """Everything a run writes, state.json last (what commits the run); the paths and the open window's record."""
    out.mkdir(parents=True, exist_ok=True)
    st.append_jsonl(out / st.WINDOWS, records)
    st.append_jsonl(out / st.ALARMS, new_alarms)
    paths = {"windows": out / st.WINDOWS, "table": st.write_table(out), "alarms": out / st.ALARMS}
    if state["windows"]:
        paths["page"] = _page(out, state)
    provisional = _provisional(current, scorer, role_of, out) if current else None
    if provisional is not None:
        paths["provisional"] = out / st.PROVISIONAL
    paths["state"] = st.save(out, state)
    return paths, provisional


def _origin(state: dict):
    return dt.datetime.fromisoformat(state["origin"]) if state.get("origin") else None


def _first_window(state: dict, length, clock) -> dict | None:
    """Where no window is complete yet: the first one's bounds (from the origin), so the run can say when it
    closes."""
    origin = _origin(state)
    if origin is None:
        return None
    return {"start": origin.isoformat(), "end": (origin + length).isoformat()}


class _Scorer:
    """Each data directory scored once, when a window first needs it."""

    def __init__(self, directories, found, model, adheres_at, allow_mismatch, model_dir):
        self.directories, self.found, self.model = directories, found, model
        self.options = {"adheres_at": adheres_at, "allow_mismatch": allow_mismatch, "model_dir": model_dir}
        self.scored: dict[int, ms.Scored] = {}

    def of(self, w: Window) -> dict[int, ms.Scored]:
        for d in w.members:
            if d not in self.scored:
                self.scored[d] = ms.score_directory(self.directories[d], self.model, **self.options)
                _check_listed(self.scored[d], self.found[d], self.directories[d])
        return self.scored


def _canary(canary, model, state: dict, settings: dict, adheres_at, alarms: list) -> dict | None:
    """The canary's step (calibration/monitor/judge.py): a new alarm where the judge's answers moved."""
    if canary is None:
        return None

    scored: list[ms.Scored] = []

    def score(folder: Path) -> dict[str, float]:
        got = ms.score_directory(folder, model, adheres_at=adheres_at, allow_mismatch=True, model_dir=None)
        scored.append(got)
        return {c: got.A[c] / got.m[c] for c in got.A}

    def level() -> float:  # the same split as the rate checks' (the canary's rubric is the model's)
        return sq.budget_of(settings, {0: scored[-1]})["canary"]

    checked = canary_run(Path(canary), model, state, level=level, score=score)
    if checked and checked["alarm"]:
        test = checked["test"]
        alarms.append(
            {
                "window": "canary",
                "role": ALL,
                "check": "judge_answers_changed",
                "what": f"the judge's answers on the canary's {test['n']} fixed conversations moved by "
                f"{test['mean_difference']:+.3f} (the judge changed, not the chatbot); rate checks held",
                "p_value": test["p_value"],
                "level": test["level"],
                "next": "decide whether the new judge is wanted: if so, train the calibrator on its distributions "
                "and start a new out=; if not, restore the judge",
            }
        )
    return checked


def _provisional(w: Window, scorer: _Scorer, role_of, out: Path) -> dict:
    """The open window's rates so far, written to OUT/provisional.json: shown, never tested, never kept."""
    from rubric.jsonfile import write_json

    scored = scorer.of(w)
    groups = _groups(w, scored, role_of)
    rows = {}
    for g, parts in groups.items():
        A, m = _totals(parts, scored)
        totals = ms.Totals.of(A, m)
        rows[g] = {"conversations": totals.n, "rate": totals.rate, "band": ms.band(A, m)}
    record = {"window": w.id, "closes": w.end.isoformat(), "conversations": w.n_conversations, "rows": rows}
    record["note"] = "provisional: this window is still open; it is tested once it closes, never before"
    write_json(out / st.PROVISIONAL, record)
    return record


def _page(out: Path, state: dict) -> Path:
    """monitor.html and monitor.png from everything monitored so far (calibration/monitor/page.py)."""
    from calibration.monitor.page import write_page

    return write_page(out, st.read_jsonl(out / st.WINDOWS), st.read_jsonl(out / st.ALARMS), state["reference"])


def _window(w: Window, scored, role_of, state, model, settings, directories) -> dict:
    """One window's record: per row ("all" and each role), what was measured and the alarms raised."""
    record = {
        "window": w.id,
        "index": w.index,
        "start": None if w.start is None else w.start.isoformat(),
        "end": None if w.end is None else w.end.isoformat(),
        "conversations": w.n_conversations,
        "rows": {},
    }
    rel = w.index - state["first_index"]
    if rel >= settings["reference"] and state["thresholds"] is None:  # the reference period is over: frozen
        sq.freeze(state, settings)
    if w.n_conversations == 0:
        record["note"] = "no conversation in this window: nothing measured, no alarm (is the import running?)"
        log.warning(f"monitor: window {w.id}: no conversation")
        return record
    groups = _groups(w, scored, role_of)
    state["roles"] += sorted(g for g in groups if g != ALL and g not in state["roles"])
    rows, totals = _measure(groups, scored, model, settings, state, rel)
    judge = window_judge(directories, sorted(w.members), state)
    record["judge"] = {"described": judge["described"], "held": judge["held"]}
    if judge["changed"]:
        rows[ALL]["checks"].append(
            {
                "check": "judge_changed",
                "level": None,
                "fired": True,
                "what": "this window was gathered by another judge (" + "; ".join(judge["differences"]) + "): its "
                "rates may move because the judge did, not the chatbot; the rate checks are held until the "
                "canary (canary=) shows the new judge answers as the old one did, or a new out=",
            }
        )
    if judge["held"]:
        record["note"] = "rate checks held: the judge changed (see alarms.jsonl); rates measured, not tested"
    else:
        sq.update(rows, groups, scored, state, settings, rel)
    for g, row in rows.items():
        if not row["in_horizon"]:
            row["note"] = f"past horizon={settings['horizon']} windows: no shift alarm (the rate checks go on)"
        del row["in_horizon"]
        row["alarms"] = [_alarm(w, g, c, groups[g], scored, settings, directories) for c in row["checks"] if c["fired"]]
        record["rows"][g] = row
    if state.get("mix"):
        record["standardised_rate"] = sq.standardised_rate(rows, state["mix"])
    if rel < settings["reference"]:
        sums = state["reference_sum"]
        for g, t in totals.items():
            sums[g] = asdict(ms.Totals(**sums[g]) + t) if g in sums else asdict(t)
    return record


def _measure(groups, scored, model, settings, state, rel) -> tuple[dict, dict]:
    """Each row's rate, band, reviewers' block and shift check (its p-value tested at its per-window level)."""
    budget = sq.budget_of(settings, scored)
    shift_rows = [g for g in groups if (g != ALL or len(groups) == 1)]
    eligible = [g for g in shift_rows if sum(len(c) for _, c in groups[g]) >= ms.MIN_SHIFT_CONVERSATIONS]
    shift_level = budget["shift"] / settings["horizon"] / max(len(eligible), 1)
    in_horizon = rel < settings["horizon"]
    totals, rows = {}, {}
    for g, parts in groups.items():
        A, m = _totals(parts, scored)
        totals[g] = ms.Totals.of(A, m)
        row = {"conversations": totals[g].n, "turns": int(totals[g].m), "rate": totals[g].rate, "se": totals[g].se}
        row["band"] = ms.band(A, m)
        row["totals"] = asdict(totals[g])
        row["checks"], row["in_horizon"] = [], in_horizon
        if len(parts) == 1 and len(scored[parts[0][0]].preds.row_item):
            row["reviewers"] = ms.ppi_block(scored[parts[0][0]], parts[0][1])
        if settings["shift"] and g in shift_rows:
            row["shift"] = ms.shift_p(model.record.shift_summary(), [(scored[d], c) for d, c in parts], shift_level)
            p = row["shift"].get("p_value")
            if in_horizon and p is not None:
                row["checks"].append(
                    {
                        "check": "shift",
                        "p_value": p,
                        "level": shift_level,
                        "fired": p < shift_level,
                        "what": "these conversations differ from the calibrator's training data (the chatbot, its "
                        "users or the judge changed): the calibrated rate may be biased",
                    }
                )
        rows[g] = row
    return rows, totals


def _totals(parts, scored) -> tuple[np.ndarray, np.ndarray]:
    """The conversations' calibrated totals A_c and turns m_c, for (directory, conversation ids) parts."""
    A = np.array([scored[d].A[c] for d, convs in parts for c in convs])
    m = np.array([scored[d].m[c] for d, convs in parts for c in convs], float)
    return A, m


def _check_listed(scored: ms.Scored, found, root: Path) -> None:
    """Every judged conversation has its line in conversations.jsonl (its start time, its role), where there is
    one: a conversation of llm.csv without it would be left out of every window without a word."""
    listed = {c.conversation_id for c in found}
    missing = sorted(str(c) for c in set(scored.A) - listed) if found else []
    if missing:
        shown = ", ".join(repr(c) for c in missing[:3]) + (", ..." if len(missing) > 3 else "")
        raise InputError(
            f"{len(missing)} conversation(s) of llm.csv are not in conversations.jsonl ({shown}), so they have no "
            "start time and no role.",
            path=root / "conversations.jsonl",
            fix="gather from the conversations.jsonl in this folder (the one the import wrote), or pass the folder "
            "gather wrote.",
        )


def _groups(w: Window, scored, role_of) -> dict[str, list[tuple[int, list[str]]]]:
    """ "all" and each role -> (directory, conversation ids) of the window's conversations with judge distributions
    (a conversation of conversations.jsonl that gather skipped has none: not counted)."""
    groups: dict[str, list[tuple[int, list[str]]]] = {ALL: []}
    for d, convs in sorted(w.members.items()):
        have = [c for c in convs if c in scored[d].A]
        if len(have) < len(convs):
            log.warning(
                f"monitor: window {w.id}: {len(convs) - len(have)} conversation(s) of {scored[d].root / 'conversations.jsonl'} "
                "have no judge distributions in llm.csv (not gathered): not counted"
            )
        groups[ALL].append((d, have))
        by_role: dict[str, list[str]] = {}
        for c in have:
            role = role_of.get((d, c))
            if role is not None:
                by_role.setdefault(role, []).append(c)
        for role, cs in by_role.items():
            groups.setdefault(role, []).append((d, cs))
    return groups


def _alarm(w: Window, role: str, check: dict, parts, scored, settings, directories) -> dict:
    conv, f = [], []
    for d, convs in parts:
        preds = scored[d].preds
        keep = np.isin(preds.conversation.astype(str), convs)
        where = "" if len(parts) == 1 else f"{directories[d]}/"  # from several directories: say which
        conv.append(np.char.add(where, preds.conversation[keep].astype(str)))
        f.append(preds.calibrator[keep])
    advice = al.label_advice(np.concatenate(conv), np.concatenate(f), settings["width"], w.id, role)
    return {
        "window": w.id,
        "role": role,
        "check": check["check"],
        "question": check.get("question"),
        "what": check["what"],
        "p_value": check.get("p_value"),
        "e_value": check.get("e_value"),
        "level": check["level"],
        **advice,
    }
