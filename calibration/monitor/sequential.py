"""The sequential checks of `monitor` over its windows: which questions are watched, the reference period's
per-role rates kept until it ends, the thresholds frozen then, and each window's e-processes moved on
(calibration/monitor/alarms.py decides; calibration/monitor/evidence.py holds the statistics)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from calibration.monitor import alarms as al
from calibration.monitor.alarms import ALL

if TYPE_CHECKING:
    from calibration.monitor.statistics import Scored

__all__ = ["budget_for", "budget_of", "freeze", "questions_of", "standardised_rate", "update"]


def questions_of(scored: dict[int, Scored], settings: dict) -> list[str]:
    """The questions the sequential checks run on: the target first, then (questions=true) every other."""
    first = next(iter(scored.values()))
    others = [q for q in first.rates if q != first.target] if settings["questions"] else []
    return [first.target, *others]


def budget_of(settings: dict, scored: dict[int, Scored]) -> dict:
    return budget_for(settings, len(questions_of(scored, settings)) - 1)


def budget_for(settings: dict, others: int) -> dict:
    """The run's alpha split (alarms.budget) from its settings: the one split every check of the run uses, the
    canary's share included where canary= is set. others: the rubric questions watched besides the target."""
    return al.budget(
        settings["alpha"],
        fail_under=settings["fail_under"],
        drop=settings["drop"],
        questions=others,
        shift=settings["shift"],
        canary=settings.get("canary") is not None,
    )


def update(
    rows: dict[str, dict],
    groups: dict[str, list[tuple[int, list[str]]]],
    scored: dict[int, Scored],
    state: dict,
    settings: dict,
    rel: int,
) -> None:
    """The e-processes of every monitored question moved on by this window's conversations (in their order);
    during the reference period its per-role sums are kept instead for the drop checks' thresholds."""
    budget = budget_of(settings, scored)
    target = next(iter(scored.values())).target
    strata = [g for g in groups if g != ALL] or [ALL]
    for q in questions_of(scored, settings):
        rates = {g: np.array([scored[d].rates[q][c] for d, convs in groups[g] for c in convs]) for g in strata}
        for g in (state.get("thresholds") or {}).get(q) or {}:
            if g != ALL:  # a role absent this window: its evidence ages all the same
                rates.setdefault(g, np.zeros(0))
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


def freeze(state: dict, settings: dict) -> None:
    """The end of the reference period: the drop checks' thresholds per question and role, and the roles' mix."""
    sums = state["reference_rates"]
    if settings["drop"] is not None and sums:
        target = next(iter(sums))
        shares = budget_for(settings, len(sums) - 1)
        per_q = {q: shares["drop"] if q == target else shares["question_drop"] for q in sums}
        state["thresholds"] = al.freeze_reference(sums, drop=settings["drop"], drop_share=per_q)
    else:
        state["thresholds"] = {}
    target_sums: dict[str, list[float]] = next(iter(sums.values()), {})
    total = sum(len(x) for x in target_sums.values())
    state["mix"] = {g: len(x) / total for g, x in target_sums.items()} if total else {}


def standardised_rate(rows: dict, mix: dict) -> float | None:
    """The rate at the reference period's mix of roles (over the roles this window has): what the pooled rate
    would be had the mix not moved; shown beside the pooled rate, never tested (the roles' evidence is)."""
    have = {g: w for g, w in mix.items() if g in rows and g != ALL and rows[g]["conversations"]}
    total = sum(have.values())
    return sum(w * rows[g]["rate"] for g, w in have.items()) / total if total else None
