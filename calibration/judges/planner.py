"""Which turns to give a second reviewer, so that the reviewers' agreement with each other (Krippendorff's
alpha, calibration/judges/alpha.py) is measured to a stated interval width, question by question.

The reviewers' alpha is measured on the turns two or more reviewers answered. Its 95% interval narrows about
as 1 / sqrt(d) with d such turns (the usual rate of a mean over independent units), so a question whose
interval is now `width_now` wide from d_now turns reaches `target` after
    more = ceil(d_now * ((width_now / target)^2 - 1))
more doubly-labelled turns, and is projected at width_now * sqrt(d_now / (d_now + n)) after n of them. A
question with fewer than MIN_PILOT such turns has no interval worth projecting from: it asks for a pilot of
MIN_PILOT first (its projected width is unknown until the pilot is labelled and the command is run again).

The candidates are the turns exactly one reviewer answered; a turn given to a second reviewer counts for every
question its first reviewer answered there. Picked greedily: each next turn serves the most questions that
still need turns, then the chatbot role with the fewest doubly-labelled turns so far (so the plan spreads over
the roles), then a conversation with no doubly-labelled turn yet (turns of one conversation are not
independent), then a seeded random order. The ranked list is second_reviewer.csv.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

__all__ = ["MIN_PILOT", "plan_second_reviewer", "projected_width", "turns_for_width"]

MIN_PILOT = 20
"""Doubly-labelled turns a question needs before its interval width is projected."""


def projected_width(width_now: float, turns_now: int, more: int | np.ndarray) -> float | np.ndarray:
    """The reviewers' alpha interval width after `more` doubly-labelled turns (module docstring).

    >>> round(float(projected_width(0.4, 25, 75)), 3)
    0.2
    """
    return width_now * np.sqrt(turns_now / (turns_now + np.asarray(more, float)))


def turns_for_width(width_now: float | None, turns_now: int, target: float) -> int:
    """More doubly-labelled turns until the interval is `target` wide (a pilot up to MIN_PILOT where there are
    fewer, or no width yet).

    >>> turns_for_width(0.4, 25, 0.2), turns_for_width(0.1, 25, 0.2), turns_for_width(None, 5, 0.2)
    (75, 0, 15)
    """
    if width_now is None or not np.isfinite(width_now) or turns_now < MIN_PILOT:
        return MIN_PILOT - turns_now
    return max(0, math.ceil(turns_now * ((width_now / target) ** 2 - 1) - 1e-9))


def plan_second_reviewer(
    keys: pd.DataFrame,
    answered: np.ndarray,
    questions: list[str],
    current: dict[str, dict | None],
    target: float,
    *,
    seed: int = 0,
) -> tuple[pd.DataFrame, dict[str, dict]]:
    """The ranked turns for a second reviewer, and per question what the plan is projected to give.

    keys: one row per label row with conversation_id, turn, judge_id (the reviewer) and role (may be empty);
    answered: (R, Q) whether that label row answers each of `questions`; current: question -> the reviewers'
    alpha block (alpha.py `reviewer_alpha`: low, high, turns) or None where no turn has two reviewers."""
    frame = keys.assign(_row=np.arange(len(keys)))
    turn_keys = ["conversation_id", "turn"]
    per_turn = frame.groupby(turn_keys, sort=True)
    reviewers = per_turn["judge_id"].transform("nunique").to_numpy()
    now: dict[str, tuple[float | None, int]] = {}
    need = np.zeros(len(questions), int)
    for q, qid in enumerate(questions):
        block = current.get(qid)
        width = None if block is None or block["alpha"] is None else block["high"] - block["low"]
        turns = 0 if block is None else int(block["turns"])
        now[qid] = (width, turns)
        need[q] = turns_for_width(width, turns, target)
    single = frame[reviewers == 1]
    cand = single.groupby(turn_keys, sort=True).agg(
        reviewer=("judge_id", "first"), role=("role", "first"), first=("_row", "first")
    )
    serves = answered[cand["first"].to_numpy()]  # (C, Q) the questions each candidate's reviewer answered
    doubled_roles = frame[reviewers > 1].drop_duplicates(turn_keys)["role"].value_counts().to_dict()
    doubled_convs = set(frame.loc[reviewers > 1, "conversation_id"])
    order = _greedy(serves, need.copy(), cand, doubled_roles, doubled_convs, seed)
    plan = cand.iloc[order].reset_index()
    gained = np.cumsum(serves[order], axis=0)  # (n, Q) doubly-labelled turns added per question
    plan["questions"] = [" ".join(q for q, s in zip(questions, row, strict=True) if s) for row in serves[order]]
    worst = []
    for k in range(len(order)):
        widths = [
            projected_width(width, turns, gained[k, q])
            for q, (width, turns) in enumerate(now[qid] for qid in questions)
            if width is not None and turns >= MIN_PILOT and need[q] > 0
        ]
        worst.append(round(float(max(widths)), 4) if widths else None)
    plan["projected_width"] = worst
    plan.insert(0, "rank", np.arange(1, len(plan) + 1))
    plan = plan.rename(columns={"reviewer": "first_reviewer"}).drop(columns="first")
    summary = {}
    for q, qid in enumerate(questions):
        width, turns = now[qid]
        added = int(gained[-1, q]) if len(order) else 0
        summary[qid] = {
            "width_now": None if width is None else round(width, 4),
            "doubly_labelled_turns": turns,
            "turns_needed": int(need[q]),
            "turns_planned": added,
            "projected_width": None
            if width is None or turns < MIN_PILOT
            else round(float(projected_width(width, turns, added)), 4),
            "short_by": max(0, int(need[q]) - added),
        }
    return plan, summary


def _greedy(
    serves: np.ndarray, need: np.ndarray, cand: pd.DataFrame, doubled_roles: dict, doubled_convs: set, seed: int
) -> list[int]:
    """Candidate indices in the order they are picked (module docstring), until no question needs a turn or
    no candidate serves one that does."""
    rng = np.random.default_rng([seed, 63])
    tiebreak = rng.permutation(len(cand))
    roles = cand["role"].to_numpy()
    convs = cand.index.get_level_values("conversation_id").to_numpy()
    role_count = np.array([doubled_roles.get(r, 0) for r in roles], float)
    fresh = np.array([c not in doubled_convs for c in convs])
    left = np.ones(len(cand), bool)
    order: list[int] = []
    while (need > 0).any():
        gain = (serves & (need > 0)).sum(1)
        usable = left & (gain > 0)
        if not usable.any():
            break
        # lexicographic: most questions served, least-covered role, fresh conversation, random
        score = np.lexsort((tiebreak, ~fresh, role_count, -gain))
        best = next(int(i) for i in score if usable[i])
        order.append(best)
        left[best] = False
        need -= serves[best].astype(int)
        role_count[roles == roles[best]] += 1
        fresh[convs == convs[best]] = False
    return order
