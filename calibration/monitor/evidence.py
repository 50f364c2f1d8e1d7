"""Evidence that accumulates over windows: betting e-processes for a bounded mean, and the reference's bound.

Each monitored row (a role, for one rubric question and one check) runs a test of "every conversation's expected
rate is at least theta" by betting (Waudby-Smith & Ramdas 2023; Shafer & Vovk): a conversation's rate x in
[0, 1] turns wealth W into W * (1 + lam * (theta - x)), with lam >= 0 chosen from the windows before (never from
the one being scored). While the null holds, W is a non-negative supermartingale started at 1, so by Ville's
inequality the chance that it EVER reaches 1/a is at most a: the alarm "W >= 1/a" keeps its false-alarm rate
over any number of windows, and a small persistent drop keeps adding evidence until it shows. Nothing here
assumes a shape for the rates (skewed, mostly failing, 5 or 250 a window): only that they lie in [0, 1].

Why these choices:
- lam: the Kelly-style plug-in (aGRAPA) from an exponentially weighted mean and variance of the recent windows,
  clipped to [0, MAX_BET / (1 - theta)]; while the recent rate sits above theta it is 0 and the wealth stays
  where it is, so a long quiet stretch costs nothing and a drop starts adding evidence a window after it begins.
- theta for drop=D: the reference period's lower confidence bound on the role's mean (empirical Bernstein,
  Maurer & Pontil 2009, valid for any [0, 1] variable) minus D; its own error rate is a share of alpha.
- "all": the product of the roles' wealths (each bet against its own role's theta), a test supermartingale
  for "no role fell", so a change in the roles' mix alone never raises it.

Arrays have a leading stream axis S so that benchmarks/monitor.py runs many streams at once; the command runs
one (S = 1). Doctest:

>>> import numpy as np
>>> b = Bettor.start(1, prior_mean=np.array([0.8]))
>>> for _ in range(30):
...     b = b.update(np.full((1, 40), 0.6), theta=np.array([0.75]))
>>> bool(b.log_wealth[0] > np.log(1 / 0.001))
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["HALF_LIFES", "MAX_BET", "Bettor", "Standardised", "lower_bound", "role_shares", "weighted_lower_bound"]

HALF_LIFES = (0.25, 1.0, 4.0)
"""The plug-ins' memories, in windows (a window's weight halves after this many): the wealth is the average of
one betting process per memory (an average of test supermartingales is one), so a sharp drop is bet on within
its window and a slow drift by the long memory, at the price of log(3) in evidence."""
MAX_BET = 0.75
"""lam is at most this share of 1 / (1 - theta): one conversation takes at most 3/4 of a process's wealth."""
PRIOR = 4.0
"""Pseudo-conversations at the prior mean (the reference's) in the plug-in: a tiny first window cannot bet big."""


@dataclass(frozen=True)
class Bettor:
    """The state of S mixtures of betting e-processes (one per stream), a few numbers each: what monitor keeps
    between runs. Arrays (S, K), K = len(HALF_LIFES): log wealth and the exponentially weighted count, sum and
    sum of squares of the rates seen, per memory; prior_mean (S,): where the plug-ins start."""

    log_wealths: np.ndarray
    ew_n: np.ndarray
    ew_sum: np.ndarray
    ew_sq: np.ndarray
    prior_mean: np.ndarray

    @staticmethod
    def start(streams: int, *, prior_mean: np.ndarray) -> Bettor:
        zero = np.zeros((streams, len(HALF_LIFES)))
        return Bettor(zero.copy(), zero.copy(), zero.copy(), zero.copy(), np.asarray(prior_mean, float).copy())

    @property
    def log_wealth(self) -> np.ndarray:
        """(S,) log of the mixture's wealth: the average of the K processes' wealths."""
        top = self.log_wealths.max(axis=1)
        return top + np.log(np.exp(self.log_wealths - top[:, None]).mean(axis=1))

    def bet(self, theta: np.ndarray) -> np.ndarray:
        """lam (S, K) for the next conversation, from the conversations before it only (what makes each
        process a supermartingale)."""
        prior = self.prior_mean[:, None]
        n = self.ew_n + PRIOR
        mean = (self.ew_sum + PRIOR * prior) / n
        second = (self.ew_sq + PRIOR * (prior**2 + 0.01)) / n  # the prior carries a little variance
        var = np.maximum(second - mean**2, 1e-4)
        gap = theta[:, None] - mean
        lam = gap / (var + gap**2)
        return np.clip(lam, 0.0, MAX_BET / np.maximum(1.0 - theta[:, None], 1e-9))

    def update(self, x: np.ndarray, *, theta: np.ndarray, mask: np.ndarray | None = None) -> Bettor:
        """The state after one window: x (S, n) its conversations' rates in arrival order (padded where mask
        (S, n) is False). Each conversation's bet uses every conversation before it, this window's included."""
        x = np.asarray(x, float)
        mask = np.ones(x.shape, bool) if mask is None else np.asarray(mask, bool)
        theta = np.asarray(theta, float)
        decay = 0.5 ** (1.0 / np.asarray(HALF_LIFES))
        b = Bettor(self.log_wealths, decay * self.ew_n, decay * self.ew_sum, decay * self.ew_sq, self.prior_mean)
        for j in range(x.shape[1]):
            seen = mask[:, j][:, None]
            xj = np.where(mask[:, j], x[:, j], 0.0)[:, None]
            lam = b.bet(theta)
            gained = np.where(seen, np.log1p(lam * (theta[:, None] - xj)), 0.0)
            b = Bettor(b.log_wealths + gained, b.ew_n + seen, b.ew_sum + xj, b.ew_sq + xj**2, self.prior_mean)
        return b

    def to_json(self) -> dict:
        return {k: getattr(self, k).tolist() for k in ("log_wealths", "ew_n", "ew_sum", "ew_sq", "prior_mean")}

    @staticmethod
    def from_json(d: dict) -> Bettor:
        return Bettor(*(np.asarray(d[k], float) for k in ("log_wealths", "ew_n", "ew_sum", "ew_sq", "prior_mean")))


def lower_bound(x: np.ndarray, delta: float, *, grid: int = 201) -> float:
    """Lower confidence bound on the mean of [0, 1] variables x (in their arrival order), below the mean with
    chance at most delta: the betting bound of Waudby-Smith & Ramdas (2023, hedged capital, predictable plug-in
    bets), valid for any distribution on [0, 1] and far tighter than Hoeffding's or empirical Bernstein's at a
    few dozen conversations. -inf for fewer than 2.

    >>> x = np.random.default_rng(0).binomial(1, 0.8, 400).astype(float)
    >>> 0.03 < float(x.mean()) - lower_bound(x, 0.01) < 0.1
    True
    """
    x = np.asarray(x, float)
    n = len(x)
    if n < 2:
        return -np.inf
    i = np.arange(1, n + 1)
    mean_after = (0.5 + np.cumsum(x)) / (i + 1)  # mu_i, from a prior of 1/2
    var_after = (0.25 + np.cumsum((x - mean_after) ** 2)) / (i + 1)  # sigma^2_i
    var_before = np.concatenate([[0.25], var_after[:-1]])  # what x_i's bet may use: sigma^2_(i-1)
    lam = np.sqrt(2.0 * math.log(1.0 / delta) / (n * var_before))  # (n,) each bet's size, before its cap
    m = np.linspace(0.0, 1.0, grid)[1:, None]  # (G, 1) candidate means
    capped = np.minimum(lam[None, :], 0.5 / m)  # 1 + lam (x - m) stays >= 1/2
    log_k = np.cumsum(np.log1p(capped * (x[None, :] - m)), axis=1).max(axis=1)  # sup over time of the wealth
    rejected = log_k >= math.log(1.0 / delta)  # means the data are too high for
    if not (~rejected).any():
        return 1.0
    first = int(np.argmax(~rejected))  # the smallest candidate not rejected; the one below it, to be safe between
    return float(m[first - 1, 0]) if first > 0 else 0.0  # grid points (a bound at most one step low)


def role_shares(k: int) -> float:
    """The k-th role's (1-based, in order of first appearance) share of a check's alpha for the roles:
    6 / (pi^2 k^2), which sums to 1 over every k, so roles that appear later still get a fixed share.

    >>> round(sum(role_shares(k) for k in range(1, 100_000)), 4)
    1.0
    """
    return 6.0 / (math.pi**2 * k * k)


def psi_e(lam: np.ndarray) -> np.ndarray:
    """The empirical-Bernstein cumulant bound -log(1 - lam) - lam, for lam in [0, 1) (Howard et al. 2021)."""
    lam = np.asarray(lam, float)
    return -np.log1p(-lam) - lam


LAMBDA_GRID = np.geomspace(1.0, 8.0, 8)
"""The fixed bets the reference's weighted lower bound is the best of (a union bound over them), as multiples
of the bet that would be best were every rate's variance its largest, 1/4 (known before the data)."""


def weighted_lower_bound(samples: list[np.ndarray], weights: np.ndarray, delta: float) -> float:
    """Lower confidence bound on sum_g weights[g] * mean_g from independent [0, 1] samples of each group (in arrival
    order), below it with chance at most delta: the empirical-Bernstein bound for a weighted sum, each sample
    centred by its group's running mean before it (predictable), at the best of LAMBDA_GRID (delta split over
    it). Its precision is that of the pooled sample when the weights are the groups' shares.

    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.binomial(1, 0.9, 200).astype(float), rng.binomial(1, 0.5, 200).astype(float)
    >>> 0.05 < float((a.mean() + b.mean()) / 2) - weighted_lower_bound([a, b], np.array([0.5, 0.5]), 0.01) < 0.15
    True
    """
    weights = np.asarray(weights, float)
    estimate, parts_v, parts_dev = 0.0, [], []
    for x, w in zip(samples, weights, strict=True):
        x = np.asarray(x, float)
        if len(x) == 0:
            return -np.inf
        estimate += w * x.mean()
        i = np.arange(1, len(x) + 1)
        before = np.concatenate([[0.5], (0.5 + np.cumsum(x)[:-1]) / i[1:]])
        parts_v.append(np.full(len(x), w / len(x)))
        parts_dev.append((x - before) ** 2)
    v, dev = np.concatenate(parts_v), np.concatenate(parts_dev)
    base = math.sqrt(2.0 * math.log(len(LAMBDA_GRID) / delta) / (0.25 * float(v @ v)))
    lam = base * LAMBDA_GRID
    lam = np.minimum(lam, 0.9 / v.max())[:, None]  # lam * v < 1, where psi_e is finite
    slack = (math.log(len(LAMBDA_GRID) / delta) + (psi_e(lam * v[None, :]) * dev[None, :]).sum(1)) / lam[:, 0]
    return float(estimate - slack.min())


STANDARDISED_MEMORIES = (0.0, 3.0)
"""The standardised e-process's plug-in memories in windows: the last window only, and a half-life of 3."""


@dataclass(frozen=True)
class Standardised:
    """S streams of the "all" row's e-process: per window one e-value for "the rate at the reference's mix of
    roles is at least theta", E = exp(lam (theta - S_t) - sum_i psi_e(lam w_i) (x_i - m_g(i))^2), S_t the window's
    rates averaged per role and weighted by the reference mix (w_i = share_g / n_g), m_g a role's mean before the
    window. E is an e-value whatever the mix of the window (its counts are given, its rates are not) and whatever
    the rates' shape in [0, 1]; the product over windows is an e-process. lam: the plug-in (theta - S_hat) / V
    from earlier windows only, one process per memory, averaged. Arrays: (S, K) per memory, (S, G) per role."""

    log_wealths: np.ndarray
    s_n: np.ndarray
    s_sum: np.ndarray
    role_n: np.ndarray
    role_sum: np.ndarray
    role_sq: np.ndarray
    prior: np.ndarray
    """(S, G) the roles' reference means (where the plug-ins start)."""

    @staticmethod
    def start(prior: np.ndarray) -> Standardised:
        S, G = prior.shape
        k = len(STANDARDISED_MEMORIES)
        z, zg = np.zeros((S, k)), np.zeros((S, G))
        return Standardised(z.copy(), z.copy(), z.copy(), zg.copy(), zg.copy(), zg.copy(), np.asarray(prior, float))

    @property
    def log_wealth(self) -> np.ndarray:
        top = self.log_wealths.max(axis=1)
        return top + np.log(np.exp(self.log_wealths - top[:, None]).mean(axis=1))

    def update(self, x: np.ndarray, mask: np.ndarray, shares: np.ndarray, theta: np.ndarray) -> Standardised:
        """One window: x, mask (S, G, n) each role's rates (padded); shares (S, G) the reference mix over the
        roles it has (zero elsewhere; renormalised here over the roles present in the window); theta (S,)."""
        n = mask.sum(axis=2)  # (S, G)
        present = (n > 0) & (shares > 0)
        # theta is the bound at the reference's whole mix: a window without one of its roles is not bet on
        complete = np.all((n > 0) | (shares <= 0), axis=1, keepdims=True)
        w_role = np.where(present, shares, 0.0)
        total = w_role.sum(axis=1, keepdims=True)
        w_role = np.divide(w_role, total, out=np.zeros_like(w_role), where=total > 0)
        means = np.divide(np.where(mask, x, 0.0).sum(axis=2), n, out=np.zeros_like(w_role), where=n > 0)
        s_t = (w_role * means).sum(axis=1)  # (S,)
        prior_n = 4.0
        m = (self.role_sum + prior_n * self.prior) / (self.role_n + prior_n)  # (S, G) roles' means before
        var_g = np.maximum((self.role_sq + prior_n * (self.prior**2 + 0.01)) / (self.role_n + prior_n) - m**2, 1e-4)
        v_t = (w_role**2 * var_g / np.maximum(n, 1)).sum(axis=1)  # (S,) the window's variance, planned
        prior_s = (w_role * self.prior).sum(axis=1)
        s_hat = (self.s_sum + 0.25 * prior_s[:, None]) / (self.s_n + 0.25)  # (S, K): a light prior, one window moves it
        w_i = np.divide(w_role, np.maximum(n, 1))  # (S, G) each conversation's weight
        cap = np.where(present, 0.9 / np.maximum(w_i, 1e-12), np.inf).min(axis=1)  # lam * w_i < 1, psi_e finite
        lam = np.clip((theta[:, None] - s_hat) / np.maximum(v_t[:, None], 1e-8), 0.0, cap[:, None])  # (S, K)
        # each rate centred at its role's reference mean moved by the process's own estimate of the shift
        # (predictable: from earlier windows), so a drop the bet has seen is not also charged as variance
        centre = self.prior[:, None, :] + (s_hat - prior_s[:, None])[:, :, None]  # (S, K, G)
        xm = np.where(mask, x, 0.0)
        sx, sxx = xm.sum(axis=2)[:, None, :], (xm**2).sum(axis=2)[:, None, :]
        dev = np.maximum(sxx - 2 * centre * sx + n[:, None, :] * centre**2, 0.0)  # (S, K, G)
        penalty = (psi_e(np.minimum(lam[:, :, None] * w_i[:, None, :], 0.999)) * dev).sum(axis=2)
        gained = np.where((total > 0) & complete, lam * (theta[:, None] - s_t[:, None]) - penalty, 0.0)
        seen = (total[:, 0] > 0)[:, None] & complete
        decay = np.where(
            np.asarray(STANDARDISED_MEMORIES) > 0, 0.5 ** (1.0 / np.maximum(STANDARDISED_MEMORIES, 1e-9)), 0.0
        )
        return Standardised(
            self.log_wealths + gained,
            np.where(seen, decay * self.s_n + 1.0, self.s_n),
            np.where(seen, decay * self.s_sum + s_t[:, None], self.s_sum),
            self.role_n + n,
            self.role_sum + xm.sum(axis=2),
            self.role_sq + (xm**2).sum(axis=2),
            self.prior,
        )

    def to_json(self) -> dict:
        return {k: getattr(self, k).tolist() for k in self.__dataclass_fields__}

    @staticmethod
    def from_json(d: dict) -> Standardised:
        return Standardised(*(np.asarray(d[k], float) for k in Standardised.__dataclass_fields__))
