"""Logprobs -> option distribution: variants, log-sum-exp, floors, coverage, no-option top-k."""

from __future__ import annotations

import math

import pytest

from rubric.judge.extraction import (
    TokenLogprob,
    from_samples,
    from_top_logprobs,
    logsumexp,
    one_hot,
    option_of,
    uniform_fallback,
    with_floor,
)

CODES = ("1", "2", "3", "4")


def top(**probs):
    return [TokenLogprob(t.replace("_", " "), math.log(p)) for t, p in probs.items()]


@pytest.mark.parametrize("token", ["3", " 3", "3.", "(3", "**3", "\n3", "'3'", " 3:"])
def test_surface_variants_name_the_option(token):
    assert option_of(token, CODES) == 2


@pytest.mark.parametrize("token", ["Okay", "33", " ", "", "three", "3a"])
def test_other_tokens_name_nothing(token):
    assert option_of(token, CODES) is None


def test_letters_are_case_insensitive():
    assert option_of(" b", ("A", "B", "C")) == 1


def test_variants_are_summed_with_log_sum_exp():
    d = from_top_logprobs(
        [
            TokenLogprob("3", math.log(0.3)),
            TokenLogprob(" 3", math.log(0.2)),
            TokenLogprob("4", math.log(0.25)),
            TokenLogprob("Okay", math.log(0.25)),
        ],
        CODES,
    )
    assert d is not None and d.source == "logprobs"
    assert d.coverage == pytest.approx(0.75)
    # 0.5 of the 0.75 covered mass is on "3", 0.25 on "4"; 1 and 2 only have the floor
    assert d.probs[2] == pytest.approx(0.5 / 0.75, rel=1e-3)
    assert d.probs[3] == pytest.approx(0.25 / 0.75, rel=1e-3)
    assert 0 < d.probs[0] < 1e-3 and d.probs[0] == d.probs[1]
    assert sum(d.probs) == pytest.approx(1.0)


def test_absent_options_get_a_floor_never_zero():
    d = from_top_logprobs([TokenLogprob("4", 0.0)], CODES, floor=1e-3)
    assert min(d.probs) > 0 and d.probs[3] > 0.99
    assert sum(d.probs) == pytest.approx(1.0)


def test_no_option_in_top_k_returns_none():
    assert from_top_logprobs(top(Okay=0.6, Sure=0.3, I=0.1), CODES) is None
    assert from_top_logprobs([], CODES) is None


def test_repeated_tokens_count_once():
    d = from_top_logprobs(
        [
            TokenLogprob("2", math.log(0.4)),
            TokenLogprob("2", math.log(0.4)),
            TokenLogprob("3", math.log(0.4)),
        ],
        CODES,
    )
    assert d.probs[1] == pytest.approx(d.probs[2])


def test_logsumexp_is_stable():
    assert logsumexp([-1000.0, -1000.0]) == pytest.approx(-1000 + math.log(2))
    assert logsumexp([]) == -math.inf


def test_samples_binary_and_fallback():
    s = from_samples(["3", " 3", "4", "Okay"], CODES)
    assert s.source == "sampled" and s.coverage == pytest.approx(0.75)
    assert s.probs[2] == pytest.approx(2 / 3, rel=1e-3)
    assert from_samples(["Okay"], CODES) is None
    b = one_hot(1, 4)
    assert b.probs.index(max(b.probs)) == 1 and min(b.probs) > 0
    f = uniform_fallback(3)
    assert f.source == "fallback" and f.coverage == 0 and f.probs == pytest.approx((1 / 3,) * 3)


def test_with_floor_handles_all_zero():
    assert with_floor([0.0, 0.0]) == (0.5, 0.5)
