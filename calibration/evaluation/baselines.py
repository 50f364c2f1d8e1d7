"""Baselines for the target question, out of fold: each returns (R, K) distributions for every label row.

- constant: the training answers' distribution (its expected value is the training mean);
- judge_mean: each judge's own training distribution (smoothed toward the pooled one; unseen judge = pooled);
- random: a uniformly random answer per row, seeded;
- argmax_llm: the LLM judge's most probable option;
- expected_llm: the LLM judge's distribution itself.
"""

from __future__ import annotations

import numpy as np

from calibration.data.dataset import Dataset

JUDGE_PRIOR_STRENGTH = 2.0  # pseudo-answers from the pooled distribution added to each judge's counts


def _counts(ds: Dataset, rows: np.ndarray) -> np.ndarray:
    t = ds.target_index
    answers = ds.answers[rows, t]
    return np.bincount(answers[answers >= 0], minlength=int(ds.n_options.max())).astype(float)


def constant(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    for f in range(folds):
        counts = _counts(ds, np.flatnonzero(fold_of_row != f))
        out[fold_of_row == f] = counts / counts.sum()
    return out


def judge_mean(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    for f in range(folds):
        train = np.flatnonzero(fold_of_row != f)
        pooled = _counts(ds, train)
        pooled /= pooled.sum()
        for j in range(len(ds.judges)):
            counts = _counts(ds, train[ds.label_judge[train] == j]) + JUDGE_PRIOR_STRENGTH * pooled
            out[(fold_of_row == f) & (ds.label_judge == j)] = counts / counts.sum()
    return out


def random(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    k = int(ds.n_options[ds.target_index])
    pick = np.random.default_rng(seed).integers(0, k, size=len(fold_of_row))
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    out[np.arange(len(fold_of_row)), pick] = 1.0
    return out


def argmax_llm(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    llm = ds.probs[ds.label_item, ds.target_index]
    out = np.zeros_like(llm, dtype=float)
    out[np.arange(len(llm)), llm.argmax(axis=1)] = 1.0
    return out


def expected_llm(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    return ds.probs[ds.label_item, ds.target_index].astype(float)


BASELINES = {"constant": constant, "judge_mean": judge_mean, "random": random, "argmax_llm": argmax_llm,
             "expected_llm": expected_llm}
