"""calibration/judges/choice.py `shrink` and `pooled_picks`: the per-question differences of two judges pooled
across questions (normal-normal empirical Bayes), their replicates from the same resamples; `whole_judge`: the
verdict on each judge as a whole (its RMSE averaged over the questions)."""

from __future__ import annotations

import numpy as np

from calibration.judges.agreement import interval
from calibration.judges.choice import pick, pooled_picks, shrink, whole_judge, whole_judge_line


def _replicates(d: np.ndarray, s: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(Q, 1 + B): the sample's differences, then bootstrap-like replicates around them (sd s per question)."""
    return np.column_stack([d, d[:, None] + s[:, None] * rng.standard_normal((len(d), n_boot))])


def test_identical_differences_come_back_unchanged():
    rng = np.random.default_rng(0)
    d = np.full(9, 0.02)
    out = shrink(_replicates(d, np.full(9, 0.01), 400, rng))
    assert out["tau2"] == 0.0
    np.testing.assert_allclose(out["pooled"][:, 0], d)
    np.testing.assert_allclose(out["mu"], 0.02)


def test_one_outlying_question_moves_little_when_the_differences_are_heterogeneous():
    rng = np.random.default_rng(1)
    d = np.array([0.0] * 8 + [0.2])
    out = shrink(_replicates(d, np.full(9, 0.005), 400, rng))
    assert out["tau2"] > 100 * 0.005**2
    assert abs(out["pooled"][-1, 0] - 0.2) < 0.01  # the one question better stays found
    assert out["shrinkage"][-1] < 0.01
    low, high = interval(out["pooled"][-1, 1:])
    assert low > 0.15


def test_noisy_differences_are_pulled_to_their_mean():
    rng = np.random.default_rng(2)
    d = 0.01 + 0.01 * rng.standard_normal(9)  # the same true difference, seen with noise sd 0.01
    out = shrink(_replicates(d, np.full(9, 0.01), 400, rng))
    spread_before, spread_after = np.std(d), np.std(out["pooled"][:, 0])
    assert spread_after < 0.5 * spread_before


def test_exact_ties_are_left_out_of_the_pooling():
    rng = np.random.default_rng(3)
    reps = _replicates(np.array([0.01, 0.02, 0.0, 0.015]), np.array([0.01, 0.01, 0.0, 0.01]), 200, rng)
    out = shrink(reps)
    assert out["pooled_questions"] == [0, 1, 3]
    np.testing.assert_array_equal(out["pooled"][2], reps[2])


def test_pooled_intervals_cover_in_a_small_simulation():
    """Questions' true differences drawn around a judge-level one, seen with noise: the pooled 95% intervals
    cover the truths at about their level (averaged over questions, as empirical-Bayes intervals do), and are
    narrower than the questions' own. Measured by between-question sd (seed 4): 0.96 at 0, 0.88 at 0.005 (about
    the noise: tau2's own uncertainty is not carried), 0.92 at 0.02; the mix here asserted within [0.9, 0.99]."""
    rng = np.random.default_rng(4)
    covered, own_width, pooled_width, n = 0, 0.0, 0.0, 0
    for _ in range(150):
        tau = rng.choice([0.0, 0.005, 0.02])
        s = rng.uniform(0.005, 0.015, 9)
        truth = 0.01 + tau * rng.standard_normal(9)
        d = truth + s * rng.standard_normal(9)
        out = shrink(_replicates(d, s, 300, rng))
        for q in range(9):
            low, high = interval(out["pooled"][q, 1:])
            covered += low <= truth[q] <= high
            pooled_width += high - low
            own_width += np.subtract(*interval(d[q] + s[q] * rng.standard_normal(300))[::-1])
            n += 1
    assert 0.9 <= covered / n <= 0.99
    assert pooled_width < own_width


def test_pooled_picks_name_the_judge_better_on_most_questions_and_keep_the_own_difference():
    rng = np.random.default_rng(5)
    B = 300
    d = 0.01 + 0.01 * rng.standard_normal(9)
    d[0] = -0.005  # on Q0 alone the copy looks better, within noise
    diff = _replicates(d, np.full(9, 0.01), B, rng)
    base = 0.5 + 0.01 * rng.standard_normal((9, 1 + B))
    rmse = {f"Q{i}": {"real": base[i], "copy": base[i] + diff[i]} for i in range(9)}
    pooled = pooled_picks(rmse)
    assert all(p["pick"] == "real" and p["rule"] == "pooled" for p in pooled.values())
    assert pick(rmse["Q0"])["pick"] == "copy"
    assert np.isclose(pooled["Q0"]["own_difference"], rmse["Q0"]["real"][0] - rmse["Q0"]["copy"][0])
    assert 0 < pooled["Q0"]["shrinkage"] <= 1


def test_the_whole_judge_is_the_mean_over_questions_and_finds_a_broad_edge_no_question_shows_alone():
    rng = np.random.default_rng(11)
    B = 400
    d = np.full(9, 0.01)  # the copy is worse by 0.01 on every question, each within its own noise (sd 0.01)
    diff = _replicates(d, np.full(9, 0.01), B, rng)
    base = 0.5 + 0.01 * rng.standard_normal((9, 1 + B))
    rmse = {f"Q{i}": {"real": base[i], "copy": base[i] + diff[i]} for i in range(9)}
    whole = whole_judge(rmse)
    assert whole["pick"] == "real" and whole["questions"] == list(rmse)
    assert np.isclose(whole["rmse_difference"], -np.mean(diff[:, 0]))  # the mean of the questions' differences
    # nine independent questions: the mean's noise is a third of one question's, so 0.01 clears it
    assert not whole["within_noise"] and whole["rmse_difference_high"] < 0
    assert sum(not pick(rmse[q])["within_noise"] for q in rmse) < 9
    assert whole_judge_line(whole).startswith("whole judge (over 9 question(s)): real, better than copy by")


def test_the_whole_judge_within_noise_says_so_and_is_symmetric_in_the_judges():
    rng = np.random.default_rng(12)
    same = 0.5 + 0.01 * rng.standard_normal((3, 201))
    other = same + 0.02 * rng.standard_normal((3, 201))
    rmse = {f"Q{i}": {"a": same[i], "b": other[i]} for i in range(3)}
    flipped = {q: {"b": r["b"], "a": r["a"]} for q, r in rmse.items()}
    one, two = whole_judge(rmse), whole_judge(flipped)
    assert one["pick"] == two["pick"] and np.isclose(one["rmse_difference"], two["rmse_difference"])
    assert one["within_noise"] and "within noise" in whole_judge_line(one)
