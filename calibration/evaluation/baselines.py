"""Baselines for the target question, out of fold: each returns (R, K) distributions for every label row.

- constant: the training answers' distribution (its expected value is the training mean);
- judge_mean: each judge's own training distribution (smoothed toward the pooled one; unseen judge = pooled);
- random: a uniformly random answer per row, seeded;
- argmax_llm: the LLM judge's most probable option;
- expected_llm: the LLM judge's distribution itself;
- linear / ordinal: the simple personalised models (calibration/model/linear.py) on the judge's expected
  answer to every question + judge offsets, each with its L2 penalty chosen by inner cross-validation
  (3 folds of the training conversations, by the RMSE of the expected answer: the headline metric, so
  the baselines are as strong as they can be there; by NLL the multinomial model picks penalties that
  cost it 0.015 RMSE on the LLM-Rubric data). The calibrator must beat these.

The LLM baselines (argmax_llm, expected_llm and cv's calibrated_llm) read the target's own distribution:
`NEEDS_TARGET_DISTRIBUTION` lists them, and cross-validation skips them, with the reason, where the judge
was not asked the target for every labelled item.
"""

from __future__ import annotations

import numpy as np
import torch

from calibration.data.dataset import Dataset
from calibration.model.linear_calibrator import choose_and_refit, target_proba

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


def linear_oof(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int, *, kind: str) -> np.ndarray:
    """(R, K) out-of-fold target distributions of the personalised `kind` model. Per outer fold f, the L2
    penalty is chosen by inner cv on the fold's training rows (seed + f) and the model refitted on all of them
    (`choose_and_refit`, the function `role-rubric train model=linear|ordinal` trains with)."""
    labelled = ds.answers[:, ds.target_index] >= 0
    e = torch.from_numpy(ds.expected_inputs(ds.expected_spec(ds.rubric.ids)))
    trains = [np.flatnonzero((fold_of_row != f) & labelled) for f in range(folds)]
    tests = [np.flatnonzero(fold_of_row == f) for f in range(folds)]
    refit = choose_and_refit(ds, e, kind, trains, [seed + f for f in range(folds)]).fit
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    for rows, probs in zip(tests, target_proba(ds, e, refit, tests), strict=True):
        out[rows, : probs.shape[1]] = probs
    return out


def linear(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    return linear_oof(ds, fold_of_row, folds, seed, kind="multinomial")


def ordinal(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    return linear_oof(ds, fold_of_row, folds, seed, kind="ordinal")


BASELINES = {
    "constant": constant,
    "judge_mean": judge_mean,
    "random": random,
    "argmax_llm": argmax_llm,
    "expected_llm": expected_llm,
    "linear": linear,
    "ordinal": ordinal,
}
FITTED_BASELINES = ("linear", "ordinal")  # the ones that take time (an L-BFGS fit each)
NEEDS_TARGET_DISTRIBUTION = ("argmax_llm", "expected_llm", "calibrated_llm")
