"""`role-rubric monitor`'s stage: the new windows of the data, each measured per role, tested, and recorded in
OUT (calibration/monitor/state.py). Windows: calibration/monitor/windows.py; what is measured:
calibration/monitor/statistics.py; the alarms and their guarantee: calibration/monitor/alarms.py."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from calibration.monitor import sequential as sq
from calibration.monitor import state as st
from calibration.monitor import statistics as ms
from calibration.monitor import windows as mw
from calibration.monitor.alarms import ALL
from calibration.monitor.judge import canary_run
from calibration.monitor.record import RoleOf, conversation_totals, window_groups, window_record
from rubric.errors import InputError

if TYPE_CHECKING:
    from calibration.model.files import LoadedModel

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["monitor"]


def monitor(
    data: str | Path | Sequence[str | Path],
    model: str | Path,
    out: str | Path,
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
    length = mw.parse_window(window)
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
    found = [mw.read_conversations(d, i, need_time=length is not None) for i, d in enumerate(directories)]
    role_of = {(c.directory, c.conversation_id): c.role for convs in found for c in convs}
    windows, new, waiting, clock = mw.plan_windows(
        directories, found, length, state, out, origin=origin, until=until, now=now
    )
    if state["first_index"] is None and new:
        state["first_index"] = new[0].index
    current = _current(found, length, state, clock)
    model_obj = load_model(model_dir) if (new or canary is not None or current) else None
    scorer = _Scorer(directories, found, model_obj, adheres_at, allow_judge_mismatch, model_dir)
    records: list[dict] = []
    new_alarms: list[dict] = []
    checked = _canary(canary, model_obj, state, settings, adheres_at, new_alarms)
    for w in new:
        record = window_record(w, scorer.of(w), role_of, state, model_obj, settings, directories)
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
    out: Path,
    state: dict,
    records: list[dict],
    new_alarms: list[dict],
    current: mw.Window | None,
    scorer: _Scorer,
    role_of: RoleOf,
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


def _origin(state: dict) -> dt.datetime | None:
    return dt.datetime.fromisoformat(state["origin"]) if state.get("origin") else None


def _current(
    found: list[list[mw.Conversation]], length: dt.timedelta | None, state: dict, clock: dt.datetime | None
) -> mw.Window | None:
    """The window still open at the clock, with its conversations so far (windows by time only)."""
    origin = _origin(state)
    if clock is None or length is None or origin is None:
        return None
    return mw.open_window([c for f in found for c in f], length, origin, clock)


def _first_window(state: dict, length: dt.timedelta | None, clock: dt.datetime) -> dict | None:
    """Where no window is complete yet: the first one's bounds (from the origin), so the run can say when it
    closes."""
    origin = _origin(state)
    if origin is None or length is None:
        return None
    return {"start": origin.isoformat(), "end": (origin + length).isoformat()}


class _Scorer:
    """Each data directory scored once, when a window first needs it."""

    def __init__(
        self,
        directories: list[Path],
        found: list[list[mw.Conversation]],
        model: LoadedModel | None,
        adheres_at: float | None,
        allow_mismatch: bool,
        model_dir: Path,
    ):
        self.directories, self.found, self.model = directories, found, model
        self.adheres_at, self.allow_mismatch, self.model_dir = adheres_at, allow_mismatch, model_dir
        self.scored: dict[int, ms.Scored] = {}

    def of(self, w: mw.Window) -> dict[int, ms.Scored]:
        for d in w.members:
            if d not in self.scored:
                assert self.model is not None, "monitor loads the model where a window is to be measured"
                self.scored[d] = ms.score_directory(
                    self.directories[d],
                    self.model,
                    adheres_at=self.adheres_at,
                    allow_mismatch=self.allow_mismatch,
                    model_dir=self.model_dir,
                )
                _check_listed(self.scored[d], self.found[d], self.directories[d])
        return self.scored


def _canary(
    canary: str | Path | None,
    model: LoadedModel | None,
    state: dict,
    settings: dict,
    adheres_at: float | None,
    alarms: list[dict],
) -> dict | None:
    """The canary's step (calibration/monitor/judge.py): a new alarm where the judge's answers moved."""
    if canary is None:
        return None
    assert model is not None, "monitor loads the model where a canary is given"

    scored: list[ms.Scored] = []

    def score(folder: Path) -> dict[str, float]:
        got = ms.score_directory(folder, model, adheres_at=adheres_at, allow_mismatch=True, model_dir=None)
        scored.append(got)
        return {c: got.A[c] / got.m[c] for c in got.A}

    def level() -> float:  # the same split as the rate checks' (the canary's rubric is the model's)
        return sq.budget_of(settings, {0: scored[-1]})["canary"]

    checked = canary_run(Path(canary), state, level=level, score=score)
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


def _provisional(w: mw.Window, scorer: _Scorer, role_of: RoleOf, out: Path) -> dict:
    """The open window's rates so far, written to OUT/provisional.json: shown, never tested, never kept."""
    from rubric.jsonfile import write_json

    scored = scorer.of(w)
    groups = window_groups(w, scored, role_of)
    assert w.end is not None, "an open window is a window by time: it has an end"
    rows = {}
    for g, parts in groups.items():
        A, m = conversation_totals(parts, scored)
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


def _check_listed(scored: ms.Scored, found: list[mw.Conversation], root: Path) -> None:
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
