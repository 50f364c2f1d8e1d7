"""How many conversations to label for a release estimate (`suggest purpose=estimate width=W | decide_at=X`,
and `estimate width=W` on a sample that falls short).

The rate's interval half-width at n labelled conversations of a release of N (a uniform sample) is about
    t(n - 1 - k) * sqrt((1 - n / N) * s2 * (n - 1) / (n - 1 - k) / n) / m_bar,
where s2 is the variance of a conversation's residual total (Y_c - rate * m_c for humans-only; the same
minus lam times the calibrator's residual for ppi), m_bar the mean conversation length and k the degrees of
freedom lam spends (0 for humans-only, 1 for ppi: its cross-fitted lam is estimated from the same labels,
calibration/release/intervals.py `lam_degrees_of_freedom`), as the interval planned for counts them. s2
comes from
  - labelled conversations of the release (a pilot sample, or the sample estimate ran on): measured, the
    ppi one with the power-tuned lam (s2 * (1 - r^2), r the residuals' correlation);
  - else the calibrator alone, taken as calibrated: every turn a Bernoulli of its predicted rate f, so
    humans-only s2 = mean over conversations of (sum f - rate m)^2 + sum f(1 - f), and ppi's s2 =
    mean of sum f(1 - f) (what a calibrated calibrator leaves). Optimistic for ppi where the calibrator
    is off on this release: label a pilot of 10-20 conversations and plan again from it;
  - or (cv=DIR) the same formulas corrected by how far the calibrator was off out of fold on its training
    data (calibration/release/cv_spread.py), measured over cv's conversations.
A width plan asks for the n at which the interval is that narrow in 80% of samples, not on average, which
would be half the time. Where s2 was measured on labelled conversations (a pilot of 10-20), its own noise
counts too: the final sample's variance over the pilot's is F-distributed on (n - 1, pilot - 1) degrees of
freedom (cv's conversations - 1 for a cv source), and the plan takes that ratio's 80% quantile (a
predictive assurance; with the chi-square of a known s2 alone, a 10-conversation pilot's plans reached the
width in only 56-74% of draws, benchmarks/estimate.py). A sample's variances are also scaled up where the
rate it saw is further from 0.5 than the calibrator's predicted rate of the release (`rate_inflation`): on a
bounded scale a pilot that happens to see almost only adherent turns sees too little spread. Where s2 comes
from the calibrator alone, the chi-square spread is used. The plan ignores the Wilson interval's
pull towards 0.5 (narrower near 0 or 1, so the plan errs long).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Spread",
    "half_width",
    "labels_needed",
    "predicted_rate",
    "rate_inflation",
    "spread_from_calibrator",
    "spread_from_sample",
    "width_plan",
]

ASSURANCE = 0.8  # width: the chance that the planned sample's interval is as narrow as asked
RATE_PRIOR_CONVERSATIONS = 5  # rate_inflation: the calibrator's predicted rate counts as this many conversations
POWER = 0.8  # decide_at: the chance that the interval excludes the threshold when the rate is as expected
PPI_LAM_DF = 1  # ppi's cross-fitted lam spends one degree of freedom (one predictor; intervals.py)
LAM_DF = {"ppi": PPI_LAM_DF, "humans": 0}  # the degrees of freedom each interval spends on lam


@dataclass(frozen=True)
class Spread:
    """What the plan needs of a release: per-conversation residual variances and lengths."""

    rate: float
    humans: float
    ppi: float
    m_bar: float
    N: int
    source: str
    df: int | None = None
    """Degrees of freedom of the measured variances (labelled, or cv's, conversations - 1); None: from the
    calibrator alone."""


def half_width(s2: float, m_bar: float, N: int, n: int, alpha: float = 0.1, lam_df: int = 0) -> float:
    """The expected half-width at n conversations; lam_df: the degrees of freedom lam spends (ppi: 1), the
    residual variance over n - 1 - lam_df and Student's t on as many, as the interval computes them."""
    left = n - 1 - lam_df
    if left < 1:
        return math.inf
    q = float(stats.t.ppf(1 - alpha / 2, left))
    return q * math.sqrt(max(1 - n / N, 0.0) * s2 * (n - 1) / left / n) / m_bar


def labels_needed(
    s2: float,
    m_bar: float,
    N: int,
    width: float,
    alpha: float = 0.1,
    power: float | None = None,
    assurance: float | None = ASSURANCE,
    df: int | None = None,
    lam_df: int = 0,
) -> int | None:
    """The fewest conversations whose half-width is <= width with probability `assurance` (the sample's
    variance at that quantile: chi-square on n - 1 degrees of freedom for a known s2, F on (n - 1, df) for an
    s2 measured with df degrees of freedom; None: the expected half-width); power: instead, the chance that
    the interval stays clear of a threshold `width` away; lam_df: the degrees of freedom the interval spends
    on lam (ppi: 1, `half_width`). None when even the whole release falls short."""
    extra = 0.0 if power is None else float(stats.norm.ppf(power))
    for n in range(2 + lam_df, N + 1):
        left = n - 1 - lam_df  # the final sample's residual variance: on this many degrees of freedom
        q = float(stats.t.ppf(1 - alpha / 2, left))
        spread = 1.0
        if power is None and assurance is not None:
            ratio = stats.f.ppf(assurance, left, df) if df else stats.chi2.ppf(assurance, left) / left
            spread = math.sqrt(float(ratio))
        if half_width(s2, m_bar, N, n, alpha, lam_df) * spread * (q + extra) / q <= width:
            return n
    return None


def spread_from_calibrator(conversation: np.ndarray, f: np.ndarray) -> Spread:
    """From the calibrator's predicted rate f of every turn (conversation: each turn's conversation id)."""
    _, conv = np.unique(conversation, return_inverse=True)
    m = np.bincount(conv).astype(float)
    A = np.bincount(conv, weights=f)
    B = np.bincount(conv, weights=f * (1 - f))
    rate = float(A.sum() / m.sum())
    return Spread(
        rate,
        float(np.mean((A - rate * m) ** 2 + B)),
        float(np.mean(B)),
        float(m.mean()),
        len(m),
        "the calibrator's predictions, taken as calibrated (no labels yet)",
    )


def spread_from_sample(
    Y: np.ndarray,
    G: np.ndarray,
    m_lab: np.ndarray,
    m_all: np.ndarray,
    source: str,
    prior_rate: float | None = None,
) -> Spread:
    """From labelled conversations: Y their reviewers' totals, G the calibrator's (centred) totals;
    prior_rate: the calibrator's predicted rate over the whole release (`rate_inflation`)."""
    rate = float(Y.sum() / m_lab.sum())
    a = Y - rate * m_lab
    b = G - G.sum() / m_lab.sum() * m_lab
    s_aa = float(np.var(a, ddof=1))
    # ppi's residual with lam cross-fitted leave-one-out, as estimate computes it: a lam tuned on the same
    # 10-20 conversations makes their residuals look smaller than a fresh sample's will be
    ab, bb = (a * b).sum() - a * b, (b * b).sum() - b * b
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = np.clip(np.where(bb > 0, ab / np.where(bb > 0, bb, 1), 0.0), 0.0, 1.0)
    # estimate's ppi is this estimator whatever its lam (no fallback to humans-only): it may be the wider
    ppi = float(np.var(a - lam * b, ddof=1))
    k = rate_inflation(rate, prior_rate, len(Y))
    if s_aa <= 0:  # every labelled conversation gave the same answer: no spread seen; independent turns at the
        # shrunk rate instead (without a prior_rate that is 0 too: nothing to plan from)
        shrunk = _shrunk(rate, prior_rate, len(Y))
        s_aa = ppi = shrunk * (1 - shrunk) * float(np.mean(m_lab))
        k = 1.0
    return Spread(rate, k * s_aa, k * ppi, float(np.mean(m_all)), len(m_all), source, len(Y) - 1)


def _shrunk(rate: float, prior_rate: float | None, n: int) -> float:
    if prior_rate is None:
        return rate
    return (n * rate + RATE_PRIOR_CONVERSATIONS * prior_rate) / (n + RATE_PRIOR_CONVERSATIONS)


def predicted_rate(sample) -> float:
    """The calibrator's predicted rate over a ClusterSample's whole release (labelled or not)."""
    return float(sample.A.sum() / sample.m_all.sum())


def rate_inflation(rate: float, prior_rate: float | None, n: int) -> float:
    """How much to scale a sample's variances for the rate it happened to see. On a bounded scale the spread
    moves with the rate: a pilot that sees almost only adherent turns sees too little spread, and plans too
    few labels (shift up, benchmarks/estimate.py: a pilot rate >= 0.95 reached the width in 27% of draws;
    the F quantile assumes the variance independent of the mean). The rate is shrunk towards the calibrator's
    predicted rate of the release (worth RATE_PRIOR_CONVERSATIONS conversations; label-free, so not noisy
    with the pilot) and the variances scaled by p(1 - p) there over p(1 - p) at the sample's rate,
    only ever up, so a calibrator that is off on the release can lengthen a plan but never shorten it."""
    shrunk, seen = _shrunk(rate, prior_rate, n), rate * (1 - rate)
    return max(1.0, shrunk * (1 - shrunk) / seen) if seen > 0 else 1.0


def plan_lines(
    spread: Spread, *, width: float | None = None, decide_at: float | None = None, alpha: float = 0.1, labelled: int = 0
) -> tuple[int | None, list[str]]:
    """The ppi plan's n (None: the release is too small) and the lines that explain it."""
    power: float | None  # None: plan for the interval's width alone
    if decide_at is not None:
        gap = abs(spread.rate - decide_at)
        if gap == 0:
            return None, [
                f"the expected rate {spread.rate:.3f} is the threshold decide_at={decide_at:g}: no "
                "sample size decides it; label a pilot and plan from it."
            ]
        goal, power, what = (
            gap,
            POWER,
            (
                f"to decide the gate at {decide_at:g} (expected rate {spread.rate:.3f}, "
                f"{POWER:.0%} chance the interval clears it)"
            ),
        )
    elif width is not None:
        goal, power, what = width, None, f"to reach a rate half-width of {width:g}"
    else:
        raise ValueError("plan_lines needs width= or decide_at=")
    need = {
        k: labels_needed(getattr(spread, k), spread.m_bar, spread.N, goal, alpha, power, df=spread.df, lam_df=LAM_DF[k])
        for k in ("ppi", "humans")
    }
    lines = []
    for k, label in (("ppi", "ppi"), ("humans", "humans-only")):
        n = need[k]
        if n is None:
            lines.append(f"{label}: even all {spread.N} conversations fall short {what}.")
        else:
            at = half_width(getattr(spread, k), spread.m_bar, spread.N, n, alpha, LAM_DF[k])
            more = f" ({max(n - labelled, 0)} more than the {labelled} labelled)" if labelled else ""
            lines.append(
                f"{label}: label {n} of {spread.N} conversations{more} {what}; expected half-width there {at:.3f}"
            )
    n_ppi = need["ppi"]
    if n_ppi is not None:
        lines.append(
            f"at n={n_ppi}: expected half-width humans-only "
            f"{half_width(spread.humans, spread.m_bar, spread.N, n_ppi, alpha):.3f}, ppi "
            f"{half_width(spread.ppi, spread.m_bar, spread.N, n_ppi, alpha, PPI_LAM_DF):.3f} (spread from "
            f"{spread.source})."
        )
    return n_ppi, lines


def width_plan(rate: dict, width: float, alpha: float) -> dict:
    """How far the rate's ppi interval is from the half-width asked for, and how many labelled conversations
    would reach it (planned from this sample's spread; calibration/release/planning.py)."""
    ppi = rate["ppi"]
    have = (ppi["high"] - ppi["low"]) / 2
    n = rate["n_labelled_conversations"]
    plan = {"width": width, "half_width": have, "reached": have <= width, "n_labelled_conversations": n}
    if have > width:
        s = rate["_sample"]
        spread = spread_from_sample(
            s.Y, s.F - (0 if s.V is None else s.V), s.m_lab, s.m_all, "this sample", predicted_rate(s)
        )
        need = labels_needed(spread.ppi, spread.m_bar, spread.N, width, alpha, df=spread.df, lam_df=PPI_LAM_DF)
        plan["n_needed"] = need
        if need is None:
            plan["line"] = (
                f"the rate's half-width {have:.3f} is over width={width:g}, and even all {spread.N} conversations would fall short."
            )
        else:
            plan["line"] = (
                f"the rate's half-width {have:.3f} is over width={width:g}: label about {max(need - n, 1)} more "
                f"conversations ({max(need, n + 1)} in all, planned from this sample's spread)."
            )
    return plan
