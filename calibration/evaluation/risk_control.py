"""Selective decisions with a guarantee (risk control): `adheres`, `violates` or `escalate`.

Pure functions on arrays; `role-rubric decide` (calibration/release/decide.py) applies them to a model.

Definitions (what is promised):
- p(turn) = the adherence probability: P(target answer >= adheres_at) under the calibrator's predicted
  distribution averaged over every training judge (a randomly chosen reviewer of the panel), as in
  `RoleAdherence(judges=None)`.
- A turn is decided when its confidence max(p, 1 - p) reaches the threshold; the decision is `adheres`
  where p >= 0.5, else `violates`; otherwise it is escalated.
- Disagreement of a decided turn with its human reviewers, each reviewer's target answer binarised
  (answer >= adheres_at = adheres):
  `majority` (default): 1 if the decision differs from the reviewers' majority, and 1 on a tie (no
  majority, so no decision can be confirmed); `reviewers`: the share of the turn's reviewers whose
  binarised answer differs from the decision (in [0, 1]).
- Risk = the expected disagreement on decided turns (selective risk). The threshold is chosen by
  Learn-then-Test (Angelopoulos et al. 2021) with fixed-sequence testing, as in "Trust or Escalate"
  (Jung et al., ICLR 2025): on labelled calibration turns the model never trained on, thresholds of a
  fixed grid are tested from the most confident down; at each, the null "risk > target" is rejected when
  its p-value is <= delta (exact binomial for `majority`, Hoeffding-Bentkus for `reviewers`), and the
  lowest threshold reached before the first failure is kept. Then, with probability >= 1 - delta over
  the draw of the calibration turns, the risk on new turns from the same distribution is <= the target.
  The sequence starts at the first threshold that decides enough calibration turns for a pass to be
  possible at all (log delta / log(1 - risk) of them, 22 at 0.1/0.1): with fewer, even no disagreement
  cannot reject, and the sequence would stop before it began. This start depends on the calibration turns'
  confidences only, never on their labels; it is the one step outside textbook fixed-sequence testing, and
  the property test and the 20-split check (README) measure that the promise still holds. If no threshold
  passes, every turn is escalated. The calibration turns must be exchangeable with the turns decided
  later; turns of one conversation are not independent, so calibrate on many conversations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from rubric.errors import InputError

AGAINST = ("majority", "reviewers")
GRID = np.round(np.linspace(1.0, 0.5, 201), 4)  # fixed before seeing data, most confident first


@dataclass(frozen=True)
class Threshold:
    """A calibrated decision threshold and what it did on the calibration turns."""

    threshold: float
    """Decide a turn when max(p, 1 - p) >= threshold (inf: escalate every turn)."""
    risk: float
    delta: float
    against: str
    n_calibration: int
    coverage: float
    """Share of calibration turns decided."""
    disagreement: float
    """Mean disagreement on the decided calibration turns (NaN when none)."""


def losses(n_adheres: np.ndarray, n_reviewers: np.ndarray, against: str = "majority") -> tuple[np.ndarray, np.ndarray]:
    """(loss if decided `adheres`, loss if decided `violates`) per turn, from its reviewers' votes.

    >>> [x.tolist() for x in losses(np.array([3, 1, 1]), np.array([3, 3, 2]))]
    [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]
    """
    if against not in AGAINST:
        raise InputError(f"against={against!r}.", fix=f"use one of {list(AGAINST)}.")
    n_adheres, n_reviewers = np.asarray(n_adheres, float), np.asarray(n_reviewers, float)
    if (n_reviewers <= 0).any() or (n_adheres > n_reviewers).any() or (n_adheres < 0).any():
        raise ValueError("every turn needs 0 <= n_adheres <= n_reviewers and at least one reviewer.")
    if against == "reviewers":
        share = n_adheres / n_reviewers
        return 1.0 - share, share
    tie = 2 * n_adheres == n_reviewers
    majority = 2 * n_adheres > n_reviewers
    return np.where(tie | ~majority, 1.0, 0.0), np.where(tie | majority, 1.0, 0.0)


def decide(p: np.ndarray, threshold: float) -> np.ndarray:
    """(B,) 'adheres' / 'violates' / 'escalate' for adherence probabilities p.

    >>> decide(np.array([0.97, 0.5, 0.02]), 0.9).tolist()
    ['adheres', 'escalate', 'violates']
    """
    p = np.asarray(p, float)
    out = np.where(p >= 0.5, "adheres", "violates").astype(object)
    out[np.maximum(p, 1 - p) < threshold] = "escalate"
    return out


def p_value(loss: np.ndarray, risk: float, *, binary: bool) -> float:
    """P-value of the null "expected loss > risk" from losses in [0, 1]: exact binomial tail for 0/1
    losses, else Hoeffding-Bentkus (Bates et al. 2021)."""
    n = len(loss)
    if n == 0:
        return 1.0
    mean = float(np.mean(loss))
    if binary:
        return float(stats.binom.cdf(round(mean * n), n, risk))
    if mean >= risk:
        return 1.0
    kl = (
        mean * math.log(mean / risk) + (1 - mean) * math.log((1 - mean) / (1 - risk))
        if mean > 0
        else -math.log(1 - risk)
    )
    return float(min(math.exp(-n * kl), math.e * stats.binom.cdf(math.ceil(n * mean), n, risk)))


def calibrate(
    p: np.ndarray,
    n_adheres: np.ndarray,
    n_reviewers: np.ndarray,
    *,
    risk: float = 0.1,
    delta: float = 0.1,
    against: str = "majority",
) -> Threshold:
    """The lowest grid threshold that Learn-then-Test certifies at (risk, delta) on calibration turns:
    p (n,) adherence probabilities, n_adheres / n_reviewers (n,) the reviewers' binarised votes."""
    if not 0 < risk < 1 or not 0 < delta < 1:
        raise InputError(f"risk={risk}, delta={delta}.", fix="pass risk and delta in (0, 1).")
    p = np.asarray(p, float)
    if len(p) == 0:
        raise InputError(
            "no calibration turn has a human answer to the target.",
            fix="calibrate on labelled turns the model was not trained on.",
        )
    loss_yes, loss_no = losses(n_adheres, n_reviewers, against)
    loss = np.where(p >= 0.5, loss_yes, loss_no)
    confidence = np.maximum(p, 1 - p)
    chosen = math.inf
    least = math.ceil(math.log(delta) / math.log(1 - risk))  # fewer decided turns cannot pass even with no loss
    for t in GRID:
        decided = confidence >= t
        if decided.sum() < least:
            continue
        if p_value(loss[decided], risk, binary=against == "majority") > delta:
            break
        chosen = float(t)
    decided = confidence >= chosen
    return Threshold(
        chosen,
        risk,
        delta,
        against,
        len(p),
        float(decided.mean()),
        float(loss[decided].mean()) if decided.any() else math.nan,
    )


def validate(
    p: np.ndarray,
    n_adheres: np.ndarray,
    n_reviewers: np.ndarray,
    groups: np.ndarray,
    *,
    risk: float = 0.1,
    delta: float = 0.1,
    against: str = "majority",
    splits: int = 20,
    seed: int = 0,
) -> dict:
    """Calibrate on a random half of the conversations, measure on the other half, `splits` times.

    Needs held-out p for every turn (e.g. out-of-fold). Returns per split the threshold, the realised
    disagreement on decided test turns (NaN when none is decided) and the test coverage, and a summary:
    the share of splits whose realised disagreement is <= risk (the guarantee asks >= 1 - delta)."""
    loss_yes, loss_no = losses(n_adheres, n_reviewers, against)
    loss = np.where(np.asarray(p) >= 0.5, loss_yes, loss_no)
    rng = np.random.default_rng(seed)
    unique = np.unique(groups)
    rows = []
    for _ in range(splits):
        cal = np.isin(groups, rng.permutation(unique)[: len(unique) // 2])
        th = calibrate(p[cal], n_adheres[cal], n_reviewers[cal], risk=risk, delta=delta, against=against)
        decided = (np.maximum(p, 1 - p) >= th.threshold) & ~cal
        rows.append(
            {
                "threshold": th.threshold,
                "coverage": float(decided.sum() / (~cal).sum()),
                "disagreement": float(loss[decided].mean()) if decided.any() else math.nan,
            }
        )
    realised = np.array([r["disagreement"] for r in rows])
    held = np.where(np.isnan(realised), 0.0, realised) <= risk  # nothing decided: no disagreement
    return {
        "risk": risk,
        "delta": delta,
        "against": against,
        "splits": splits,
        "share_within_risk": float(held.mean()),
        "disagreement_mean": float(np.nanmean(realised)) if (~np.isnan(realised)).any() else math.nan,
        "disagreement_q90": float(np.nanquantile(realised, 0.9)) if (~np.isnan(realised)).any() else math.nan,
        "coverage_mean": float(np.mean([r["coverage"] for r in rows])),
        "coverage_min": float(np.min([r["coverage"] for r in rows])),
        "per_split": rows,
    }


RISK_LEVELS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
