"""The monitor's statistics hold their levels by simulation, at levels as small as the alarms use, for rates of any
shape in [0, 1]: mostly failing, skewed, 5 conversations a window or 250, a mix of roles that moves (issue 58)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calibration.monitor.canary import canary_test
from calibration.monitor.evidence import Bettor, Standardised, lower_bound, weighted_lower_bound


def _at_most(observed: float, level: float, draws: int) -> bool:
    """observed <= level, allowing 4 Monte Carlo standard errors."""
    return observed <= level + 4 * math.sqrt(level * (1 - level) / draws)


@pytest.mark.parametrize(("a", "b", "per_window"), [(0.3, 2.0, 5), (5.0, 0.5, 40), (1.0, 1.0, 250)])
def test_a_roles_e_process_crosses_its_level_no_more_often_than_it_says(a, b, per_window):
    rng = np.random.default_rng(0)
    streams, level = 4000, 0.01
    mean = a / (a + b)
    bettor = Bettor.start(streams, prior_mean=np.full(streams, mean))
    peak = np.zeros(streams)
    for _ in range(52 if per_window < 100 else 12):
        bettor = bettor.update(rng.beta(a, b, (streams, per_window)), theta=np.full(streams, mean))
        peak = np.maximum(peak, bettor.log_wealth)
    assert _at_most(float(np.mean(peak >= math.log(1 / level))), level, streams)


def test_a_roles_e_process_finds_a_persistent_drop():
    rng = np.random.default_rng(1)
    bettor = Bettor.start(200, prior_mean=np.full(200, 0.8))
    for _ in range(10):
        bettor = bettor.update(rng.beta(6, 4, (200, 40)), theta=np.full(200, 0.75))  # mean 0.6 < 0.75
    assert np.mean(bettor.log_wealth >= math.log(1 / 0.001)) > 0.95


def test_the_standardised_row_ignores_a_moving_mix():
    """Roles at 0.9 and 0.3; the mix swings from 90/10 to 10/90: the pooled rate moves by 0.48, "all" holds."""
    rng = np.random.default_rng(2)
    streams, level, shares = 2000, 0.01, np.array([0.5, 0.5])
    means = np.array([0.9, 0.3])
    whole = Standardised.start(np.tile(means, (streams, 1)))
    theta = np.full(streams, float(shares @ means))
    peak = np.zeros(streams)
    for w in range(52):
        share_a = 0.9 if w % 2 else 0.1
        n = rng.binomial(60, share_a, streams)
        width = 60
        x = np.stack([rng.binomial(1, m, (streams, width)).astype(float) for m in means], axis=1)
        mask = np.stack([np.arange(width)[None, :] < n[:, None], np.arange(width)[None, :] < (60 - n)[:, None]], axis=1)
        whole = whole.update(x, mask, np.tile(shares, (streams, 1)), theta)
        peak = np.maximum(peak, whole.log_wealth)
    assert _at_most(float(np.mean(peak >= math.log(1 / level))), level, streams)


def test_the_bounds_cover_at_their_level_for_skewed_rates():
    rng = np.random.default_rng(3)
    draws, delta = 1500, 0.05
    a, b = 0.3, 2.0  # mostly failing: mean 0.13, long right tail
    mean = a / (a + b)
    missed = np.mean([lower_bound(rng.beta(a, b, 40), delta) > mean for _ in range(draws)])
    assert _at_most(float(missed), delta, draws)
    missed = np.mean(
        [
            weighted_lower_bound([rng.beta(a, b, 30), rng.beta(4, 1, 50)], np.array([0.4, 0.6]), delta)
            > 0.4 * mean + 0.6 * 0.8
            for _ in range(draws)
        ]
    )
    assert _at_most(float(missed), delta, draws)


def test_the_canary_test_holds_its_level_and_sees_a_small_shift():
    rng = np.random.default_rng(4)
    before = rng.uniform(0.3, 0.95, 40)
    fired = [canary_test(before, before + rng.normal(0, 0.03, 40), level=0.05, seed=s)["changed"] for s in range(300)]
    assert _at_most(float(np.mean(fired)), 0.05, 300)
    assert canary_test(before, before - 0.03 + rng.normal(0, 0.03, 40), level=0.01, seed=0)["changed"]


@pytest.mark.parametrize("canary", [None, "canary-folder"])
@pytest.mark.parametrize("drop", [None, 0.0])
def test_one_split_of_alpha_for_every_check_of_a_run(canary, drop):
    """Rate checks, other questions, shift and canary share alpha once: what they are given sums to alpha."""
    from calibration.monitor.sequential import budget_for

    settings = {"alpha": 0.05, "fail_under": 0.7, "drop": drop, "shift": True, "canary": canary}
    got = budget_for(settings, others=4)
    rate = got["fail_under"] + got["drop"]
    total = rate + 4 * got["question_drop"] + got["shift"] + got["canary"]
    assert total == pytest.approx(0.05)
    assert (got["canary"] > 0) == (canary is not None)
