"""Agreement of a calibrated judge with the reviewers, as bootstrap replicates over conversations: pure
functions, arrays in, arrays out.

Every metric takes a weight matrix W (B, R): row b weights label row r by how often its conversation was
drawn in resample b (a row of ones is the sample itself), so all resamples, and every judge on the same
resamples, are one vectorised computation; a difference of two judges' replicates is then a paired
bootstrap by conversation.
"""

from __future__ import annotations

import numpy as np

from calibration.compare.metrics import bootstrap_weights

__all__ = ["METRICS", "conversation_weights", "exact_agreement", "metric_replicates", "nearest_index", "weighted_kappa"]

METRICS = ("rmse", "nll", "kappa")
"""What compare-judges reports per judge and question: RMSE of the expected answer, log loss of the answer,
quadratic-weighted Cohen's kappa of the nearest option (lower is better for the first two)."""
LOWER_IS_BETTER = {"rmse": True, "nll": True, "kappa": False}


def conversation_weights(conversation: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(1 + n_boot, R) weights: the sample itself, then n_boot resamples of the conversations with
    replacement (`conversation`: (R,) conversation code of each label row)."""
    return np.vstack([np.ones(len(conversation)), bootstrap_weights(conversation, n_boot, seed)])


def nearest_index(expected: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(R,) index of the option whose value is nearest each expected answer (the answer a judge would give).

    >>> nearest_index(np.array([1.2, 3.6, 2.5]), np.array([1.0, 2.0, 3.0, 4.0])).tolist()
    [0, 3, 1]
    """
    return np.abs(expected[:, None] - values[None]).argmin(1)


def weighted_kappa(a: np.ndarray, b: np.ndarray, k: int, W: np.ndarray, *, quadratic: bool = True) -> np.ndarray:
    """(B,) Cohen's kappa between option indices a and b ((R,) each, in [0, k)) under each row of W:
    quadratic-weighted (disagreement by squared distance on the scale, the ordinal default) or, with
    quadratic=False, unweighted. NaN where chance alone explains every answer (one option only).

    >>> from sklearn.metrics import cohen_kappa_score
    >>> a, b = np.array([0, 1, 2, 3, 3, 1]), np.array([0, 2, 2, 3, 1, 1])
    >>> round(float(weighted_kappa(a, b, 4, np.ones((1, 6)))[0]), 6) == round(
    ...     cohen_kappa_score(a, b, weights="quadratic", labels=[0, 1, 2, 3]), 6)
    True
    """
    onehot = np.zeros((len(a), k * k))
    onehot[np.arange(len(a)), a * k + b] = 1.0
    seen = (W @ onehot).reshape(len(W), k, k)  # (B, k, k) weighted confusion
    with np.errstate(invalid="ignore", divide="ignore"):
        seen = seen / seen.sum((1, 2), keepdims=True)
        chance = seen.sum(2)[:, :, None] * seen.sum(1)[:, None, :]
        i, j = np.indices((k, k))
        w = (i - j) ** 2 if quadratic else (i != j).astype(float)
        return 1.0 - (w * seen).sum((1, 2)) / (w * chance).sum((1, 2))


def exact_agreement(a: np.ndarray, b: np.ndarray, W: np.ndarray) -> np.ndarray:
    """(B,) share of rows where a and b give the same option."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (W @ (a == b).astype(float)) / W.sum(1)


def metric_replicates(
    probs: np.ndarray, answer: np.ndarray, values: np.ndarray, W: np.ndarray
) -> dict[str, np.ndarray]:
    """Each METRIC as (B,) replicates: probs (R, K) the calibrated distribution of each label row's answer,
    answer (R,) the option index the reviewer gave, values (K,) the options' values.

    >>> p = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> m = metric_replicates(p, np.array([0, 1]), np.array([1.0, 2.0]), np.ones((1, 2)))
    >>> round(float(m["rmse"][0]), 4), round(float(m["nll"][0]), 4), float(m["kappa"][0])
    (0.1581, 0.1643, 1.0)
    """
    k = len(values)
    expected = probs[:, :k] @ values
    se = (expected - values[answer]) ** 2
    nll = -np.log(np.clip(probs[np.arange(len(answer)), answer], 1e-12, None))
    with np.errstate(invalid="ignore", divide="ignore"):
        total = W.sum(1)
        return {
            "rmse": np.sqrt(W @ se / total),
            "nll": W @ nll / total,
            "kappa": weighted_kappa(nearest_index(expected, values), answer, k, W),
        }


def interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap replicates (NaN ones left out)."""
    finite = replicates[np.isfinite(replicates)]
    if finite.size == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(finite, [50 * (1 - level), 50 * (1 + level)])
    return float(low), float(high)
