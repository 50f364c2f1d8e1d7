"""The cross-fitted lam spends a degree of freedom (calibration/release/intervals.py
`lam_degrees_of_freedom`), and its noise enters the jackknife (the delete-one estimates refitted, issue 51):
the rules on constructed samples, and what they buy where the calibrator's apparent help is noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from calibration.release.inference import ClusterSample, classical_mean, ppi_mean
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


@pytest.mark.parametrize("seed", range(4))
def test_jackknife_refits_lam_in_every_delete_one_sample(seed):
    """The jackknife is of the whole cross-fitted estimator: each delete-one estimate is what ratio_interval
    itself computes on the sample less that conversation (its lams cross-fitted there)."""
    Y, G, m = _sample(n=9, seed=seed, noise=0.8)
    n, N = len(Y), 30
    d, fpc = np.full(n, N / n), np.full(n, 1 - n / N)
    thetas = np.array(
        [ratio_interval(*(x[np.arange(n) != i] for x in (Y, G, m, d, fpc)), lam=None)["estimate"] for i in range(n)]
    )
    jack = fpc.mean() * (n - 1) / n * ((thetas - thetas.mean()) ** 2).sum()
    spent = (n - 1) / (n - 2)  # lam's degree of freedom
    lin = ratio_interval(Y, G, m, d, fpc, lam=None, variance="linearised")["se"] ** 2
    got = ratio_interval(Y, G, m, d, fpc, lam=None)["se"] ** 2
    assert got == pytest.approx(max(lin, jack * spent), rel=1e-10)
    # vectorised over samples: the same row by row
    many = ratio_interval(*(np.stack([x, x[::-1]]) for x in (Y, G, m, d, fpc)), lam=None)["se"] ** 2
    assert many[0] == pytest.approx(got, rel=1e-12)


def test_jackknife_refits_both_lams_of_two_predictors():
    Y, G, m = _sample(n=9, seed=1, noise=0.5)
    G2 = np.stack([G, 0.5 * G + np.random.default_rng(7).normal(0, 0.5, size=9)], -1)
    n, N = len(Y), 30
    d, fpc = np.full(n, N / n), np.full(n, 1 - n / N)
    args = (Y, G2, m, d, fpc)
    thetas = np.array([ratio_interval(*(x[np.arange(n) != i] for x in args), lam=None)["estimate"] for i in range(n)])
    jack = fpc.mean() * (n - 1) / n * ((thetas - thetas.mean()) ** 2).sum()
    got = ratio_interval(*args, lam=None)
    spent = (n - 1) / got["df"]  # two lams: two degrees of freedom
    lin = ratio_interval(*args, lam=None, variance="linearised")["se"] ** 2
    assert got["df"] == n - 3
    assert got["se"] ** 2 == pytest.approx(max(lin, jack * spent), rel=1e-10)


def test_ppi_is_never_swapped_for_humans_only():
    """ppi_mean reports the cross-fitted estimator whatever its lam, even where it is the wider interval (a
    calibrator unrelated to the labels): choosing the narrower after seeing the sample undercovers."""
    Y, _, m = _sample(n=12, seed=5)
    F = m * np.random.default_rng(2).uniform(0, 1, size=12)  # no help
    s = ClusterSample(A=np.full(60, 0.5), m_all=np.ones(60), Y=Y, F=F, m_lab=m)
    ppi, humans = ppi_mean(s), classical_mean(s)
    assert ppi.df == 12 - 2 and humans.df == 12 - 1
    assert ppi.width > humans.width  # lam's degree of freedom and noise cost width, not coverage


def test_noise_help_does_not_cost_coverage():
    """A biased calibrator unrelated to the labels, skewed clustered labels, 10 of 60 conversations: its
    apparent help is lam's noise; ppi (`estimate`'s: the cross-fitted estimator, its jackknife refitted) must
    cover within a point of humans-only on the same draws, and more often than the interval before issue 51
    (the narrower of ppi, its jackknife not refitted, and humans-only kept where lam averaged >= 0.5)."""
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
    ppi = ratio_interval(*args, lam=None, bounds=(0, 1), n_turns=turns)
    was = ratio_interval(*args, lam=None, bounds=(0, 1), n_turns=turns, refit=False)
    keep = (was["lam"] >= 0.5) & (was["high"] - was["low"] <= humans["high"] - humans["low"])
    was = {k: np.where(keep, was[k], humans[k]) for k in ("low", "high")}

    def hit(x):
        return ((x["low"] <= truth) & (truth <= x["high"])).mean()

    assert hit(ppi) >= hit(humans) - 0.01  # paired, 6,000 draws: Monte-Carlo sd of the difference ~0.002
    assert hit(ppi) > hit(was)
