"""Separation metrics of a score against binary adherent/violation labels, with conversation bootstraps.

Every metric takes a weight matrix W (B, N): row b weights item i by how often its conversation was
drawn in bootstrap resample b (row of ones = the sample itself), so the B resamples are one vectorised
computation. The positive class is *adherent*: a good score is high on adherent turns.
"""

from __future__ import annotations

import numpy as np

METRICS = (
    "auc",
    "ap",
    "mean_adherent",
    "mean_violation",
    "separation",
    "f1_adherent",
    "f1_violation",
    "macro_f1",
    "kappa",
)
"""Every metric `compare` reports per method, size and subset (each with _low/_high bootstrap bounds)."""


def bootstrap_weights(groups: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, N) item weights: each row resamples the conversations (`groups`, (N,) ints) with
    replacement and counts how often each item's conversation was drawn."""
    codes, index = np.unique(groups, return_inverse=True)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(codes), size=(n_boot, len(codes)))
    counts = np.zeros((n_boot, len(codes)))
    np.add.at(counts, (np.repeat(np.arange(n_boot), len(codes)), draws.ravel()), 1.0)
    return counts[:, index]


def _tie_groups(scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ascending sort order, start of each run of equal scores in it)."""
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    return order, np.flatnonzero(np.r_[True, s[1:] != s[:-1]])


def _class_weights(scores, y, W):
    order, starts = _tie_groups(scores)
    yw = y[order].astype(float)
    pos = np.add.reduceat(W[:, order] * yw, starts, axis=1)  # (B, U) adherent weight per distinct score
    neg = np.add.reduceat(W[:, order] * (1 - yw), starts, axis=1)
    return pos, neg


def auc(scores: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
    """(B,) area under the ROC curve (ties count half): P(score of an adherent > of a violation).

    >>> float(auc(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]), np.ones((1, 4)))[0])
    0.75
    """
    pos, neg = _class_weights(scores, y, W)
    below = np.cumsum(neg, axis=1) - neg
    with np.errstate(invalid="ignore", divide="ignore"):
        return (pos * (below + 0.5 * neg)).sum(1) / (pos.sum(1) * neg.sum(1))


def average_precision(scores: np.ndarray, y: np.ndarray, W: np.ndarray) -> np.ndarray:
    """(B,) average precision of ranking adherent turns first (as sklearn's, ties as one threshold).

    >>> float(average_precision(np.array([0.1, 0.4, 0.35, 0.8]), np.array([0, 0, 1, 1]), np.ones((1, 4)))[0])
    0.8333333333333333
    """
    pos, neg = _class_weights(scores, y, W)
    tp = np.cumsum(pos[:, ::-1], axis=1)[:, ::-1]  # adherent weight at or above each threshold
    fp = np.cumsum(neg[:, ::-1], axis=1)[:, ::-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), 0.0)
        return (pos * precision).sum(1) / pos.sum(1)


def class_means(scores: np.ndarray, y: np.ndarray, W: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((B,), (B,)) mean score of adherent and of violation turns."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (W @ (scores * y)) / (W @ y), (W @ (scores * (1 - y))) / (W @ (1 - y))


def confusion_metrics(pred: np.ndarray, y: np.ndarray, W: np.ndarray) -> dict[str, np.ndarray]:
    """Per-class F1 (adherent, violation), macro F1 and Cohen's kappa of 0/1 predictions, each (B,).

    >>> m = confusion_metrics(np.array([1, 1, 0, 0]), np.array([1, 0, 0, 0]), np.ones((1, 4)))
    >>> round(float(m["macro_f1"][0]), 4), round(float(m["kappa"][0]), 4)
    (0.7333, 0.5)
    """
    p, t = pred.astype(float), y.astype(float)
    tp, fp = W @ (p * t), W @ (p * (1 - t))
    fn, tn = W @ ((1 - p) * t), W @ ((1 - p) * (1 - t))
    total = tp + fp + fn + tn
    with np.errstate(invalid="ignore", divide="ignore"):
        f1_adh = 2 * tp / (2 * tp + fp + fn)
        f1_vio = 2 * tn / (2 * tn + fn + fp)
        observed = (tp + tn) / total
        chance = ((tp + fp) * (tp + fn) + (tn + fn) * (tn + fp)) / total**2
        kappa = (observed - chance) / (1 - chance)
    return {"f1_adherent": f1_adh, "f1_violation": f1_vio, "macro_f1": (f1_adh + f1_vio) / 2, "kappa": kappa}


def best_threshold(scores: np.ndarray, y: np.ndarray) -> float:
    """The cut (adherent if score >= cut) with the highest macro F1 on these turns; the middle of the
    gap below the winning score, so that held-out scores between two seen ones are split fairly."""
    values = np.unique(scores)
    cuts = np.r_[values[0], (values[1:] + values[:-1]) / 2]  # cut i: adherent iff score >= values[i]
    pred = scores[None, :] >= cuts[:, None]  # (cuts, N)
    return float(cuts[int(np.nanargmax(_macro_f1_per_cut(pred, y)))])


def _macro_f1_per_cut(pred: np.ndarray, y: np.ndarray) -> np.ndarray:
    t = y.astype(bool)
    tp, fp = (pred & t).sum(1), (pred & ~t).sum(1)
    fn, tn = (~pred & t).sum(1), (~pred & ~t).sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (2 * tp / (2 * tp + fp + fn) + 2 * tn / (2 * tn + fn + fp)) / 2


def cross_fitted_predictions(
    scores: np.ndarray, y: np.ndarray, groups: np.ndarray, *, folds: int = 5, seed: int = 0
) -> tuple[np.ndarray, list[float]]:
    """0/1 predictions where each conversation's cut was chosen on the other folds of conversations
    (never on its own turns), and the cut of each fold."""
    codes, index = np.unique(groups, return_inverse=True)
    fold_of = np.random.default_rng(seed).permutation(len(codes)) % folds
    pred = np.zeros(len(scores), dtype=bool)
    cuts = []
    for f in range(folds):
        test = fold_of[index] == f
        if not test.any():
            continue
        cut = best_threshold(scores[~test], y[~test])
        pred[test] = scores[test] >= cut
        cuts.append(cut)
    return pred, cuts


def interval(values: np.ndarray) -> tuple[float, float]:
    """The 95% percentile interval of bootstrap replicates (NaN replicates, e.g. a resample with no
    violation turn, are left out)."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return float("nan"), float("nan")
    low, high = np.percentile(finite, [2.5, 97.5])
    return float(low), float(high)
