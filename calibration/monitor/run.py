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
from calibration.monitor import state as st
from calibration.monitor import statistics as ms
from calibration.monitor.windows import (
    Window,
    default_origin,
    parse_time,
    parse_window,
    read_conversations,
    windows_by_directory,
    windows_by_time,
)
from rubric.errors import InputError

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["monitor"]

ALL = "all"


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
    reference: int = 4,
    fail_under: float | None = None,
    drop: float | None = None,
    shift: bool = True,
    questions: bool = True,
    width: float = 0.05,
    adheres_at: float | None = None,
    allow_judge_mismatch: bool = False,
    now: dt.datetime | None = None,
) -> dict:
    """Compute the new windows of `data` (a directory or a list of them) into OUT; returns {"windows": the new
    windows' records, "alarms": the new alarms, "skipped": windows already monitored, "waiting": conversations
    in windows still open, "paths": what was written}. now: the clock (default: the machine's)."""
    from calibration import load_model

    directories = [Path(d) for d in ([data] if isinstance(data, str | Path) else list(data))]
    out, model_dir = Path(out), Path(model)
    length = parse_window(window)
    for d in directories:
        if not d.is_dir():
            raise InputError("dataset directory not found.", path=d, fix="pass data= the folder gather wrote.")
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
    }
    state = st.open_state(out, checksum=st.model_checksum(model_dir), model=model_dir, settings=settings)
    found = [read_conversations(d, i, need_time=length is not None) for i, d in enumerate(directories)]
    role_of = {(c.directory, c.conversation_id): c.role for convs in found for c in convs}
    windows, new, waiting = _windows(directories, found, length, state, out, origin=origin, until=until, now=now)
    if state["first_index"] is None and new:
        state["first_index"] = new[0].index
    model_obj = load_model(model_dir) if new else None
    scored: dict[int, ms.Scored] = {}
    records, new_alarms = [], []
    for w in new:
        for d in w.members:
            if d not in scored:
                scored[d] = ms.score_directory(
                    directories[d],
                    model_obj,
                    adheres_at=adheres_at,
                    allow_mismatch=allow_judge_mismatch,
                    model_dir=model_dir,
                )
                _check_listed(scored[d], found[d], directories[d])
        record = _window(w, scored, role_of, state, model_obj, settings, directories)
        records.append(record)
        new_alarms += [a for row in record["rows"].values() for a in row.get("alarms", [])]
        state["windows"].append(
            {"id": w.id, "index": w.index, "fingerprint": w.fingerprint(), "conversations": w.n_conversations}
        )
    out.mkdir(parents=True, exist_ok=True)
    st.append_jsonl(out / st.WINDOWS, records)
    st.append_jsonl(out / st.ALARMS, new_alarms)
    paths = {"windows": out / st.WINDOWS, "table": st.write_table(out), "alarms": out / st.ALARMS}
    paths["page"] = _page(out, state)
    paths["state"] = st.save(out, state)
    return {
        "windows": records,
        "alarms": new_alarms,
        "skipped": len(windows) - len(new),
        "waiting": waiting,
        "paths": paths,
    }


def _page(out: Path, state: dict) -> Path:
    """monitor.html and monitor.png from everything monitored so far (calibration/monitor/page.py)."""
    from calibration.monitor.page import write_page

    return write_page(out, st.read_jsonl(out / st.WINDOWS), st.read_jsonl(out / st.ALARMS), state["reference"])


def _windows(directories, found, length, state, out: Path, *, origin, until, now) -> tuple[list, list, int]:
    """(every complete window of the data, the new ones among them, conversations waiting in open windows);
    the state's origin and clock moved on."""
    recorded = {w["id"]: w for w in state["windows"]}
    if length is None:
        ids = [_conversation_ids(d, f) for d, f in zip(directories, found, strict=True)]
        windows = windows_by_directory(directories, ids)
        return windows, _new_by_directory(windows, recorded, directories, len(state["windows"])), 0
    clock = parse_time(until, what="until=") if until else (now or dt.datetime.now(dt.UTC))
    st.check_clock(state, clock, out)
    conversations = [c for convs in found for c in convs]
    given = None if origin is None else parse_time(origin, what="origin=").isoformat()
    state["origin"] = state["origin"] or given or default_origin(conversations).isoformat()
    if given and given != state["origin"]:
        raise InputError(
            f"origin={origin} differs from this folder's {state['origin']}.",
            path=out / st.STATE,
            fix="drop origin= (the folder keeps its own), or pass a new out=.",
        )
    last = max((w["index"] for w in state["windows"]), default=None)
    origin_at = dt.datetime.fromisoformat(state["origin"])
    windows, waiting = windows_by_time(conversations, length, origin_at, clock, last)
    new = _new_by_time(windows, recorded, directories, last, out)
    state["until"] = clock.isoformat()
    return windows, new, waiting


def _conversation_ids(root: Path, found) -> list[str]:
    """A directory's conversations: its conversations.jsonl's, else llm.csv's."""
    if found:
        return [c.conversation_id for c in found]
    import pandas as pd

    from calibration.data.reading import find_table

    table = find_table(root, "llm", required=True)
    read = pd.read_parquet if table.suffix == ".parquet" else pd.read_csv
    column = (
        read(table, columns=["conversation_id"])
        if table.suffix == ".parquet"
        else read(table, usecols=["conversation_id"], dtype=str, keep_default_na=False)
    )
    return sorted(set(column["conversation_id"].astype(str)))


def _unchanged(w: Window, recorded: dict, directories: list[Path], out: Path) -> None:
    before = recorded[w.id]
    if before["fingerprint"] != w.fingerprint():
        raise InputError(
            f"window {w.id} was monitored from {before['conversations']} conversations; the data now gives it "
            f"{w.n_conversations} (or other ones): a window is computed once, from all of its conversations.",
            path=out / st.STATE,
            fix="pass the data of windows not yet monitored (late conversations of a monitored window are not "
            "counted), or a new out= to monitor everything again.",
        )


def _new_by_time(windows: list[Window], recorded: dict, directories, last: int | None, out: Path) -> list[Window]:
    new = []
    for w in windows:
        if w.id in recorded:
            _unchanged(w, recorded, directories, out)
        elif last is not None and w.index < last:
            raise InputError(
                f"window {w.id} has {w.n_conversations} conversations, before the last window monitored "
                f"({max(recorded, key=lambda k: recorded[k]['index'])}): the clock went backwards, or they came late.",
                path=out / st.STATE,
                fix="pass only conversations started after the last monitored window, or a new out=.",
            )
        else:
            new.append(w)
    return new


def _new_by_directory(windows: list[Window], recorded: dict, directories, done: int) -> list[Window]:
    new = []
    for w in windows:
        if w.id in recorded:
            if new:
                raise InputError(
                    f"data= lists {w.id}, already monitored, after {new[-1].id}, which is not: windows go in time order.",
                    path=directories[w.index],
                    fix="list the directories oldest first.",
                )
            _unchanged(w, recorded, directories, directories[w.index])
            continue
        w.index = done + len(new)
        new.append(w)
    return new


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
        _freeze(state, settings, model)
    if w.n_conversations == 0:
        record["note"] = "no conversation in this window: nothing measured, no alarm (is the import running?)"
        log.warning(f"monitor: window {w.id}: no conversation")
        return record
    groups = _groups(w, scored, role_of)
    state["roles"] += sorted(g for g in groups if g != ALL and g not in state["roles"])
    rows, totals = _measure(groups, scored, model, settings, state, rel)
    _sequential(rows, groups, scored, state, settings, rel)
    for g, row in rows.items():
        if not row["in_horizon"]:
            row["note"] = f"past horizon={settings['horizon']} windows: no shift alarm (the rate checks go on)"
        del row["in_horizon"]
        row["alarms"] = [_alarm(w, g, c, groups[g], scored, settings, directories) for c in row["checks"] if c["fired"]]
        record["rows"][g] = row
    if state.get("mix"):
        record["standardised_rate"] = _standardised(rows, state["mix"])
    if rel < settings["reference"]:
        sums = state["reference_sum"]
        for g, t in totals.items():
            sums[g] = asdict(ms.Totals(**sums[g]) + t) if g in sums else asdict(t)
    return record


def _measure(groups, scored, model, settings, state, rel) -> tuple[dict, dict]:
    """Each row's rate, band, reviewers' block and shift check (its p-value tested at its per-window level)."""
    budget = _budget(settings, scored)
    shift_rows = [g for g in groups if (g != ALL or len(groups) == 1)]
    eligible = [g for g in shift_rows if sum(len(c) for _, c in groups[g]) >= ms.MIN_SHIFT_CONVERSATIONS]
    shift_level = budget["shift"] / settings["horizon"] / max(len(eligible), 1)
    in_horizon = rel < settings["horizon"]
    totals, rows = {}, {}
    for g, parts in groups.items():
        A = np.array([scored[d].A[c] for d, convs in parts for c in convs])
        m = np.array([scored[d].m[c] for d, convs in parts for c in convs], float)
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


def _questions(scored, settings) -> list[str]:
    """The questions the sequential checks run on: the target first, then (questions=true) every other."""
    first = next(iter(scored.values()))
    others = [q for q in first.rates if q != first.target] if settings["questions"] else []
    return [first.target, *others]


def _budget(settings, scored) -> dict:
    return al.budget(
        settings["alpha"],
        fail_under=settings["fail_under"],
        drop=settings["drop"],
        questions=len(_questions(scored, settings)) - 1,
        shift=settings["shift"],
    )


def _sequential(rows, groups, scored, state, settings, rel) -> None:
    """The e-processes of every monitored question moved on by this window's conversations (in their order);
    during the reference period its per-role sums are kept instead for the drop checks' thresholds."""
    budget = _budget(settings, scored)
    target = next(iter(scored.values())).target
    strata = [g for g in groups if g != ALL] or [ALL]
    for q in _questions(scored, settings):
        rates = {g: np.array([scored[d].rates[q][c] for d, convs in groups[g] for c in convs]) for g in strata}
        if rel < settings["reference"]:
            kept = state["reference_rates"].setdefault(q, {})
            for g, x in rates.items():
                kept.setdefault(g, []).extend(float(v) for v in x)
        checks = al.evidence_checks(
            rates, question=q, state=state, settings=settings, shares=budget, target=q == target
        )
        for g, found in checks.items():
            if g in rows:
                rows[g]["checks"] += found


def _freeze(state, settings, model) -> None:
    """The end of the reference period: the drop checks' thresholds per question and role, and the roles' mix."""
    sums = state["reference_rates"]
    if settings["drop"] is not None and sums:
        target = next(iter(sums))
        questions = len(sums) - 1
        shares = al.budget(
            settings["alpha"],
            fail_under=settings["fail_under"],
            drop=settings["drop"],
            questions=questions,
            shift=settings["shift"],
        )
        per_q = {q: shares["drop"] if q == target else shares["question_drop"] for q in sums}
        state["thresholds"] = al.freeze_reference(sums, drop=settings["drop"], drop_share=per_q)
    else:
        state["thresholds"] = {}
    target_sums = next(iter(sums.values()), {})
    total = sum(len(x) for x in target_sums.values())
    state["mix"] = {g: len(x) / total for g, x in target_sums.items()} if total else {}


def _standardised(rows: dict, mix: dict) -> float | None:
    """The rate at the reference period's mix of roles (over the roles this window has): what the pooled rate
    would be had the mix not moved; shown beside the pooled rate, never tested (the roles' evidence is)."""
    have = {g: w for g, w in mix.items() if g in rows and g != ALL and rows[g]["conversations"]}
    total = sum(have.values())
    return sum(w * rows[g]["rate"] for g, w in have.items()) / total if total else None


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
