"""Bootstrap intervals and permutation tests on cases with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calibration.evaluation import significance
from calibration.evaluation.significance import (
    bootstrap_agreement,
    bootstrap_counts,
    permutation_test,
    point_agreement,
)


def _noisy(seed: int, n: int = 300, noise: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    answers = rng.integers(1, 5, n).astype(float)
    # Rounded so that predictions have ties too, as expected answers of an ensemble can.
    return np.round(answers + rng.normal(0, noise, n), 1), answers


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_point_agreement_matches_scipy(seed: int) -> None:
    x, y = _noisy(seed)
    got = point_agreement(x, y)
    assert got["rmse"] == pytest.approx(np.sqrt(np.mean((x - y) ** 2)))
    assert got["pearson"] == pytest.approx(stats.pearsonr(x, y)[0])
    assert got["spearman"] == pytest.approx(stats.spearmanr(x, y)[0])
    assert got["kendall"] == pytest.approx(stats.kendalltau(x, y)[0])


def test_every_bootstrap_replicate_equals_scipy_on_the_resampled_rows() -> None:
    x, y = _noisy(3, n=120)
    groups = np.arange(120) // 3
    counts = bootstrap_counts(groups, 120, rng=np.random.default_rng(0), n_boot=4)
    replicates = significance._replicate_metrics([x], [np.ones_like(counts)], y, counts)
    for r in range(4):
        rows = np.repeat(np.arange(120), counts[r].astype(int))
        assert replicates["spearman"][r] == pytest.approx(stats.spearmanr(x[rows], y[rows])[0])
        assert replicates["kendall"][r] == pytest.approx(stats.kendalltau(x[rows], y[rows])[0])
        assert replicates["pearson"][r] == pytest.approx(stats.pearsonr(x[rows], y[rows])[0])


def test_bootstrap_counts_draw_whole_groups() -> None:
    groups = np.repeat(["a", "b", "c", "d"], [1, 2, 3, 4])
    counts = bootstrap_counts(groups, 10, rng=np.random.default_rng(0), n_boot=50)
    assert counts.shape == (50, 10)
    for start, size in [(0, 1), (1, 2), (3, 3), (6, 4)]:
        block = counts[:, start : start + size]
        assert np.all(block == block[:, :1])
    # Each resample draws 4 groups.
    assert np.allclose((counts[:, [0, 1, 3, 6]]).sum(axis=1), 4)


def test_perfect_predictions() -> None:
    _, y = _noisy(0)
    ci = bootstrap_agreement(y, y, rng=np.random.default_rng(0), n_boot=200)
    assert ci["rmse"] == {"value": 0.0, "low": 0.0, "high": 0.0}
    for name in ("pearson", "spearman", "kendall"):
        assert ci[name]["value"] == pytest.approx(1.0)
        assert ci[name]["low"] == pytest.approx(1.0)


def test_constant_predictions_have_undefined_correlations() -> None:
    _, y = _noisy(0)
    constant = np.full_like(y, y.mean())
    ci = bootstrap_agreement(constant, y, rng=np.random.default_rng(0), n_boot=200)
    assert ci["rmse"]["value"] == pytest.approx(y.std())
    assert ci["rmse"]["low"] < y.std() < ci["rmse"]["high"]
    for name in ("pearson", "spearman", "kendall"):
        assert np.isnan(ci[name]["value"]) and np.isnan(ci[name]["low"])
    test = permutation_test(constant, y, y, rng=np.random.default_rng(0), n_perm=99)
    assert np.isnan(test["pearson"]["p_value"])
    assert test["rmse"]["p_value"] == pytest.approx(0.01)


def test_interval_covers_the_estimate_and_is_seeded() -> None:
    x, y = _noisy(4)
    a = bootstrap_agreement(x, y, rng=np.random.default_rng(7), n_boot=300)
    b = bootstrap_agreement(x, y, rng=np.random.default_rng(7), n_boot=300)
    c = bootstrap_agreement(x, y, rng=np.random.default_rng(8), n_boot=300)
    assert a == b and a != c
    for name in significance.METRICS:
        assert a[name]["low"] < a[name]["value"] < a[name]["high"]


def test_grouped_bootstrap_is_wider_when_rows_within_a_group_are_copies() -> None:
    x, y = _noisy(5, n=60)
    groups = np.repeat(np.arange(60), 5)
    x, y = np.repeat(x, 5), np.repeat(y, 5)
    by_row = bootstrap_agreement(x, y, rng=np.random.default_rng(0), n_boot=500)
    by_group = bootstrap_agreement(x, y, rng=np.random.default_rng(0), groups=groups, n_boot=500)
    for name in significance.METRICS:
        width_row = by_row[name]["high"] - by_row[name]["low"]
        width_group = by_group[name]["high"] - by_group[name]["low"]
        assert width_group > 1.5 * width_row


def test_clearly_better_model_is_significant() -> None:
    good, y = _noisy(6, noise=0.5)
    bad = np.random.default_rng(0).uniform(1, 4, len(y))
    result = permutation_test(bad, good, y, rng=np.random.default_rng(0), n_perm=500)
    assert result["rmse"]["difference"] > 0 and result["pearson"]["difference"] < 0
    for name in significance.METRICS:
        assert result[name]["p_value"] < 0.01


def test_permuted_labels_give_non_significant_tests_at_the_nominal_rate() -> None:
    # Both methods are equally good by construction (noise of the same size): the test should reject
    # about 5% of the time, and not for the seed pinned here.
    rejections = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        y = rng.integers(1, 5, 200).astype(float)
        a, b = y + rng.normal(0, 1, 200), y + rng.normal(0, 1, 200)
        result = permutation_test(a, b, y, rng=rng, groups=np.arange(200) // 2, n_perm=200)
        rejections += result["rmse"]["p_value"] < 0.05
        if seed == 0:
            assert all(result[name]["p_value"] > 0.05 for name in significance.METRICS)
    assert rejections <= 6


def test_labels_unrelated_to_both_methods_are_non_significant() -> None:
    x, y = _noisy(7)
    shuffled = np.random.default_rng(1).permutation(y)
    baseline = np.random.default_rng(2).permutation(x)
    result = permutation_test(baseline, x, shuffled, rng=np.random.default_rng(3), n_perm=500)
    for name in significance.METRICS:
        assert result[name]["p_value"] > 0.05


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"expected": np.ones(3), "answers": np.ones(4)}, "3 rows but the answers have 4"),
        ({"expected": np.array([1.0, np.nan]), "answers": np.ones(2)}, "NaN"),
        ({"expected": np.ones((2, 2)), "answers": np.ones(2)}, "must be 1-D"),
        ({"expected": np.ones(2), "answers": np.ones(2), "level": 1.5}, "level must be in"),
        ({"expected": np.ones(2), "answers": np.ones(2), "groups": [1]}, "groups has 1 rows"),
    ],
)
def test_bad_input(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bootstrap_agreement(rng=np.random.default_rng(0), n_boot=10, **kwargs)
