"""From what a judge returned to a distribution over a question's options.

The answer is the first generated token that is not whitespace. Its top-k alternatives carry the judge's
uncertainty; the same option can appear as several surface variants (" 3", "3", "3.", "(3"), so their
probabilities are summed (log-sum-exp). A base model after "Answer:" often writes a space or a newline
first and the digit as the next token (Gemma writes " 3" as " " then "3"): the option mass is then read
over the continuations, P(option first) + P(" ") * P(option | " ") (`from_answer_steps`). `coverage` is
the mass the judge put on any option before renormalising; options missing from the top-k get a small
floor, never exactly 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

DEFAULT_FLOOR = 1e-4
_STRIP = " \t\n\r\"'`*_.,:;()[]{}<>#"


class TokenLogprob(NamedTuple):
    """One candidate for the first generated token (a NamedTuple: twenty are built per request)."""

    token: str
    """The token's text as the server returned it (may carry a leading space)."""
    logprob: float
    """Natural-log probability of the token."""


@dataclass(frozen=True)
class Distribution:
    """A judge's answer distribution over one question's options."""

    probs: tuple[float, ...]
    """One probability per option, in the question's option order; sums to 1, no zeros."""
    coverage: float
    """Probability mass on the options before renormalising (1.0 for sampled/binary/embedding)."""
    source: str
    """How it was obtained: logprobs | sampled | binary | embedding | fallback."""


def option_of(token: str, codes: Sequence[str]) -> int | None:
    """Index of the option a token names (" 3", "3.", "(b" ...), or None. Case-insensitive."""
    core = token.strip(_STRIP)
    return _code_index(tuple(codes)).get(core.upper()) if core else None


@lru_cache(maxsize=256)
def _code_index(codes: tuple[str, ...]) -> dict[str, int]:
    """Upper-cased code -> option index; the first wins if two codes differ only in case."""
    index: dict[str, int] = {}
    for i, code in enumerate(codes):
        index.setdefault(code.upper(), i)
    return index


def logsumexp(values: Sequence[float]) -> float:
    """log(sum(exp(v))) without overflow; -inf for an empty sequence.

    >>> round(logsumexp([math.log(0.25), math.log(0.25)]), 6) == round(math.log(0.5), 6)
    True
    """
    if not values:
        return -math.inf
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def with_floor(masses: Sequence[float], floor: float = DEFAULT_FLOOR) -> tuple[float, ...]:
    """Renormalise non-negative masses to sum 1 with every option at least about `floor`."""
    total = sum(masses)
    if total <= 0:
        return tuple(1.0 / len(masses) for _ in masses)
    raised = [max(m / total, floor) for m in masses]
    s = sum(raised)
    return tuple(p / s for p in raised)


def from_top_logprobs(
    top: Sequence[TokenLogprob], codes: Sequence[str], *, floor: float = DEFAULT_FLOOR
) -> Distribution | None:
    """Distribution from the first token's top-k alternatives; None when no alternative names an option."""
    per_option: list[list[float]] = [[] for _ in codes]
    for cand in _unique(top):
        idx = option_of(cand.token, codes)
        if idx is not None and cand.logprob > -math.inf:
            per_option[idx].append(cand.logprob)
    return _distribution(per_option, floor)


class AnswerStep(NamedTuple):
    """One generated position: the token the server produced there and the alternatives it reported."""

    sampled: TokenLogprob
    """The generated token and its log-probability."""
    top: Sequence[TokenLogprob]
    """The top-k candidates for this position."""


def from_answer_steps(
    steps: Sequence[AnswerStep], codes: Sequence[str], *, floor: float = DEFAULT_FLOOR
) -> Distribution | None:
    """Distribution read at the first non-whitespace generated token, summed over the continuations.

    Position i counts with the probability of the whitespace generated before it, so an option's mass is
    P(option at 0) + P(ws_0) * P(option at 1 | ws_0) + ...; only the generated whitespace can be
    followed, so mass on other whitespace tokens stays uncovered. Stops at the first generated token that
    is not whitespace. None when no candidate names an option.

    >>> ws = AnswerStep(TokenLogprob(" ", math.log(0.8)), [TokenLogprob(" ", math.log(0.8))])
    >>> digit = AnswerStep(TokenLogprob("3", math.log(0.5)), [TokenLogprob("3", math.log(0.5))])
    >>> d = from_answer_steps([ws, digit], ("1", "2", "3"))
    >>> round(d.coverage, 3), d.probs.index(max(d.probs))
    (0.4, 2)
    """
    per_option: list[list[float]] = [[] for _ in codes]
    before = 0.0  # log-probability of the whitespace generated before this position
    for step in steps:
        for cand in _unique(step.top):
            idx = option_of(cand.token, codes)
            if idx is not None and cand.logprob > -math.inf:
                per_option[idx].append(before + cand.logprob)
        if step.sampled.token.strip() or not step.sampled.token:
            break
        before += step.sampled.logprob
    return _distribution(per_option, floor)


def first_word(text: str) -> str:
    """The answer in a generated text: its first whitespace-separated word ("" for blank text)."""
    words = text.split(maxsplit=1)
    return words[0] if words else ""


def _unique(top: Sequence[TokenLogprob]) -> Iterator[TokenLogprob]:
    """Each token once: some servers repeat a token in the top-k."""
    seen: set[str] = set()
    for cand in top:
        if cand.token not in seen:
            seen.add(cand.token)
            yield cand


def _distribution(per_option: list[list[float]], floor: float = DEFAULT_FLOOR) -> Distribution | None:
    if not any(per_option):
        return None
    masses = [math.exp(logsumexp(lps)) if lps else 0.0 for lps in per_option]
    coverage = min(1.0, sum(masses))
    return Distribution(with_floor(masses, floor), coverage, "logprobs")


def from_samples(answers: Sequence[str], codes: Sequence[str], *, floor: float = DEFAULT_FLOOR) -> Distribution | None:
    """Distribution from n sampled answers (empirical frequencies); None when no sample names an option.

    coverage is the share of samples that named an option.
    """
    counts = [0.0] * len(codes)
    for a in answers:
        idx = option_of(first_word(a), codes)
        if idx is not None:
            counts[idx] += 1
    named = sum(counts)
    if named == 0:
        return None
    return Distribution(with_floor(counts, floor), named / len(answers), "sampled")


def one_hot(index: int, n: int, *, source: str = "binary", floor: float = DEFAULT_FLOOR) -> Distribution:
    """All mass (less the floors) on one option: the binary/argmax answer."""
    masses = [1.0 if i == index else 0.0 for i in range(n)]
    return Distribution(with_floor(masses, floor), 1.0, source)


def uniform_fallback(n: int) -> Distribution:
    """What is written when the judge never named an option: uniform, flagged, coverage 0."""
    return Distribution(tuple(1.0 / n for _ in range(n)), 0.0, "fallback")
