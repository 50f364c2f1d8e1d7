"""One window's record for `monitor` (calibration/monitor/run.py): its conversations grouped ("all" and each
role), each row's rate, band, reviewers' block and shift check (calibration/monitor/statistics.py), the
sequential checks moved on (calibration/monitor/sequential.py) and the alarms raised, each with how many of its
conversations to label."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from calibration.monitor import alarms as al
from calibration.monitor import sequential as sq
from calibration.monitor import statistics as ms
from calibration.monitor.alarms import ALL
from calibration.monitor.judge import window_judge
from calibration.monitor.windows import Window

if TYPE_CHECKING:
    from calibration.model.files import LoadedModel

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["ByDirectory", "Groups", "RoleOf", "conversation_totals", "window_groups", "window_record"]

RoleOf = dict[tuple[int, str], str | None]
"""(directory index, conversation id) -> its chatbot role (None where it has none)."""
Groups = dict[str, list[tuple[int, list[str]]]]
""""all" and each role -> (directory index, conversation ids) of a window's conversations."""
ByDirectory = dict[int, ms.Scored]
"""directory index -> its scored predictions."""


def window_record(
    w: Window,
    scored: ByDirectory,
    role_of: RoleOf,
    state: dict,
    model: LoadedModel | None,
    settings: dict,
    directories: list[Path],
) -> dict:
    """One window's record: per row ("all" and each role), what was measured and the alarms raised."""
    assert model is not None, "monitor loads the model where a window is new"
    record: dict[str, Any] = {
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
    groups = window_groups(w, scored, role_of)
    state["roles"] += sorted(g for g in groups if g != ALL and g not in state["roles"])
    rows, totals = measure_rows(groups, scored, model, settings, state, rel)
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
        row["alarms"] = [
            alarm_record(w, g, c, groups[g], scored, settings, directories) for c in row["checks"] if c["fired"]
        ]
        record["rows"][g] = row
    if state.get("mix"):
        record["standardised_rate"] = sq.standardised_rate(rows, state["mix"])
    if rel < settings["reference"]:
        sums = state["reference_sum"]
        for g, t in totals.items():
            sums[g] = asdict(ms.Totals(**sums[g]) + t) if g in sums else asdict(t)
    return record


def measure_rows(
    groups: Groups, scored: ByDirectory, model: LoadedModel, settings: dict, state: dict, rel: int
) -> tuple[dict[str, dict[str, Any]], dict[str, ms.Totals]]:
    """Each row's rate, band, reviewers' block and shift check (its p-value tested at its per-window level)."""
    budget = sq.budget_of(settings, scored)
    shift_rows = [g for g in groups if (g != ALL or len(groups) == 1)]
    eligible = [g for g in shift_rows if sum(len(c) for _, c in groups[g]) >= ms.MIN_SHIFT_CONVERSATIONS]
    shift_level = budget["shift"] / settings["horizon"] / max(len(eligible), 1)
    in_horizon = rel < settings["horizon"]
    totals: dict[str, ms.Totals] = {}
    rows: dict[str, dict[str, Any]] = {}
    for g, parts in groups.items():
        A, m = conversation_totals(parts, scored)
        totals[g] = ms.Totals.of(A, m)
        row: dict[str, Any] = {
            "conversations": totals[g].n,
            "turns": int(totals[g].m),
            "rate": totals[g].rate,
            "se": totals[g].se,
        }
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


def conversation_totals(parts: list[tuple[int, list[str]]], scored: ByDirectory) -> tuple[np.ndarray, np.ndarray]:
    """The conversations' calibrated totals A_c and turns m_c, for (directory, conversation ids) parts."""
    A = np.array([scored[d].A[c] for d, convs in parts for c in convs])
    m = np.array([scored[d].m[c] for d, convs in parts for c in convs], float)
    return A, m


def window_groups(w: Window, scored: ByDirectory, role_of: RoleOf) -> Groups:
    """ "all" and each role -> (directory, conversation ids) of the window's conversations with judge distributions
    (a conversation of conversations.jsonl that gather skipped has none: not counted)."""
    groups: Groups = {ALL: []}
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


def alarm_record(
    w: Window,
    role: str,
    check: dict,
    parts: list[tuple[int, list[str]]],
    scored: ByDirectory,
    settings: dict,
    directories: list[Path],
) -> dict:
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
