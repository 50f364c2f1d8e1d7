"""Krippendorff's alpha (calibration/judges/alpha.py): the published example, and the properties alpha must keep."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.judges.alpha import alpha_replicates, judge_alpha, question_alpha, reviewer_alpha, unit_pairs

nan = np.nan
# Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability": 4 observers (rows) x 12 units, missing values
RELIABILITY_DATA = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
)


def _alpha(data: np.ndarray, level: str, values: np.ndarray | None = None, weights=None) -> float:
    """alpha of an observers x units matrix (NaN: missing), weights (units,) how often each unit counts."""
    unit = np.tile(np.arange(data.shape[1]), data.shape[0])
    v = data.ravel()
    ok = ~np.isnan(v)
    unit, v = unit[ok], v[ok]
    scale = np.unique(v) if values is None else values
    first, second, w = unit_pairs(unit)
    W = np.ones((1, len(first))) if weights is None else np.asarray(weights, float)[unit[first]][None]
    return float(
        alpha_replicates(np.searchsorted(scale, v)[first], np.searchsorted(scale, v)[second], w, W, scale, level=level)[
            0
        ]
    )


@pytest.mark.parametrize(("level", "published"), [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849)])
def test_krippendorffs_published_example(level, published):
    assert round(_alpha(RELIABILITY_DATA, level), 3) == published


@pytest.mark.parametrize("level", ["nominal", "ordinal", "interval"])
def test_perfect_agreement_is_one_and_order_of_units_and_observers_does_not_matter(level):
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 5, size=30).astype(float)
    agree = np.tile(truth, (3, 1))
    agree[rng.random(agree.shape) < 0.2] = nan  # missing values do not spoil perfect agreement
    assert _alpha(agree, level) == pytest.approx(1.0)
    shuffled = RELIABILITY_DATA[rng.permutation(4)][:, rng.permutation(12)]
    assert _alpha(shuffled, level) == pytest.approx(_alpha(RELIABILITY_DATA, level))


def test_units_with_one_value_add_nothing_and_a_resample_weight_counts_as_a_copy():
    lonely = np.hstack([RELIABILITY_DATA, np.array([[4], [nan], [nan], [nan]])])
    assert _alpha(lonely, "ordinal") == pytest.approx(_alpha(RELIABILITY_DATA, "ordinal"))
    weights = np.ones(12)
    weights[5] = 3  # unit 6 drawn three times
    copied = np.hstack([RELIABILITY_DATA, RELIABILITY_DATA[:, [5, 5]]])
    assert _alpha(RELIABILITY_DATA, "interval", weights=weights) == pytest.approx(_alpha(copied, "interval"))


def test_ordinal_reads_ranks_only_interval_the_values_and_nominal_neither():
    stretched = np.array([1.0, 2.0, 3.0, 10.0, 50.0])
    data = np.select([v == RELIABILITY_DATA for v in range(1, 6)], list(stretched), default=nan)
    assert _alpha(data, "ordinal") == pytest.approx(_alpha(RELIABILITY_DATA, "ordinal"))
    assert _alpha(data, "nominal") == pytest.approx(_alpha(RELIABILITY_DATA, "nominal"))
    assert _alpha(data, "interval") != pytest.approx(_alpha(RELIABILITY_DATA, "interval"), abs=0.01)


def test_answers_at_chance_give_alpha_near_zero_and_one_value_only_gives_nan():
    rng = np.random.default_rng(1)
    chance = rng.integers(1, 5, size=(2, 4000)).astype(float)
    assert abs(_alpha(chance, "ordinal")) < 0.05
    assert np.isnan(_alpha(np.ones((2, 5)), "ordinal"))


def test_judge_and_reviewer_alpha_with_intervals_and_base_rate():
    rng = np.random.default_rng(2)
    item = np.repeat(np.arange(200), 2)
    answer = np.repeat(rng.integers(0, 4, 200), 2)
    answer[::7] = rng.integers(0, 4, len(answer[::7]))  # some disagreement
    values = np.array([1.0, 2.0, 3.0, 4.0])
    conversation = item // 4
    W = np.vstack([np.ones(len(item)), rng.poisson(1.0, size=(200, conversation.max() + 1))[:, conversation]])
    rev = reviewer_alpha(item, answer, values, W)
    assert 0.5 < rev["alpha"] < 1 and rev["low"] <= rev["alpha"] <= rev["high"] and rev["turns"] == 200
    assert rev["base_rate"]["majority"] == pytest.approx(np.bincount(answer).max() / len(answer))
    perfect = judge_alpha(values[answer], answer, values, W)
    assert perfect["alpha"] == pytest.approx(1.0) and perfect["low"] == pytest.approx(1.0)
    noisy = judge_alpha(values[rng.integers(0, 4, len(answer))], answer, values, W)
    assert noisy["high"] < rev["low"]
    reviewer = np.tile([0, 1], 200)
    block = question_alpha(item, answer, values, W, {"j": values[answer]}, reviewer, ["ann", "bob"], None)
    assert set(block["per_reviewer"]) == {"ann", "bob"} and block["per_role"] is None
    assert block["per_reviewer"]["ann"]["judges"]["j"]["alpha"] == pytest.approx(1.0)
    # with two reviewers per turn, each reviewer with the other is the reviewers' alpha itself
    assert block["per_reviewer"]["ann"]["reviewers"]["alpha"] == pytest.approx(rev["alpha"])


def test_an_unknown_level_is_refused():
    with pytest.raises(ValueError, match="level='ratio'"):
        alpha_replicates(np.zeros(2, int), np.zeros(2, int), np.ones(2), np.ones((1, 2)), np.ones(2), level="ratio")
