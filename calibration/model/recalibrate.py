"""Pooling an ensemble's members, and recalibrating the pooled target distribution on held-out rows.

Pooling: the members' distributions are combined by their normalised geometric mean (the mean of the
log-probabilities, renormalised), or by their arithmetic mean.

Recalibration (vector scaling, Guo et al. 2017): the pooled target distribution p becomes
softmax(a * log p + b), one scale a_k and one bias b_k per option (b of the first option fixed at 0).
It is fitted by maximum a posteriori: the summed log-likelihood minus prior * |(a, b) - (1, 0)|^2 (a Gaussian
prior around the identity with variance 1 / (2 * prior), so its weight does not grow with the rows), on
out-of-bag rows: each ensemble member stops early on its own validation split (grouped by conversation),
so a training row that some members validated on has a prediction from those members that never trained
on it. With 16 members and 10% validation about 80% of the training rows have one. The rows the ensemble
is evaluated on are never used, so in `cv` each fold's map is fitted on that fold's training rows only.

Why: on the LLM-Rubric data the pooled out-of-fold P(answer = 3) spreads too much, and within a judge
its variation from item to item is anti-correlated with the observed frequency (regression slope about
-1.3 over 5 seeds); between judges it is calibrated. Single members are worse, so pooling does not cause
it, and a temperature alone does not fix it. The fitted maps (seed 0, per fold) scale log P(3) by 0.0-0.7 and
log P(2) by 0.4-0.7, and sharpen log P(4) by 1.1-1.6: P(3) spreads less. The within-judge anti-correlation
remains (the map has no judge term); the map only stops it from costing calibration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

POOLS = ("geometric", "arithmetic")
METHODS = ("vector", "none")


def pool(logp: np.ndarray, how: str) -> np.ndarray:
    """Pool members' log-probabilities (E, ..., K) into one distribution (..., K) (probabilities).

    -inf (an option the question lacks) stays probability 0 either way."""
    if how == "arithmetic":
        return np.exp(logp).mean(axis=0)
    if how != "geometric":
        raise ValueError(f"unknown pooling {how!r}; use one of {POOLS}.")
    mean = logp.mean(axis=0)
    mean = mean - mean.max(axis=-1, keepdims=True)
    p = np.exp(mean)
    return p / p.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Recalibration:
    """softmax(scale * log p + bias) over the first len(scale) options of question `question`."""

    question: int
    scale: np.ndarray  # (K,)
    bias: np.ndarray  # (K,)

    def apply_target(self, probs: np.ndarray) -> np.ndarray:
        """(B, K') distributions of the question (K' >= K; options beyond K are padding) -> recalibrated."""
        k = len(self.scale)
        z = np.log(np.clip(probs[:, :k], 1e-300, None)) * self.scale + self.bias
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        out = np.zeros_like(probs)
        out[:, :k] = p / p.sum(axis=1, keepdims=True)
        return out

    def apply(self, probs: np.ndarray) -> np.ndarray:
        """(B, Q, K') distributions of every question -> the same with this question recalibrated."""
        out = probs.copy()
        out[:, self.question] = self.apply_target(probs[:, self.question])
        return out

    def to_dict(self) -> dict:
        return {"question": self.question, "scale": self.scale.tolist(), "bias": self.bias.tolist()}

    @classmethod
    def from_dict(cls, d: dict) -> Recalibration:
        return cls(
            int(d["question"]),
            np.asarray(d["scale"], dtype=np.float64),
            np.asarray(d["bias"], dtype=np.float64),
        )


def fit_vector_scaling(
    probs: np.ndarray, answers: np.ndarray, prior: float, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Scales a (K,) and biases b (K,) (b[0] = 0) maximising sum_i w_i log softmax(a * log p_i + b)[y_i]
    - prior * (|a - 1|^2 + |b|^2). With no rows, the identity. Deterministic (L-BFGS from the identity).
    weight: (n,) each row's weight (its directory's `weights=`), scaled to mean 1 so the prior keeps its
    strength against the number of rows; None: 1 each."""
    k = probs.shape[1]
    if len(answers) == 0 or (weight is not None and not weight.sum() > 0):
        return np.ones(k), np.zeros(k)
    lp = np.log(np.clip(probs, 1e-300, None))
    onehot = np.eye(k)[answers]
    w = None if weight is None else (weight / weight.mean())[:, None]
    x0 = np.concatenate([np.ones(k), np.zeros(k - 1)])

    def loss(theta):
        a, b = theta[:k], np.concatenate([[0.0], theta[k:]])
        z = lp * a + b
        z = z - z.max(axis=1, keepdims=True)
        log_sm = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        grad_z = np.exp(log_sm) - onehot  # d(-log lik)/dz
        picked = log_sm * onehot
        if w is not None:
            grad_z, picked = grad_z * w, picked * w
        value = -picked.sum() + prior * np.sum((theta - x0) ** 2)
        grad = np.concatenate([(grad_z * lp).sum(axis=0), grad_z.sum(axis=0)[1:]]) + 2 * prior * (theta - x0)
        return value, grad

    theta = minimize(loss, x0, jac=True, method="L-BFGS-B").x
    return theta[:k], np.concatenate([[0.0], theta[k:]])


def out_of_bag(val_rows: list[np.ndarray], val_logp: list[np.ndarray], how: str) -> tuple[np.ndarray, np.ndarray]:
    """Rows (sorted) validated by at least one member, and their distributions pooled over those members.

    val_rows: per member, its validation label rows; val_logp: per member, (len(rows), K) log-probabilities."""
    if not val_rows or sum(len(r) for r in val_rows) == 0:
        k = val_logp[0].shape[1] if val_logp else 0
        return np.zeros(0, dtype=np.int64), np.zeros((0, k))
    rows = np.unique(np.concatenate(val_rows))
    k = val_logp[0].shape[1]
    total = np.zeros((len(rows), k))
    count = np.zeros(len(rows))
    for r, lp in zip(val_rows, val_logp, strict=True):
        at = np.searchsorted(rows, r)
        total[at] += np.exp(lp) if how == "arithmetic" else lp
        count[at] += 1
    mean = total / count[:, None]
    if how == "arithmetic":
        return rows, mean
    return rows, pool(mean[None], "geometric")


def fit_recalibration(
    val_rows: list[np.ndarray],
    val_logp: list[np.ndarray],
    answers: np.ndarray,
    *,
    question: int,
    n_options: int,
    how: str,
    prior: float,
    row_weight: np.ndarray | None = None,
) -> Recalibration:
    """The vector scaling of one ensemble from its members' validation rows (see the module docstring).

    answers: (R,) target option index of every label row (-1 = none); val_logp: (L_m, >= n_options);
    row_weight: (R,) each label row's weight, or None."""
    rows, probs = out_of_bag(val_rows, [lp[:, :n_options] for lp in val_logp], how)
    keep = answers[rows] >= 0
    weight = None if row_weight is None else row_weight[rows][keep]
    scale, bias = fit_vector_scaling(probs[keep], answers[rows][keep], prior, weight)
    return Recalibration(question, scale, bias)
