"""The cross-fitted lam spends a degree of freedom (calibration/release/intervals.py
`lam_degrees_of_freedom`): the rule on a constructed sample, and what it buys where the calibrator's apparent
help is noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calibration.release.inference import ClusterSample, ppi_mean, uses_calibrator
from calibration.release.intervals import lam_degrees_of_freedom, ratio_interval


def _sample(n=10, seed=0, noise=0.4):
    rng = np.random.default_rng(seed)
    m = rng.integers(1, 5, size=n).astype(float)
    Y = m * rng.uniform(0.3, 1.0, size=n)
    G = 0.7 * (Y - Y.mean()) + rng.normal(0, noise, size=n)  # a control variate that helps
    return Y, G, m


def test_rule_counts_one_degree_per_predictor():
    assert lam_degrees_of_freedom(None, 1, 10, 1) == 1
    assert lam_degrees_of_freedom(None, 2, 10, 1) == 2
    assert lam_degrees_of_freedom(None, 2, 3, 1) == 1  # never leaves fewer than one
    assert lam_degrees_of_freedom(0.0, 1, 10, 1) == 0  # a fixed lam (humans-only: 0) is not estimated
    assert lam_degrees_of_freedom("tuned", 1, 10, 1) == 0


@pytest.mark.parametrize("seed", range(3))
def test_cross_fitted_interval_spends_one_degree_of_freedom(seed):
    Y, G, m = _sample(seed=seed)
    n = len(Y)
    args = (Y, G, m, np.full(n, 5.0), np.full(n, 0.8))
    new = ratio_interval(*args, lam=None, alpha=0.1)
    old = ratio_interval(*args, lam=None, alpha=0.1, lam_df=False)
    assert new["df"] == n - 2 and old["df"] == n - 1
    assert new["estimate"] == pytest.approx(old["estimate"], abs=1e-15)  # the same lam, the same estimate
    assert new["se"] / old["se"] == pytest.approx(np.sqrt((n - 1) / (n - 2)), rel=1e-12)
    half = (new["high"] - new["low"]) / 2
    assert half == pytest.approx(stats.t.ppf(0.95, n - 2) * new["se"], rel=1e-12)
    for lam in (0.0, 1.0, 0.4, "tuned"):  # fixed or same-sample lam: untouched (ppi-python's reduction)
        fixed = ratio_interval(*args, lam=lam, alpha=0.1)
        assert fixed["df"] == n - 1
        assert fixed["se"] == pytest.approx(ratio_interval(*args, lam=lam, alpha=0.1, lam_df=False)["se"], rel=1e-15)


def test_ppi_mean_reports_the_degrees_of_freedom():
    Y, _, m = _sample(n=12)
    F = Y + np.random.default_rng(1).normal(0, 0.05, size=12)  # a calibrator that nearly knows the labels
    s = ClusterSample(A=np.full(60, 0.6), m_all=np.ones(60), Y=Y, F=F, m_lab=m)
    est = ppi_mean(s)
    assert est.lam > 0 and est.df == 12 - 2  # the calibrator kept, its lam estimated
    assert ppi_mean(s, lam=0.0).df == 12 - 1


def test_noise_help_does_not_cost_coverage():
    """A biased calibrator unrelated to the labels, skewed clustered labels, 10 of 60 conversations: its
    apparent help is lam's noise; ppi (the narrower of it and humans-only, as `estimate` keeps) must cover
    within a point of humans-only on the same draws, and more often than with lam taken as known."""
    rng = np.random.default_rng(3)
    N, n, draws = 60, 10, 6000
    m = rng.integers(1, 8, size=N).astype(float)
    p = rng.beta(0.6, 0.3, size=N)  # skewed: most conversations adhere, a few badly
    Y = rng.binomial(m.astype(int), p).astype(float)
    F = m * np.clip(rng.beta(2, 2, size=N) + 0.15, 0, 1)  # biased, uninformative
    G = F - F.sum() / m.sum() * m
    truth = Y.sum() / m.sum()
    idx = np.argsort(rng.uniform(size=(draws, N)), axis=1)[:, :n]
    args = (Y[idx], G[idx], m[idx], np.full(idx.shape, N / n), np.full(idx.shape, 1 - n / N))
    turns = args[2].sum(-1)
    humans = ratio_interval(*args, lam=0.0, bounds=(0, 1), n_turns=turns)
    hits = {}
    for lam_df in (True, False):
        ppi = ratio_interval(*args, lam=None, bounds=(0, 1), n_turns=turns, lam_df=lam_df)
        keep = uses_calibrator(ppi["lam"], ppi["high"] - ppi["low"], humans["high"] - humans["low"])
        low, high = np.where(keep, ppi["low"], humans["low"]), np.where(keep, ppi["high"], humans["high"])
        hits[lam_df] = ((low <= truth) & (truth <= high)).mean()
    humans_hit = ((humans["low"] <= truth) & (truth <= humans["high"])).mean()
    assert hits[True] >= humans_hit - 0.01  # paired, 6,000 draws: Monte-Carlo sd of the difference ~0.002
    assert hits[True] > hits[False]  # the lam taken as known covers less
