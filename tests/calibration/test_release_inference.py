"""The release estimators against ppi-python (singleton conversations) and against simulations where the
truth is known (clustered turns, unequal inclusion probabilities, two releases)."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest

from calibration.release.inference import (
    ClusterSample,
    classical_mean,
    difference,
    effective_labels,
    ppi_mean,
)


def _singletons(seed: int, n: int = 40, N: int = 400) -> tuple[ClusterSample, np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    A = rng.uniform(size=N)
    Y = (rng.uniform(size=n) < 0.6).astype(float)
    F = np.clip(0.6 * Y + 0.4 * rng.uniform(size=n), 0, 1)
    return ClusterSample(A=A, m_all=np.ones(N), Y=Y, F=F, m_lab=np.ones(n)), Y, F, A


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("lam", [0.0, 0.3, 1.0])
def test_singletons_equal_ppi_python(seed, lam):
    s, Y, F, A = _singletons(seed)
    mine = ppi_mean(s, lam=lam, alpha=0.1, ddof=0, quantile="normal", population="process", variance="linearised")
    low, high = ppi_py.ppi_mean_ci(Y, F, A, alpha=0.1, lam=lam)
    assert mine.low == pytest.approx(float(low[0]), abs=1e-12)
    assert mine.high == pytest.approx(float(high[0]), abs=1e-12)
    assert mine.estimate == pytest.approx(float(ppi_py.ppi_mean_pointestimate(Y, F, A, lam=lam)[0]), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_humans_only_equals_classical_interval(seed):
    s, Y, _, _ = _singletons(seed)
    mine = classical_mean(s, alpha=0.1, ddof=0, quantile="normal", population="process", variance="linearised")
    low, high = ppi_py.classical_mean_ci(Y, alpha=0.1)
    assert (mine.low, mine.high) == pytest.approx((float(low), float(high)), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_power_tuning_never_widens(seed):
    s, *_ = _singletons(seed, n=25)
    tuned = ppi_mean(s)
    assert 0.0 <= tuned.lam <= 1.0
    assert tuned.se <= ppi_mean(s, lam=0.0).se + 1e-12
    # the cross-fitted lam spends a degree of freedom (intervals.py `lam_degrees_of_freedom`): no wider than
    # the best fixed lam once that is counted
    assert tuned.se <= ppi_mean(s, lam=1.0).se * np.sqrt((s.n - 1) / (s.n - 2)) + 1e-12
    assert tuned.se <= classical_mean(s).se + 1e-12
    assert effective_labels(s.n, classical_mean(s), tuned) >= s.n - 1e-9


def _clustered_release(rng, N=300, bias=0.15):
    """Conversations of 1-8 turns sharing a conversation effect (turns are not independent); a calibrator
    that is biased by `bias` and noisy; returns per-turn truth and predictions."""
    m = rng.integers(1, 9, size=N)
    conv = np.repeat(np.arange(N), m)
    effect = rng.normal(0, 1.5, size=N)[conv]
    p_true = 1 / (1 + np.exp(-(0.3 + effect + rng.normal(0, 0.5, size=len(conv)))))
    y = (rng.uniform(size=len(conv)) < p_true).astype(float)
    f = np.clip(p_true + bias + rng.normal(0, 0.1, size=len(conv)), 0, 1)
    return conv, m, y, f


def _sample(conv, m, y, f, picked, pi=None) -> ClusterSample:
    A = np.bincount(conv, weights=f)
    Y = np.bincount(conv, weights=y)[picked]
    F = np.bincount(conv, weights=f)[picked]
    return ClusterSample(A=A, m_all=m.astype(float), Y=Y, F=F, m_lab=m[picked].astype(float), pi=pi)


def test_clustered_coverage_holds_with_a_biased_calibrator():
    rng = np.random.default_rng(0)
    conv, m, y, f = _clustered_release(rng)
    truth = y.mean()
    cover_ppi = cover_humans = cover_naive = 0
    draws = 400
    for _ in range(draws):
        picked = rng.choice(len(m), size=30, replace=False)
        s = _sample(conv, m, y, f, picked)
        ppi, humans = ppi_mean(s), classical_mean(s)
        cover_ppi += ppi.low <= truth <= ppi.high
        cover_humans += humans.low <= truth <= humans.high
        # The same turns treated as independent draws: what ignoring the clusters would claim.
        turns = np.isin(conv, picked)
        naive = ClusterSample(A=f, m_all=np.ones(len(f)), Y=y[turns], F=f[turns], m_lab=np.ones(turns.sum()))
        est = classical_mean(naive)
        cover_naive += est.low <= truth <= est.high
    assert f.mean() - truth > 0.1  # the calibrator alone is far off
    assert cover_ppi / draws >= 0.86
    assert cover_humans / draws >= 0.86
    assert cover_naive / draws < cover_humans / draws - 0.05  # clustering matters on this data


def test_finite_release_interval_holds_its_level_when_most_of_it_is_labelled():
    rng = np.random.default_rng(3)
    conv, m, y, f = _clustered_release(rng, N=60, bias=0.1)
    truth = y.mean()
    cover, widths, process_widths = 0, [], []
    for _ in range(400):
        s = _sample(conv, m, y, f, rng.choice(60, size=40, replace=False))
        est = ppi_mean(s)
        cover += est.low <= truth <= est.high
        widths.append(est.width)
        process_widths.append(ppi_mean(s, population="process").width)
    assert 0.86 <= cover / 400 <= 0.97  # near nominal, not the near-1 of an interval without the (1 - n/N) factor
    assert np.mean(widths) < 0.8 * np.mean(process_widths)
    whole = ppi_mean(_sample(conv, m, y, f, np.arange(60)))
    assert whole.estimate == pytest.approx(truth) and whole.width == pytest.approx(0.0, abs=1e-12)


def test_inclusion_probabilities_remove_the_bias_of_an_unequal_sample():
    rng = np.random.default_rng(1)
    conv, m, y, f = _clustered_release(rng, bias=0.0)
    truth = y.mean()
    conv_rate = np.bincount(conv, weights=y) / m
    pi = np.clip(0.05 + 0.25 * conv_rate, 0.01, 1)  # adherent conversations are sampled more often
    weighted, unweighted = [], []
    for _ in range(300):
        picked = np.flatnonzero(rng.uniform(size=len(m)) < pi)
        weighted.append(ppi_mean(_sample(conv, m, y, f, picked, pi=pi[picked]), lam=0.0).estimate)
        unweighted.append(ppi_mean(_sample(conv, m, y, f, picked), lam=0.0).estimate)
    assert abs(np.mean(weighted) - truth) < 0.01
    assert np.mean(unweighted) - truth > 0.03


def test_two_releases_with_the_same_truth_cover_zero():
    rng = np.random.default_rng(2)
    covered, draws = 0, 300
    for _ in range(draws):
        releases = []
        for _ in range(2):
            conv, m, y, f = _clustered_release(rng, N=150)
            picked = rng.choice(len(m), size=25, replace=False)
            releases.append(ppi_mean(_sample(conv, m, y, f, picked), population="process"))
        d = difference(*releases, alpha=0.1)
        covered += d["low"] <= 0 <= d["high"]
        assert 0 <= d["p"] <= 1
    # Each release is its own draw from the same process: the process-level difference is 0.
    assert covered / draws >= 0.86


def test_difference_p_value_is_small_for_a_clear_gap():
    a = ppi_mean(_singletons(0)[0])
    b = ppi_mean(
        ClusterSample(A=np.zeros(400), m_all=np.ones(400), Y=np.zeros(40), F=np.zeros(40), m_lab=np.ones(40)), lam=0.0
    )
    d = difference(a, b)
    assert d["low"] > 0 and d["p"] < 1e-6


def test_too_few_labelled_conversations_is_an_error():
    with pytest.raises(ValueError, match="at least 2"):
        ppi_mean(ClusterSample(A=np.ones(5), m_all=np.ones(5), Y=np.ones(1), F=np.ones(1), m_lab=np.ones(1)))


@pytest.mark.parametrize("seed", range(5))
def test_same_sample_tuned_lam_equals_ppi_python(seed):
    # The building block of the cross-fitted default: ppi-python's power tuning on one sample.
    s, Y, F, A = _singletons(seed)
    mine = ppi_mean(s, lam="tuned", alpha=0.1, ddof=0, quantile="normal", population="process", variance="linearised")
    assert mine.estimate == pytest.approx(float(ppi_py.ppi_mean_pointestimate(Y, F, A)[0]), abs=1e-12)
    low, high = ppi_py.ppi_mean_ci(Y, F, A, alpha=0.1)
    assert (mine.low, mine.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-12)


def test_rate_interval_stays_inside_0_1_at_two_conversations():
    # Two labelled conversations, all turns adherent, a calibrator that disagrees: the case of issue 36
    # ([0.234, 1.266] before the Wilson interval).
    s = ClusterSample(
        A=np.full(30, 1.4),
        m_all=np.full(30, 2.0),
        Y=np.array([2.0, 2.0]),
        F=np.array([1.9, 0.4]),
        m_lab=np.array([2.0, 2.0]),
    )
    for est in (ppi_mean(s, bounds=(0, 1)), classical_mean(s, bounds=(0, 1)), ppi_mean(s, lam=1.0, bounds=(0, 1))):
        assert 0.0 <= est.low < est.high <= 1.0
    assert classical_mean(s, bounds=(0, 1)).low < 0.9  # every label adherent, still not a point


def test_small_sample_rate_coverage_on_a_skewed_rate():
    """n = 10 conversations of a release whose rate is 0.9, 2,000 draws at once (intervals.py is vectorised):
    the Wilson interval holds 90% where the Student-t (Wald) one falls short."""
    from calibration.release.intervals import ratio_interval

    rng = np.random.default_rng(0)
    N, n, draws = 200, 10, 2000
    m = rng.integers(1, 4, size=N).astype(float)
    y = np.array([rng.binomial(int(k), 0.9) for k in m], float)
    f = np.clip(y + rng.normal(0, 0.6, size=N), 0, m)
    truth = y.sum() / m.sum()
    idx = np.argsort(rng.uniform(size=(draws, N)), axis=1)[:, :n]
    d, fpc = np.full((draws, n), N / n), np.full((draws, n), 1 - n / N)
    covered = {}
    for name, bounds in (("wilson", (0.0, 1.0)), ("wald", None)):
        r = ratio_interval(
            y[idx], f[idx] - f.sum() / m.sum() * m[idx], m[idx], d, fpc, lam=0.0, bounds=bounds, n_turns=m[idx].sum(-1)
        )
        covered[name] = float(((r["low"] <= truth) & (truth <= r["high"])).mean())
        if bounds:
            assert (r["low"] >= 0).all() and (r["high"] <= 1).all()
    assert covered["wilson"] >= 0.885
    assert covered["wald"] < covered["wilson"] - 0.02


# Two predictors (`estimate crossfit=K`: the cross-fitted calibrators and the unadapted model).


@pytest.mark.parametrize("seed", range(20))
def test_the_pair_lam_is_the_best_point_of_the_triangle(seed):
    from calibration.release.intervals import _tuned_pair

    rng = np.random.default_rng(seed)
    L = rng.normal(size=(2, 2)) * rng.uniform(0.01, 1, size=(2, 1))
    B = L @ L.T + (0 if seed % 4 else 1e-3) * np.eye(2)  # a singular B every fourth seed
    a = rng.normal(size=2)
    lam = _tuned_pair(a, B)
    grid = np.array([(x, y) for x in np.linspace(0, 1, 201) for y in np.linspace(0, 1, 201) if x + y <= 1 + 1e-12])
    value = np.einsum("ci,ij,cj->c", grid, B, grid) - 2 * grid @ a
    best = lam @ B @ lam - 2 * lam @ a
    assert lam.min() >= -1e-12 and lam.sum() <= 1 + 1e-12
    assert best <= value.min() + 1e-9


@pytest.mark.parametrize("seed", range(5))
def test_the_same_predictor_twice_gives_the_one_predictor_interval(seed):
    rng = np.random.default_rng(seed)
    conv, m, y, f = _clustered_release(rng)
    picked = rng.choice(len(m), size=20, replace=False)
    one = _sample(conv, m, y, f, picked)
    two = ClusterSample(**{**one.__dict__, "other": one})
    for population in ("finite", "process"):
        a, b = ppi_mean(one, population=population), ppi_mean(two, population=population)
        assert (b.estimate, b.low, b.high, b.lam) == pytest.approx((a.estimate, a.low, a.high, a.lam), abs=1e-12)
    assert classical_mean(two).as_dict() == classical_mean(one).as_dict()  # humans-only ignores predictors


def test_two_predictors_lean_on_the_better_one_and_keep_coverage():
    """The first predictor is noise around the truth's level, the second a good one: the pair is about as
    narrow as the good one alone, far narrower than the noisy one, and covers."""
    rng = np.random.default_rng(7)
    conv, m, y, good = _clustered_release(rng, bias=0.05)
    noisy = np.clip(good.mean() + rng.normal(0, 0.3, size=len(good)), 0, 1)
    truth = y.mean()
    widths = {"noisy": [], "good": [], "pair": []}
    covered = 0
    draws = 300
    for _ in range(draws):
        picked = rng.choice(len(m), size=20, replace=False)
        s_noisy, s_good = _sample(conv, m, y, noisy, picked), _sample(conv, m, y, good, picked)
        pair = ppi_mean(ClusterSample(**{**s_noisy.__dict__, "other": s_good}), bounds=(0, 1))
        widths["pair"].append(pair.width)
        widths["noisy"].append(ppi_mean(s_noisy, bounds=(0, 1)).width)
        widths["good"].append(ppi_mean(s_good, bounds=(0, 1)).width)
        covered += pair.low <= truth <= pair.high
    mean = {k: float(np.mean(v)) for k, v in widths.items()}
    assert mean["good"] < 0.9 * mean["noisy"]  # the case is one where the choice matters
    assert mean["pair"] <= 1.06 * mean["good"]  # the second lam spends a second degree of freedom
    assert covered / draws >= 0.86
