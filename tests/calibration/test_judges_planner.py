"""The second-reviewer planner (calibration/judges/planner.py): how many turns, which ones, and in what order."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.judges.planner import MIN_PILOT, plan_second_reviewer, projected_width, turns_for_width


def _keys(single: int, double: int, roles=("a", "b")) -> pd.DataFrame:
    """`single` turns with one reviewer, then `double` turns with two, in conversations of two turns each."""
    rows = []
    for t in range(single + double):
        for reviewer in ("ann", "bob")[: 1 if t < single else 2]:
            rows.append((f"c{t // 2}", str(t % 2), reviewer, roles[(t // 2) % len(roles)]))
    return pd.DataFrame(rows, columns=["conversation_id", "turn", "judge_id", "role"])


def test_the_turns_needed_bring_the_projected_width_to_the_target():
    for width, turns, target in [(0.4, 25, 0.2), (0.31, 40, 0.1), (0.12, 100, 0.1)]:
        more = turns_for_width(width, turns, target)
        assert projected_width(width, turns, more) <= target + 1e-12
        assert more == 0 or projected_width(width, turns, more - 1) > target
    assert turns_for_width(0.05, 40, 0.1) == 0
    assert turns_for_width(None, 0, 0.1) == MIN_PILOT and turns_for_width(0.5, MIN_PILOT - 3, 0.1) == 3


def test_the_plan_takes_singly_labelled_turns_alternates_roles_and_stops_when_every_question_is_served():
    keys = _keys(single=200, double=30)
    answered = np.ones((len(keys), 2), bool)
    answered[keys["turn"].to_numpy() == "1", 1] = False  # the second turns never answer q2
    current = {"q1": {"alpha": 0.6, "low": 0.45, "high": 0.75, "turns": 30}, "q2": None}
    plan, summary = plan_second_reviewer(keys, answered, ["q1", "q2"], current, 0.2)
    need = turns_for_width(0.3, 30, 0.2)
    assert summary["q1"]["turns_needed"] == need and summary["q2"]["turns_needed"] == MIN_PILOT
    assert len(plan) == max(need, MIN_PILOT) and summary["q1"]["short_by"] == summary["q2"]["short_by"] == 0
    assert summary["q1"]["projected_width"] <= 0.2 and summary["q2"]["projected_width"] is None
    assert set(plan["first_reviewer"]) == {"ann"}  # only turns one reviewer answered
    assert (plan["questions"].head(MIN_PILOT) == "q1 q2").all()  # turns serving both questions first
    assert set(plan["role"].head(4)) == {"a", "b"}  # spread over the roles
    assert plan["conversation_id"].head(10).is_unique  # fresh conversations before second turns of one
    assert plan["projected_width"].is_monotonic_decreasing


def test_a_plan_short_of_candidates_says_by_how_much_and_a_met_target_plans_nothing():
    keys = _keys(single=5, double=30)
    answered = np.ones((len(keys), 1), bool)
    wide = {"q": {"alpha": 0.5, "low": 0.2, "high": 0.8, "turns": 30}}
    plan, summary = plan_second_reviewer(keys, answered, ["q"], wide, 0.1)
    assert len(plan) == 5 and summary["q"]["short_by"] == summary["q"]["turns_needed"] - 5
    narrow = {"q": {"alpha": 0.5, "low": 0.46, "high": 0.54, "turns": 30}}
    plan, summary = plan_second_reviewer(keys, answered, ["q"], narrow, 0.1)
    assert plan.empty and summary["q"]["turns_needed"] == 0


@pytest.mark.parametrize("seed", [0, 1])
def test_the_plan_is_seeded(seed):
    keys = _keys(single=60, double=25)
    answered = np.ones((len(keys), 1), bool)
    current = {"q": {"alpha": 0.5, "low": 0.3, "high": 0.7, "turns": 25}}
    first, _ = plan_second_reviewer(keys, answered, ["q"], current, 0.3, seed=seed)
    again, _ = plan_second_reviewer(keys, answered, ["q"], current, 0.3, seed=seed)
    pd.testing.assert_frame_equal(first, again)
