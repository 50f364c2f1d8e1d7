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
from calibration.data.splits import group_folds
from calibration.model.linear import GRID, fit_linear
from calibration.model.settings import torch_threads
from calibration.model.train import padded_rows

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


INNER_FOLDS = 3


def linear_oof(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int, *, kind: str) -> np.ndarray:
    """(R, K) out-of-fold target distributions of the personalised `kind` model. Per outer fold, the L2
    penalty with the lowest inner-cv NLL (grid GRID) is refitted on the whole fold's training rows; every
    (outer fold, inner fold, penalty) model is fitted in one batched L-BFGS run."""
    t = ds.target_index
    labelled = ds.answers[:, t] >= 0
    e = torch.from_numpy(ds.expected_inputs(ds.expected_spec(ds.rubric.ids)))
    fits, evals, l2 = [], [], []
    for f in range(folds):
        train = np.flatnonzero((fold_of_row != f) & labelled)
        inner = group_folds(ds.groups, INNER_FOLDS, seed + f)[ds.label_item[train]]
        for i in range(INNER_FOLDS):
            for lam in GRID:
                fits.append(train[inner != i])
                evals.append(train[inner == i])
                l2.append(lam)
    values = ds.option_values()[t, : int(ds.n_options[t])]
    sq_error = np.array([((p @ values - values[ds.answers[rows, t]]) ** 2).sum()
                         for p, rows in zip(_fit_predict(ds, e, kind, fits, evals, l2), evals, strict=True)])
    sq_error = sq_error.reshape(folds, INNER_FOLDS, len(GRID)).sum(1)
    chosen = [GRID[int(np.argmin(sq_error[f]))] for f in range(folds)]
    tests = [np.flatnonzero(fold_of_row == f) for f in range(folds)]
    trains = [np.flatnonzero((fold_of_row != f) & labelled) for f in range(folds)]
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    for rows, probs in zip(tests, _fit_predict(ds, e, kind, trains, tests, chosen), strict=True):
        out[rows, : probs.shape[1]] = probs
    return out


def _fit_predict(ds, e, kind, fits, evals, l2):
    """Fit one model per (fit rows, l2) on the target; return each one's (rows, K) distributions on its eval
    rows."""
    t = ds.target_index
    k = int(ds.n_options[t])
    item, judge = torch.from_numpy(ds.label_item.copy()), torch.from_numpy(ds.label_judge.copy())
    answers = torch.from_numpy(ds.answers[:, [t]].copy())
    idx, mask = padded_rows(fits)
    with torch_threads(None):  # small tensors: one thread (calibration/model/settings.py)
        model = fit_linear(kind, e[item[idx]], judge[idx], answers[idx], mask, [k], len(ds.judges),
                           torch.tensor(l2, dtype=torch.float64))
    idx, mask = padded_rows(evals)
    with torch.no_grad():
        logp = model.logp(e[item[idx]], judge[idx], [k])[:, :, 0].numpy()  # (M, L, K)
    return [np.exp(logp[m, : len(rows)]) for m, rows in enumerate(evals)]


def linear(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    return linear_oof(ds, fold_of_row, folds, seed, kind="multinomial")


def ordinal(ds: Dataset, fold_of_row: np.ndarray, folds: int, seed: int) -> np.ndarray:
    return linear_oof(ds, fold_of_row, folds, seed, kind="ordinal")


BASELINES = {"constant": constant, "judge_mean": judge_mean, "random": random, "argmax_llm": argmax_llm,
             "expected_llm": expected_llm, "linear": linear, "ordinal": ordinal}
FITTED_BASELINES = ("linear", "ordinal")  # the ones that take time (an L-BFGS fit each)
NEEDS_TARGET_DISTRIBUTION = ("argmax_llm", "expected_llm", "calibrated_llm")
