"""Splits that keep every conversation on one side: cross-validation folds and validation subsets."""

from __future__ import annotations

import numpy as np

from rubric.errors import InputError


def group_folds(groups: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """(N,) fold index of every element, whole groups per fold, folds balanced in element count.

    Groups are shuffled with `seed`, then each goes to the currently smallest fold.

    >>> group_folds(np.array([0, 0, 1, 1, 2, 2]), 3, seed=0).tolist().count(0)
    2
    """
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds}.")
    unique, counts = np.unique(groups, return_counts=True)
    if len(unique) < n_folds:
        raise InputError(
            f"{len(unique)} conversations cannot fill {n_folds} folds (every fold needs a conversation of its own).",
            fix=f"use at most {len(unique)} folds (folds=, or search.inner_folds= for a search), or add conversations.",
        )
    order = np.random.default_rng(seed).permutation(len(unique))
    size = np.zeros(n_folds, dtype=np.int64)
    fold_of_group = np.empty(len(unique), dtype=np.int64)
    for g in order:
        f = int(np.argmin(size))
        fold_of_group[g] = f
        size[f] += counts[g]
    return fold_of_group[np.searchsorted(unique, groups)]


def validation_split(rows: np.ndarray, row_groups: np.ndarray, fraction: float, seed: int):
    """Split `rows` into (fit, validation) with whole groups in validation, about `fraction` of rows."""
    if fraction <= 0:
        return rows, rows[:0]
    groups = np.unique(row_groups[rows])
    rng = np.random.default_rng(seed)
    chosen: list = []
    taken, goal = 0, fraction * len(rows)
    counts = {g: int(np.sum(row_groups[rows] == g)) for g in groups}
    for g in rng.permutation(groups):
        if taken >= goal or len(chosen) == len(groups) - 1:
            break
        chosen.append(g)
        taken += counts[g]
    in_val = np.isin(row_groups[rows], chosen)
    return rows[~in_val], rows[in_val]


def subsample(rows: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded random `fraction` of `rows` (at least one), order kept."""
    if fraction >= 1:
        return rows
    k = max(1, int(round(fraction * len(rows))))
    keep = np.sort(np.random.default_rng(seed).choice(len(rows), size=k, replace=False))
    return rows[keep]
