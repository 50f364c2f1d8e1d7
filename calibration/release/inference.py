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
treated as independent; lam minimises it (power tuning, clipped to [0, 1]): lam = 0 is the humans-only
estimate, lam = 1 plain PPI. Intervals use Student's t with n - 1 degrees of freedom and the unbiased
(n - 1) variance, which the small samples of a release review need; with singleton conversations,
`ddof=0`, `quantile="normal"` and `population="process"` this is exactly ppi-python's `ppi_mean_ci` /
`classical_mean_ci` (tests/calibration/test_release_inference.py checks it).

Personalised predictions (`V` given): F_c compares each reviewer with the calibrator's prediction for that
reviewer, and the imputed mean is the mixture of the reviewers' predictions in the proportions the sample
drew them. That mixture is itself estimated from the sample: with mu_r the mean prediction for reviewer r
over the release's turns and V_c = m_c * mean over labelled turns of their reviewers' mean mu_r, the
imputed mean is sum_S d V / sum_S d m, and the estimate is the single ratio
    theta(lam) = sum_S d_c (Y_c - lam (F_c - V_c)) / sum_S d_c m_c,
whose linearised variance counts the reviewer draw too (without it, a panel whose reviewers differ in level
makes the interval too narrow).

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

__all__ = ["ClusterSample", "Interval", "classical_mean", "difference", "effective_labels", "ppi_mean"]


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

    def as_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def width(self) -> float:
        return self.high - self.low


def ppi_mean(
    s: ClusterSample, *, alpha: float = 0.1, lam: float | None = None, ddof: int = 1, quantile: str = "t",
    population: str = "finite", variance: str = "jackknife",
) -> Interval:
    """The PPI++ estimate and (1 - alpha) interval of the per-turn mean; lam None: power-tuned. variance:
    "linearised", or "jackknife" (default: the larger of the two)."""
    parts = _parts(s, ddof, population)
    tuned = lam is None
    if tuned:
        lam = _tuned_lam(parts)
    estimate = parts["rho_Y"] - lam * (parts["rho_F"] - parts["offset"])
    var = lam**2 * parts["V_A"] + parts["c"] * (parts["S_aa"] - 2 * lam * parts["S_ab"] + lam**2 * parts["S_bb"])
    if variance == "jackknife":
        var = max(var, lam**2 * parts["V_A"] + _jackknife(s, ddof, population, None if tuned else lam))
    if tuned:
        humans = classical_mean(s, alpha=alpha, ddof=ddof, quantile=quantile, population=population, variance=variance)
        if humans.se**2 < var:  # lam = 0 is a candidate of the tuning: never wider than the humans alone
            return dataclasses.replace(humans, lam=0.0)
    return _interval(estimate, math.sqrt(max(var, 0.0)), s.n, alpha, quantile, lam=float(lam))


def _jackknife(s: ClusterSample, ddof: int, population: str, lam: float | None) -> float:
    """Delete-one-conversation jackknife variance of the correction (lam re-tuned in every replicate when
    None), times the finite-population factor: small samples' ratio estimates and a lam tuned on the same
    sample make the linearised variance too small."""
    n = s.n
    if n < 3:
        return 0.0
    thetas = np.empty(n)
    keep = np.ones(n, bool)
    for i in range(n):
        keep[i] = False
        sub = dataclasses.replace(s, Y=s.Y[keep], F=s.F[keep], m_lab=s.m_lab[keep],
                                  pi=None if s.pi is None else s.pi[keep], V=None if s.V is None else s.V[keep])
        parts = _parts(sub, min(ddof, n - 2), population)
        lam_i = _tuned_lam(parts) if lam is None else lam
        thetas[i] = parts["rho_Y"] - lam_i * (parts["rho_F"] - parts["offset"])
        keep[i] = True
    pi = np.full(n, n / s.N) if s.pi is None else np.asarray(s.pi, float)
    fpc = float(np.clip(1 - pi, 0, 1).mean()) if population == "finite" else 1.0
    return fpc * (n - 1) / n * float(((thetas - thetas.mean()) ** 2).sum())


def classical_mean(s: ClusterSample, *, alpha: float = 0.1, ddof: int = 1, quantile: str = "t",
                   population: str = "finite", variance: str = "jackknife") -> Interval:
    """The humans-only (Hajek ratio) estimate and interval from the labelled conversations alone."""
    parts = _parts(s, ddof, population)
    var = parts["c"] * parts["S_aa"]
    if variance == "jackknife":
        var = max(var, _jackknife(s, ddof, population, 0.0))
    return _interval(parts["rho_Y"], math.sqrt(max(var, 0.0)), s.n, alpha, quantile)


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


def _parts(s: ClusterSample, ddof: int, population: str) -> dict:
    """The sums both estimators are built from (linearised Hajek ratios; see the module docstring)."""
    if population not in ("finite", "process"):
        raise ValueError(f"population={population!r}: use 'finite' or 'process'.")
    n = s.n
    if n <= ddof:
        raise ValueError(f"{n} labelled conversations: at least {ddof + 1} are needed for an interval.")
    pi = np.full(n, n / s.N) if s.pi is None else np.asarray(s.pi, float)
    d = 1.0 / pi
    m_lab, m_all = np.asarray(s.m_lab, float), np.asarray(s.m_all, float)
    G = s.F if s.V is None else s.F - s.V  # personalised: the control variate is centred on the sample's panel
    D = float((d * m_lab).sum())
    rho_Y = float((d * s.Y).sum()) / D
    rho_F = float((d * G).sum()) / D
    a = d * (s.Y - rho_Y * m_lab)
    b = d * (G - rho_F * m_lab)
    a, b = a - a.mean(), b - b.mean()
    A_bar = float(s.A.sum() / m_all.sum())
    if population == "finite":  # the release's own mean: imputed exactly, each draw's share of it known
        V_A, fpc = 0.0, np.clip(1.0 - pi, 0.0, 1.0)
    else:
        g = (s.A - A_bar * m_all) / m_all.mean()  # the ratio sum(A)/M linearised per conversation
        V_A, fpc = float(g.var(ddof=ddof if ddof < s.N else 0) / s.N), np.ones(n)
    return {
        "rho_Y": rho_Y, "rho_F": rho_F, "offset": A_bar if s.V is None else 0.0, "V_A": V_A,
        "S_aa": float(fpc @ (a * a)) / D**2, "S_bb": float(fpc @ (b * b)) / D**2, "S_ab": float(fpc @ (a * b)) / D**2,
        "c": n / (n - ddof),
    }


def _tuned_lam(parts: dict) -> float:
    """The lam in [0, 1] that minimises the estimate's variance lam^2 V_A + c (S_aa - 2 lam S_ab + lam^2 S_bb)."""
    denom = parts["V_A"] + parts["c"] * parts["S_bb"]
    if denom <= 0:
        return 0.0
    return float(np.clip(parts["c"] * parts["S_ab"] / denom, 0.0, 1.0))


def _interval(estimate: float, se: float, n: int, alpha: float, quantile: str, *, lam: float | None = None) -> Interval:
    if quantile == "t":
        df = float(n - 1)
        q = float(stats.t.ppf(1 - alpha / 2, df))
    elif quantile == "normal":
        df, q = None, float(stats.norm.ppf(1 - alpha / 2))
    else:
        raise ValueError(f"quantile={quantile!r}: use 't' or 'normal'.")
    return Interval(float(estimate), float(estimate - q * se), float(estimate + q * se), float(se), lam, df)
