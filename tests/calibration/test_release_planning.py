"""How many conversations to label: the planner (calibration/release/planning.py), `suggest purpose=estimate
width= | decide_at=` and `estimate width=`."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.release.intervals import ratio_interval
from calibration.release.planning import (
    LAM_DF,
    half_width,
    labels_needed,
    rate_inflation,
    spread_from_calibrator,
    spread_from_sample,
)
from tests.calibration.test_estimate import _estimate, release  # noqa: F401  (the module's trained release)


def test_planned_n_reaches_the_width_and_one_fewer_does_not():
    for width in (0.03, 0.05, 0.1):
        n = labels_needed(2.0, 2.0, 500, width, assurance=None)  # the expected half-width
        assert half_width(2.0, 2.0, 500, n) <= width < half_width(2.0, 2.0, 500, n - 1)
        assert labels_needed(2.0, 2.0, 500, width) > n  # at 80% assurance: more
    assert labels_needed(2.0, 2.0, 500, 0.03) > labels_needed(2.0, 2.0, 500, 0.1)
    assert labels_needed(2.0, 2.0, 20, 0.001) == 20  # a finite release: labelled whole, its rate is known


def test_a_measured_spread_plans_for_its_own_noise_and_less_so_the_larger_the_pilot():
    known = labels_needed(2.0, 2.0, 500, 0.05)
    pilots = [labels_needed(2.0, 2.0, 500, 0.05, df=df) for df in (9, 19, 79)]
    assert pilots[0] > pilots[1] > pilots[2] > known  # a 10-conversation pilot's s2 is the noisiest
    assert pilots[2] < 1.2 * known


def test_the_pilot_spread_uses_a_cross_fitted_lambda_that_does_not_flatter_the_pilot():
    rng = np.random.default_rng(1)
    m = np.full(10, 3.0)
    G = rng.normal(size=10)
    Y = 2.0 + 0.8 * G + rng.normal(scale=0.5, size=10)
    s = spread_from_sample(Y, G, m, m, "pilot")
    a, b = Y - Y.sum() / m.sum() * m, G - G.sum() / m.sum() * m
    same = np.var(a - np.clip(np.cov(a, b)[0, 1] / np.var(b, ddof=1), 0, 1) * b, ddof=1)
    assert s.df == 9 and s.humans > s.ppi >= same


@pytest.mark.parametrize("seed", range(3))
def test_the_plan_counts_what_the_interval_it_plans_for_counts(seed):
    """The planned half-width is the interval it plans for (one turn per conversation, the linearised
    variance, no bounds): for ppi, the cross-fitted lam whatever it is (estimate never swaps ppi for
    humans-only), its residual variance over n - 2 and Student's t on n - 2; the pilot's spread (lam
    cross-fitted on residuals centred once) within a few percent of it."""
    rng = np.random.default_rng(seed)
    n, N = 12, 40
    m, d, fpc = np.ones(n), np.full(n, N / n), np.full(n, 1 - n / N)
    G = rng.normal(size=n)
    Y = 2.0 + 0.25 * G + rng.normal(scale=1.0, size=n)  # a calibrator that barely helps
    r = ratio_interval(Y, G - G.mean(), m, d, fpc, lam=None, variance="linearised")
    assert r["df"] == n - 2
    s2 = r["se"] ** 2 * (n - 2) / (n - 1) * n / (1 - n / N)  # the residual variance the interval used
    assert half_width(s2, 1.0, N, n, 0.1, LAM_DF["ppi"]) == pytest.approx((r["high"] - r["low"]) / 2, rel=1e-10)
    s = spread_from_sample(Y, G, m, np.ones(N), "pilot")
    assert half_width(s.ppi, s.m_bar, N, n, 0.1, LAM_DF["ppi"]) == pytest.approx((r["high"] - r["low"]) / 2, rel=0.03)
    h = ratio_interval(Y, G, m, d, fpc, lam=0.0, variance="linearised")
    assert half_width(s.humans, s.m_bar, N, n, 0.1) == pytest.approx((h["high"] - h["low"]) / 2, rel=1e-10)
    # counting lam's degree of freedom never plans fewer labels
    for width in (0.3, 0.5, 0.8):
        counted = labels_needed(s.ppi, s.m_bar, N, width, df=s.df, lam_df=1)
        ignored = labels_needed(s.ppi, s.m_bar, N, width, df=s.df)
        assert counted is None or (ignored is not None and counted >= ignored)


def test_a_pilot_that_saw_an_extreme_rate_plans_for_the_spread_of_the_calibrators_rate():
    """A pilot that happens to see almost only adherent turns sees too little spread: its variances are scaled
    by p(1 - p) at its rate shrunk towards the calibrator's over p(1 - p) at its own, never down."""
    rng = np.random.default_rng(5)
    m = np.ones(10)
    G = rng.normal(size=10)
    Y = np.r_[np.ones(9), 0.0]  # rate 0.9
    plain = spread_from_sample(Y, G, m, m, "pilot")
    assert rate_inflation(0.9, None, 10) == 1.0
    for prior, k in ((0.75, ((9 + 5 * 0.75) / 15) * (1 - (9 + 5 * 0.75) / 15) / 0.09), (0.9, 1.0), (0.97, 1.0)):
        s = spread_from_sample(Y, G, m, m, "pilot", prior)
        assert rate_inflation(0.9, prior, 10) == pytest.approx(k)
        assert (s.humans, s.ppi) == pytest.approx((k * plain.humans, k * plain.ppi))
    assert rate_inflation(0.9, 0.75, 10) > rate_inflation(0.9, 0.75, 40) > 1  # a larger sample: its own rate
    assert labels_needed(spread_from_sample(Y, G, m, m, "p", 0.6).humans, 1.0, 500, 0.05, df=9) > labels_needed(
        plain.humans, 1.0, 500, 0.05, df=9
    )


def test_a_pilot_with_no_spread_at_all_plans_from_independent_turns_at_the_shrunk_rate():
    m = np.full(10, 2.0)
    s = spread_from_sample(2 * np.ones(10), np.zeros(10), m, m, "pilot", 0.8)  # every turn adherent
    shrunk = (10 * 1.0 + 5 * 0.8) / 15
    assert s.humans == s.ppi == pytest.approx(shrunk * (1 - shrunk) * 2.0)
    assert spread_from_sample(2 * np.ones(10), np.zeros(10), m, m, "pilot").humans == 0.0  # no prior: nothing


def test_calibrator_spread_counts_the_turns_noise_for_both_and_the_level_for_humans():
    rng = np.random.default_rng(0)
    conversation = np.repeat(np.arange(50), 3)
    f = rng.uniform(0.2, 0.95, size=150)
    s = spread_from_calibrator(conversation, f)
    assert s.N == 50 and s.m_bar == 3.0
    assert s.humans > s.ppi > 0
    assert s.rate == pytest.approx(f.mean())


def test_estimate_says_how_many_more_would_reach_the_width(release, tmp_path, capsys):  # noqa: F811
    assert _estimate(release, tmp_path / "out", "width=0.02") == 0
    printed = capsys.readouterr().out
    plan = json.loads((tmp_path / "out" / "estimate.json").read_text())["width_plan"]
    assert not plan["reached"] and plan["n_labelled_conversations"] == 16
    assert "label about" in printed and "more conversations" in printed
    assert plan["n_needed"] is None or plan["n_needed"] > 16
    assert _estimate(release, tmp_path / "wide", "width=0.45") == 0
    assert json.loads((tmp_path / "wide" / "estimate.json").read_text())["width_plan"]["reached"]


@pytest.mark.parametrize("width", ["0", "-0.1", "0.5", "0.7"])
def test_width_out_of_range_is_refused_and_nothing_written(release, tmp_path, capsys, width):  # noqa: F811
    assert _estimate(release, tmp_path / "out", f"width={width}") == 2
    assert "width" in capsys.readouterr().err and not (tmp_path / "out").exists()
    sheet = tmp_path / "sheet.csv"
    assert _suggest_estimate(release, f"width={width}", f"out={sheet}") == 2
    assert not sheet.exists()


def _suggest_estimate(trained: dict, *keys: str) -> int:
    """`suggest purpose=estimate` on the trained release with a budget of 30, and these keys."""
    return main(
        ["suggest", "purpose=estimate", f"data={trained['release']}", f"model={trained['model']}", "budget=30", *keys]
    )


def test_suggest_plans_the_sample_for_a_width_and_for_a_gate(release, tmp_path, capsys):  # noqa: F811
    sheets = {}
    for key in ("width=0.15", "width=0.3", "decide_at=0.2"):
        sheet = tmp_path / key.replace("=", "_") / "sheet.csv"
        assert _suggest_estimate(release, key, f"out={sheet}") == 0
        printed = capsys.readouterr().out
        assert "ppi: label" in printed and "humans-only" in printed and "expected half-width" in printed
        plan = pd.read_csv(sheet.parent / "sample_plan.csv")
        sheets[key] = int(plan["sampled"].sum())
    assert 2 <= sheets["width=0.3"] < sheets["width=0.15"] <= 30
