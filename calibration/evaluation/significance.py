"""Uncertainty on agreement metrics: bootstrap intervals and paired permutation tests.

Both resample whole groups (conversations) when `groups` is given: the rows of one conversation share
the LLM's distributions and its human judges, so they are not independent and resampling rows would
give intervals that are too narrow.

Every replicate is expressed as row weights (a bootstrap resample is a multiset of rows, so weight =
multiplicity) and, for the permutation test, a per-row choice between two prediction vectors. All
replicates are then scored at once with array operations; Kendall's tau-b uses quadratic forms of the
pairwise sign matrices, so 1,000 replicates of 1,000 rows take milliseconds, not a Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

METRICS: tuple[str, ...] = ("rmse", "pearson", "spearman", "kendall")


def _validate(name: str, x: np.ndarray, n: int | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {x.shape}.")
    if n is not None and len(x) != n:
        raise ValueError(f"{name} has {len(x)} rows but the answers have {n}; pass arrays of the same rows.")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} contains NaN or infinite values; drop those rows first.")
    return x


def _group_index(groups: Sequence | np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Map each row to a group number 0..G-1 (each row its own group when `groups` is None)."""
    if groups is None:
        return np.arange(n), n
    groups = np.asarray(groups)
    if len(groups) != n:
        raise ValueError(f"groups has {len(groups)} rows but the answers have {n}.")
    _, index = np.unique(groups, return_inverse=True)
    return index.reshape(-1), int(index.max()) + 1 if n else 0


def _weighted_ranks(X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties averaged) of every row of X (R, n), counting row i W[r, i] times."""
    order = np.argsort(X, axis=1, kind="stable")
    xs = np.take_along_axis(X, order, axis=1)
    ws = np.take_along_axis(W, order, axis=1)
    cum = np.cumsum(ws, axis=1)
    before = cum - ws
    tie_break = np.diff(xs, axis=1) != 0
    starts = np.concatenate([np.ones((len(X), 1), bool), tie_break], axis=1)
    ends = np.concatenate([tie_break, np.ones((len(X), 1), bool)], axis=1)
    # A tie block occupies ranks L+1 .. E where L = weight before its first element, E = cumulative at its end.
    low = np.maximum.accumulate(np.where(starts, before, 0.0), axis=1)
    high = np.minimum.accumulate(np.where(ends, cum, np.inf)[:, ::-1], axis=1)[:, ::-1]
    ranks = np.empty_like(X)
    np.put_along_axis(ranks, order, (low + 1.0 + high) / 2.0, axis=1)
    return ranks


def _weighted_pearson(X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> np.ndarray:
    total = W.sum(axis=1)
    dx = X - (W * X).sum(axis=1, keepdims=True) / total[:, None]
    dy = Y - (W * Y).sum(axis=1, keepdims=True) / total[:, None]
    cov = (W * dx * dy).sum(axis=1)
    var = (W * dx * dx).sum(axis=1) * (W * dy * dy).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        # Relative tolerance: a constant vector leaves floating-point dust, which must count as zero.
        scale = (W * X * X).sum(axis=1) * (W * Y * Y).sum(axis=1)
        return np.where(var > 1e-20 * np.maximum(scale, 1e-300), cov / np.sqrt(var), np.nan)


def _sign(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sign(a[:, None] - b[None, :])


def _kendall(candidates: list[np.ndarray], masks: list[np.ndarray], y: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Kendall's tau-b for R replicates; replicate r predicts candidates[k][i] for row i where masks[k][r, i].

    Sums over ordered row pairs are quadratic forms u^T A v of (n, n) pair matrices, with u, v the
    replicate's weights restricted to one candidate; pairs of copies of one row count as tied.
    """
    sy = _sign(y, y)
    ty = (sy == 0).astype(float)
    total = W.sum(axis=1)
    concordance = np.zeros(len(W))
    ties_x = np.zeros(len(W))
    parts = [W * m for m in masks]
    for a, ua in zip(candidates, parts, strict=True):
        for b, ub in zip(candidates, parts, strict=True):
            sx = _sign(a, b)
            concordance += ((ua @ (sx * sy)) * ub).sum(axis=1)
            ties_x += ((ua @ (sx == 0).astype(float)) * ub).sum(axis=1)
    ties_y = ((W @ ty) * W).sum(axis=1)
    pairs = total * (total - 1) / 2
    tx, ty_ = (ties_x - total) / 2, (ties_y - total) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        denom = np.sqrt((pairs - tx) * (pairs - ty_))
        return np.where(denom > 0, concordance / 2 / np.where(denom > 0, denom, 1.0), np.nan)


def _replicate_metrics(
    candidates: list[np.ndarray], masks: list[np.ndarray], y: np.ndarray, W: np.ndarray
) -> dict[str, np.ndarray]:
    """All metrics for R replicates at once; each returned array has shape (R,)."""
    X = sum(m * c[None, :] for c, m in zip(candidates, masks, strict=True))
    Y = np.broadcast_to(y, X.shape)
    rmse = np.sqrt((W * (X - Y) ** 2).sum(axis=1) / W.sum(axis=1))
    return {
        "rmse": rmse,
        "pearson": _weighted_pearson(X, Y, W),
        "spearman": _weighted_pearson(_weighted_ranks(X, W), _weighted_ranks(np.array(Y), W), W),
        "kendall": _kendall(candidates, masks, y, W),
    }


def point_agreement(expected: np.ndarray, answers: np.ndarray) -> dict[str, float]:
    """RMSE, Pearson, Spearman and Kendall tau-b of predictions against answers, as plain floats.

    Args:
        expected: (n,) predicted values (e.g. the expected answer), in answer units.
        answers: (n,) the human answers.

    Correlations are NaN when either side is constant.

    >>> got = point_agreement(np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 4.0]))
    >>> {name: round(value, 4) for name, value in got.items()}
    {'rmse': 0.5774, 'pearson': 0.982, 'spearman': 1.0, 'kendall': 1.0}
    """
    y = _validate("answers", answers)
    x = _validate("expected", expected, len(y))
    values = _replicate_metrics([x], [np.ones((1, len(y)))], y, np.ones((1, len(y))))
    return {name: float(values[name][0]) for name in METRICS}


def bootstrap_counts(
    groups: Sequence | np.ndarray | None, n: int, *, rng: np.random.Generator, n_boot: int
) -> np.ndarray:
    """Row multiplicities of `n_boot` bootstrap resamples that draw whole groups with replacement.

    Returns an (n_boot, n) float array; row i of resample r appears `counts[r, i]` times.
    """
    index, n_groups = _group_index(groups, n)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    group_counts = np.zeros((n_boot, n_groups))
    np.add.at(group_counts, (np.arange(n_boot)[:, None], draws), 1.0)
    return group_counts[:, index]


def bootstrap_agreement(
    expected: np.ndarray,
    answers: np.ndarray,
    *,
    rng: np.random.Generator,
    groups: Sequence | np.ndarray | None = None,
    n_boot: int = 1000,
    level: float = 0.95,
) -> dict[str, dict[str, float]]:
    """Point estimates and percentile bootstrap intervals of RMSE, Pearson, Spearman and Kendall.

    Args:
        expected: (n,) predictions in answer units.
        answers: (n,) human answers.
        rng: the random generator for the resamples.
        groups: (n,) group label of each row (e.g. conversation id); whole groups are resampled.
            None resamples rows.
        n_boot: number of resamples.
        level: coverage of the interval (0.95 -> 2.5th and 97.5th percentiles).

    Returns:
        {metric: {"value", "low", "high"}}; replicates where a correlation is undefined are ignored.

    >>> y = np.array([1.0, 2.0, 3.0, 4.0] * 10)
    >>> ci = bootstrap_agreement(y, y, rng=np.random.default_rng(0), n_boot=200)
    >>> ci["rmse"], round(ci["pearson"]["low"], 6)
    ({'value': 0.0, 'low': 0.0, 'high': 0.0}, 1.0)
    """
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}.")
    y = _validate("answers", answers)
    x = _validate("expected", expected, len(y))
    counts = bootstrap_counts(groups, len(y), rng=rng, n_boot=n_boot)
    replicates = _replicate_metrics([x], [np.ones_like(counts)], y, counts)
    point = point_agreement(x, y)
    tail = (1 - level) / 2 * 100
    out = {}
    for name in METRICS:
        values = replicates[name][np.isfinite(replicates[name])]
        low, high = np.percentile(values, [tail, 100 - tail]) if len(values) else (np.nan, np.nan)
        out[name] = {"value": point[name], "low": float(low), "high": float(high)}
    return out


def permutation_test(
    baseline: np.ndarray,
    calibrated: np.ndarray,
    answers: np.ndarray,
    *,
    rng: np.random.Generator,
    groups: Sequence | np.ndarray | None = None,
    n_perm: int = 1000,
) -> dict[str, dict[str, float]]:
    """Paired permutation (swap) test of a baseline against the calibrated model on the same rows.

    Under the null hypothesis the two methods are exchangeable on every group, so each replicate swaps
    the two predictions on a random half of the groups (the sign-flip test, for a metric that is not a
    mean of per-row terms) and recomputes metric(baseline) - metric(calibrated).

    Args:
        baseline, calibrated: (n,) predictions of the two methods, in answer units.
        answers: (n,) human answers.
        rng: the random generator for the swaps.
        groups: (n,) group label of each row; all rows of a group are swapped together.
        n_perm: number of random swaps.

    Returns:
        {metric: {"difference": baseline - calibrated, "p_value": two-sided, (1 + #|T*| >= |T|) / (1 + n_perm)}}.
        A p-value is NaN when the observed difference is undefined (e.g. a constant baseline's Pearson).

    >>> y = np.array([1.0, 2.0, 3.0, 4.0] * 10)
    >>> permutation_test(y, y, y, rng=np.random.default_rng(0), n_perm=99)["rmse"]
    {'difference': 0.0, 'p_value': 1.0}
    """
    y = _validate("answers", answers)
    b = _validate("baseline", baseline, len(y))
    c = _validate("calibrated", calibrated, len(y))
    index, n_groups = _group_index(groups, len(y))
    swap = (rng.random((n_perm, n_groups)) < 0.5)[:, index].astype(float)
    ones = np.ones((1, len(y)))
    observed_b = _replicate_metrics([b], [ones], y, ones)
    observed_c = _replicate_metrics([c], [ones], y, ones)
    # Replicate r predicts (b, c) swapped on its chosen groups: method A = c where swapped, else b.
    weights = np.ones_like(swap)
    as_b = _replicate_metrics([b, c], [1 - swap, swap], y, weights)
    as_c = _replicate_metrics([c, b], [1 - swap, swap], y, weights)
    out = {}
    for name in METRICS:
        diff = float(observed_b[name][0] - observed_c[name][0])
        null = as_b[name] - as_c[name]
        if not np.isfinite(diff):
            p = float("nan")
        else:
            # A small tolerance so that exact ties (e.g. identical methods) count as "as extreme".
            extreme = np.abs(np.nan_to_num(null, nan=0.0)) >= abs(diff) - 1e-12
            p = float((1 + extreme.sum()) / (1 + n_perm))
        out[name] = {"difference": diff, "p_value": p}
    return out
