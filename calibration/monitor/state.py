"""What `monitor` keeps in its OUT folder between runs, and the checks that keep a rerun honest.

    state.json     the model's checksum, the settings, the origin, the last run's `until`, each monitored
                   window's id, position and fingerprint (its conversations), the reference period's totals
    windows.jsonl  one record per monitored window (its rows: per role and "all")
    windows.csv    the same as a flat table (one row per window and role), rewritten on every run
    alarms.jsonl   one record per alarm, appended

A window is computed once: a rerun skips the windows already in state.json (their data unchanged), and
refuses a model or settings other than the state's, a clock that went backwards, and new conversations in
(or before) a window already monitored.

state.json is written last (atomically), so it is what a run commits: a run that stopped after appending to
windows.jsonl or alarms.jsonl but before state.json leaves records of windows the state does not hold. The
next run removes those first (`reconcile`) and computes the windows again, so a window is never there twice.
"""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
import logging
from pathlib import Path

from rubric.errors import InputError

__all__ = [
    "ALARMS",
    "STATE",
    "TABLE",
    "WINDOWS",
    "append_jsonl",
    "model_checksum",
    "open_state",
    "reconcile",
    "write_table",
]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

STATE, WINDOWS, TABLE, ALARMS = "state.json", "windows.jsonl", "windows.csv", "alarms.jsonl"
PROVISIONAL = "provisional.json"
"""The window still open: its rates so far, rewritten on every run (never tested, never kept in the state)."""
FORMAT = 2
"""2: the sequential evidence (e-processes) and the drop checks' thresholds per question and role."""


def model_checksum(model_dir: Path) -> str:
    """sha256 of model.json (which holds the weights' own checksum): any other calibrator differs."""
    path = Path(model_dir) / "model.json"
    if not path.is_file():
        raise InputError("no model.json here.", path=model_dir, fix="pass model= the folder `role-rubric train` wrote.")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def open_state(out: Path, *, checksum: str, model: Path, settings: dict) -> dict:
    """The state in OUT (a fresh one where there is none), refused when it was made with another model or
    other settings; windows.jsonl and alarms.jsonl brought back to it (`reconcile`)."""
    state = _read_state(out, checksum=checksum, model=model, settings=settings)
    if removed := reconcile(out, state):
        log.warning(
            f"monitor: {removed} windows in {out / WINDOWS} were written by a run that stopped before it saved "
            f"{STATE}: removed, and computed again"
        )
    return state


def _read_state(out: Path, *, checksum: str, model: Path, settings: dict) -> dict:
    path = out / STATE
    if not path.exists():
        return {
            "format": FORMAT,
            "model": {"path": str(model), "checksum": checksum},
            "settings": settings,
            "origin": None,
            "until": None,
            "first_index": None,
            "windows": [],
            "reference": None,
            "reference_sum": {},
            "roles": [],
            "reference_rates": {},
            "thresholds": None,
            "mix": None,
            "bettors": {},
            "alarmed": {},
            "judge": None,
            "judge_hold": None,
            "canary": None,
        }
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        recorded_sum, recorded_settings = state["model"]["checksum"], state["settings"]
    except (ValueError, KeyError, TypeError):
        raise InputError(
            "state.json is not a monitor's state.",
            path=path,
            fix="pass out= the folder of an earlier monitor run, or a new one.",
        ) from None
    if state.get("format") != FORMAT:
        raise InputError(
            f"this folder was monitored by an earlier role-rubric (state format {state.get('format')}; this one "
            f"keeps format {FORMAT}: evidence that accumulates over windows).",
            path=path,
            fix="pass a new out= (the old folder stays readable as it is).",
        )
    if recorded_sum != checksum:
        raise InputError(
            f"this folder monitors another model ({state['model']['path']}, checksum {recorded_sum[:12]}); "
            f"{model} is {checksum[:12]}: its rates would not compare with the windows already monitored.",
            path=path,
            fix="pass the model the monitor started with, or a new out= for this model.",
        )
    changed = [k for k in sorted(set(settings) | set(recorded_settings)) if settings.get(k) != recorded_settings.get(k)]
    if changed:
        shown = ", ".join(f"{k}={recorded_settings.get(k)!r} (now {settings.get(k)!r})" for k in changed)
        raise InputError(
            f"this folder was monitored with other settings: {shown}; the alarms' guarantee holds for one set.",
            path=path,
            fix="pass the settings it was started with, or a new out= for these.",
        )
    return state


def reconcile(out: Path, state: dict) -> int:
    """windows.jsonl and alarms.jsonl back to what state.json committed: records of windows it does not hold (a
    run that stopped before saving it), a cut-short last line and a window's repeated records (the last kept)
    are removed; the number of windows removed. A window the state holds and windows.jsonl lacks is refused."""
    from rubric.files import atomic_write_text

    committed = {w["id"] for w in state["windows"]}
    removed = 0
    for name, key in (
        (WINDOWS, lambda r: r.get("window")),
        (ALARMS, lambda r: (r.get("window"), r.get("role"), r.get("check"))),
    ):
        path = out / name
        if not path.exists():
            if name == WINDOWS and committed:
                raise InputError(
                    f"{STATE} records {len(committed)} monitored windows, and {WINDOWS} is gone: the next run would "
                    "write only the new windows, and the earlier ones would vanish from the table and the page.",
                    path=path,
                    fix=f"restore {WINDOWS} from a backup, or delete {STATE} (and the .jsonl files) to monitor every "
                    "window again.",
                )
            continue
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        kept: dict = {}
        for number, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
            except ValueError:
                if number == len(lines):
                    continue  # cut short by a run that stopped mid-write: not committed
                raise InputError(
                    "a line that is not JSON (edited by hand?).",
                    path=path,
                    row=number,
                    fix=f"restore the file, or delete the line and {STATE} to compute every window again.",
                ) from None
            if isinstance(record, dict) and record.get("window") in committed:
                kept.pop(key(record), None)
                kept[key(record)] = line
        if name == WINDOWS:
            removed = len({w for w in (_window_of(line) for line in lines) if w is not None} - committed)
            missing = committed - set(kept)
            if missing:
                raise InputError(
                    f"{len(missing)} windows that {STATE} records as monitored are not in it "
                    f"(first: {sorted(missing)[0]}): it was cut or replaced.",
                    path=path,
                    fix=f"restore it from a backup, or delete {STATE} (and the .jsonl files) to monitor every window again.",
                )
        if len(kept) != len(lines):
            atomic_write_text(path, "".join(line + "\n" for line in kept.values()))
    return removed


def _window_of(line: str) -> str | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("window") if isinstance(record, dict) else None


def check_clock(state: dict, until: dt.datetime, out: Path) -> None:
    """until= (or now) must not be earlier than the last run's."""
    if state.get("until") and until < dt.datetime.fromisoformat(state["until"]):
        raise InputError(
            f"until={until.isoformat()} is earlier than the last run's {state['until']}: the clock went "
            "backwards between runs, and windows already monitored would be open again.",
            path=out / STATE,
            fix="fix the machine's clock (or pass until= at or after the last run's).",
        )


def save(out: Path, state: dict) -> Path:
    from rubric.jsonfile import write_json

    path = out / STATE
    write_json(path, state)
    return path


def append_jsonl(path: Path, records: list[dict]) -> None:
    from rubric.jsonfile import jsonable

    with path.open("a", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(jsonable(record), sort_keys=False) + "\n")


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


COLUMNS = (
    "window",
    "start",
    "role",
    "conversations",
    "turns",
    "rate",
    "low",
    "high",
    "shift_p",
    "labelled",
    "ppi",
    "ppi_low",
    "ppi_high",
    "alarms",
)


def write_table(out: Path) -> Path:
    """windows.csv from windows.jsonl: one row per window and role."""
    path = out / TABLE
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for record in read_jsonl(out / WINDOWS):
            for role, row in record["rows"].items():
                ppi = (row.get("reviewers") or {}).get("ppi") or {}
                writer.writerow(
                    [
                        record["window"],
                        record.get("start") or "",
                        role,
                        row["conversations"],
                        row["turns"],
                        _num(row.get("rate")),
                        _num((row.get("band") or [None, None])[0]),
                        _num((row.get("band") or [None, None])[1]),
                        _num((row.get("shift") or {}).get("p_value")),
                        (row.get("reviewers") or {}).get("n_labelled_conversations", 0),
                        _num(ppi.get("estimate")),
                        _num(ppi.get("low")),
                        _num(ppi.get("high")),
                        ";".join(a["check"] for a in row.get("checks", []) if a["fired"]),
                    ]
                )
    return path


def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.6g}"
