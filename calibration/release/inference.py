"""Prediction-powered inference (PPI++) for the mean of a release, with conversations as the sampling unit.

The release is N conversations with m_c assistant turns each (M turns in all). For every turn the
calibrator gives a prediction f(t); on a random sample of n conversations (inclusion probability pi_c)
reviewers also answered, turn by turn. The quantity is theta = the mean over the release's turns of what a
reviewer would answer. Per conversation:
    A_c = sum over its turns of f(t)                                         (every conversation)
    Y_c = m_c * mean over its labelled turns of the reviewers' mean answer   (labelled conversations)
    F_c = m_c * mean over its labelled turns of the predictions for the same reviewers
The PPI++ estimate (Angelopoulos, Duchi & Zrnic 2024) is
    theta(lam) = lam * sum(A)/M + sum_S d_c (Y_c - lam F_c) / sum_S d_c m_c,    d_c = 1 / pi_c,
the calibrator's mean over all turns plus a correction measured on the sample (a Hajek ratio, so
conversations of different lengths count by their turns). Its variance is taken by linearisation with the
conversation as the unit, so labels of one conversation (several turns, several reviewers) are never
treated as independent. lam = 0 is the humans-only estimate, lam = 1 plain PPI; by default each
conversation's correction uses the lam that minimises the variance on the other conversations (power
tuning cross-fitted leave-one-out, clipped to [0, 1]), and ppi always reports that estimator's interval:
no choice between it and the humans-only interval after seeing the labels (issue 51: keeping whichever was
narrower covered up to 1.5 points less than humans-only where the calibrator barely helps, because the
samples on which ppi looks narrower are the ones its estimate is off on). Where the calibrator does not
help, lam is near 0 and ppi is about the humans-only interval, a little wider for lam's noise. The
variance is the larger of the linearised one and the delete-one-conversation jackknife of the whole
estimator (lam cross-fitted again in each delete-one sample); intervals use Student's t with n - 1 degrees of freedom (ppi's cross-fitted lam spends one more
per predictor, its residual variance over n - 2: intervals.py `lam_degrees_of_freedom`), and for a bounded quantity (`bounds`:
a rate, or an answer scale) a Wilson score interval at the effective sample size p(1-p)/var, which stays
inside the bounds and holds its level at 10-20 conversations (benchmarks/estimate.py; the arithmetic,
vectorised over samples, is calibration/release/intervals.py). With a fixed lam, singleton conversations,
`ddof=0`, `quantile="normal"`, `variance="linearised"` and `population="process"` this is exactly
ppi-python's `ppi_mean_ci` / `classical_mean_ci`, and lam="tuned" is its power-tuned lam
(tests/calibration/test_release_inference.py checks both).

Personalised predictions (`V` given): F_c compares each reviewer with the calibrator's prediction for that
reviewer, and the imputed mean is the mixture of the reviewers' predictions in the proportions the sample
drew them. That mixture is itself estimated from the sample: with mu_r the mean prediction for reviewer r
over the release's turns and V_c = m_c * mean over labelled turns of their reviewers' mean mu_r, the
imputed mean is sum_S d V / sum_S d m, and the estimate is the single ratio
    theta(lam) = sum_S d_c (Y_c - lam (F_c - V_c)) / sum_S d_c m_c,
whose linearised variance counts the reviewer draw too (without it, a panel whose reviewers differ in level
makes the interval too narrow).

Two predictors (`other`): `estimate crossfit=K` has the cross-fitted calibrators and the unadapted model.
Both are control variates, theta = sum_S d_c (Y_c - lam1 G1_c - lam2 G2_c) / sum_S d_c m_c with each
G centred on its own release mean, and (lam1, lam2) cross-fitted like the one lam, over lam >= 0 with
lam1 + lam2 <= 1 (a mixture of the two, shrunk towards humans-only). The estimate is then about as narrow
as the better predictor of the two, without knowing in advance which it is (the extra lam's noise costs
a little: benchmarks/estimate_crossfit.py). A fixed lam, and humans-only, use the first predictor only.

Two quantities, two variances (`population`):
- "finite" (default): the release itself, its N conversations. The calibrator's predictions over them are
  known exactly, and the correction's variance carries the finite-population factor (1 - pi_c) per
  conversation (1 - n/N for a uniform sample), so the interval narrows to zero as the whole release gets
  labelled.
- "process": the chatbot's behaviour that the release is a draw of (as ppi-python treats its unlabelled
  data): the imputed mean has variance too, and no finite-population factor. Wider; for statements about
  conversations like these beyond the release, and for comparing two releases.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from calibration.release.intervals import ratio_interval

__all__ = [
    "ClusterSample",
    "Interval",
    "classical_mean",
    "difference",
    "effective_labels",
    "ppi_mean",
]


@dataclass(frozen=True)
class ClusterSample:
    """Per-conversation totals of one quantity (see the module docstring)."""

    A: np.ndarray
    """(N,) sum of the calibrator's predictions over each conversation's turns, every conversation."""
    m_all: np.ndarray
    """(N,) turns of each conversation."""
    Y: np.ndarray
    """(n,) estimated total of the reviewers' answers in each labelled conversation."""
    F: np.ndarray
    """(n,) the same total of the predictions for the same reviewers."""
    m_lab: np.ndarray
    """(n,) turns of each labelled conversation."""
    pi: np.ndarray | None = None
    """(n,) inclusion probability of each labelled conversation; None: a uniform sample."""
    V: np.ndarray | None = None
    """(n,) personalised predictions: the reviewer-mixture level of each labelled conversation (see the
    module docstring); None: F is one fixed prediction per turn."""
    other: ClusterSample | None = None
    """A second predictor's totals on the same labelled conversations (its own A, F and V; Y, m and pi the
    same): the unadapted model beside the cross-fitted calibrators of `estimate crossfit=K`. ppi then takes
    both as control variates, their lams cross-fitted like the one's (lam >= 0, summing to <= 1), so the
    estimate is about as narrow as the better of the two; None: one predictor."""

    @property
    def n(self) -> int:
        return len(self.Y)

    @property
    def N(self) -> int:
        return len(self.A)


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    se: float
    lam: float | None = None
    df: float | None = None
    lam_parts: tuple[float, ...] | None = None
    """With two predictors (ClusterSample.other), each one's lam (their sum is `lam`)."""

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def width(self) -> float:
        return self.high - self.low


def ppi_mean(
    s: ClusterSample,
    *,
    alpha: float = 0.1,
    lam: float | str | None = None,
    ddof: int = 1,
    quantile: str = "t",
    population: str = "finite",
    variance: str = "jackknife",
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """The PPI++ estimate and (1 - alpha) interval of the per-turn mean. lam: a number (fixed), None (cross-
    fitted: each conversation's correction uses the lam tuned without it) or "tuned" (on the same sample, as
    ppi-python does; for comparison). variance: "linearised", or "jackknife" (default: the larger of the two). bounds: the
    values' range ((0, 1) for a rate): a Wilson score interval inside it (calibration/release/intervals.py)."""
    return _as_interval(_ratio(s, alpha, lam, ddof, quantile, population, variance, bounds))


def classical_mean(
    s: ClusterSample,
    *,
    alpha: float = 0.1,
    ddof: int = 1,
    quantile: str = "t",
    population: str = "finite",
    variance: str = "jackknife",
    bounds: tuple[float, float] | None = None,
) -> Interval:
    """The humans-only (Hajek ratio) estimate and interval from the labelled conversations alone."""
    return dataclasses.replace(
        _as_interval(_ratio(s, alpha, 0.0, ddof, quantile, population, variance, bounds)), lam=None
    )


def _ratio(s: ClusterSample, alpha, lam, ddof, quantile, population, variance, bounds) -> dict:
    if population not in ("finite", "process"):
        raise ValueError(f"population={population!r}: use 'finite' or 'process'.")
    n = s.n
    if n <= ddof:
        raise ValueError(f"{n} labelled conversations: at least {ddof + 1} are needed for an interval.")
    pi = np.full(n, n / s.N) if s.pi is None else np.asarray(s.pi, float)
    fpc = np.clip(1.0 - pi, 0.0, 1.0) if population == "finite" else np.ones(n)
    # a fixed lam (humans-only included) weighs the one predictor: the second needs its lam cross-fitted
    predictors = [s] if s.other is None or lam is not None else [s, s.other]
    G, g = zip(*(_control_variate(x) for x in predictors), strict=True)
    # finite: the release's own mean, imputed exactly (each draw's share of it known); process: the imputed
    # mean varies too, its (co)variance from the ratio sum(A)/M linearised per conversation
    V_A = 0.0 if population == "finite" else np.atleast_2d(np.cov(np.stack(g), ddof=ddof if ddof < s.N else 0)) / s.N
    return ratio_interval(
        s.Y,
        G[0] if len(G) == 1 else np.stack(G, -1),
        s.m_lab,
        1.0 / pi,
        fpc,
        alpha=alpha,
        lam=lam,
        ddof=ddof,
        V_A=V_A,
        quantile=quantile,
        variance=variance,
        bounds=bounds,
        n_turns=float(np.sum(s.m_lab)),
    )


def _control_variate(s: ClusterSample) -> tuple[np.ndarray, np.ndarray]:
    """A predictor's control variate per labelled conversation, centred on its mean over the release (on
    the sample's panel when personalised), and its release totals linearised per conversation."""
    m_all = np.asarray(s.m_all, float)
    A_bar = float(s.A.sum() / m_all.sum())
    G = s.F - A_bar * np.asarray(s.m_lab, float) if s.V is None else s.F - s.V
    return G, (s.A - A_bar * m_all) / m_all.mean()


def _as_interval(r: dict) -> Interval:
    parts = tuple(float(x) for x in np.ravel(r["lam_parts"]))
    estimate, low, high, se = (float(r[k]) for k in ("estimate", "low", "high", "se"))
    return Interval(
        estimate,
        low,
        high,
        se,
        lam=float(r["lam"]),
        df=r["df"],
        lam_parts=parts if len(parts) > 1 else None,
    )


def difference(a: Interval, b: Interval, *, alpha: float = 0.1) -> dict:
    """a - b for two independent samples (two releases), with Welch-Satterthwaite degrees of freedom
    and a two-sided p-value for "no difference"."""
    se = math.sqrt(a.se**2 + b.se**2)
    estimate = a.estimate - b.estimate
    parts = [(x.se**2) ** 2 / x.df for x in (a, b) if x.df]
    df = (se**2) ** 2 / sum(parts) if parts and se > 0 else math.inf
    q = stats.t.ppf(1 - alpha / 2, df) if math.isfinite(df) else stats.norm.ppf(1 - alpha / 2)
    if se > 0:
        z = abs(estimate) / se
        p = float(2 * (stats.t.sf(z, df) if math.isfinite(df) else stats.norm.sf(z)))
    else:
        p = 1.0 if estimate == 0 else 0.0
    return {"estimate": estimate, "low": estimate - q * se, "high": estimate + q * se, "p": p, "se": se}


def effective_labels(n: int, humans: Interval, ppi: Interval) -> float:
    """The number of labelled conversations a humans-only interval would need for ppi's width."""
    if ppi.width <= 0:
        return math.inf
    return n * (humans.width / ppi.width) ** 2


def stratified(
    parts: list[tuple[float, Interval, int, float]], *, alpha: float = 0.1, bounds: tuple[float, float] | None = None
) -> Interval:
    """Strata combined (stratified PPI, Fisch et al. 2024): parts are (turn share W_h, the stratum's
    interval, its labelled conversations n_h, its labelled turns); estimate sum W_h theta_h, variance
    sum W_h^2 se_h^2 (strata sampled independently), Welch-Satterthwaite degrees of freedom, and the same
    Wilson score interval inside `bounds` as one sample."""
    from calibration.release.intervals import wilson_or_t

    estimate = sum(w * iv.estimate for w, iv, _, _ in parts)
    terms = [(w * iv.se) ** 2 for w, iv, _, _ in parts]
    var = sum(terms)
    # each stratum's own degrees of freedom (n_h - 2 where its lambda is cross-fitted, n_h - 1 else)
    dens = sum(
        t**2 / max(iv.df if iv.df is not None else n - 1, 1) for t, (_, iv, n, _) in zip(terms, parts, strict=True)
    )
    df = var**2 / dens if dens > 0 else float(sum(n for _, _, n, _ in parts) - 1)
    low, high = wilson_or_t(
        estimate, var, alpha=alpha, df=df, bounds=bounds, n_turns=sum(t for *_, t in parts), fpc_bar=1.0
    )
    return Interval(float(estimate), float(low), float(high), math.sqrt(var), None, float(df))
