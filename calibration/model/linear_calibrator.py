"""The simple personalised models as calibrators: `role-rubric train model=linear|ordinal`.

The multinomial logistic (`linear`) and cumulative-logit (`ordinal`) models of calibration/model/linear.py, on
the judge's standardised expected answer to every question plus judge offsets, are the baselines cv reports;
where cv says one of them agrees with the reviewers better than the network, this trains it on every label
and it ships in the same model directory as the network (calibration/model/files.py).

`choose_and_refit` is the one place their L2 penalty is chosen, for cv's baselines
(calibration/evaluation/baselines.py) and for training alike: per training set, the penalty of `GRID` with the
lowest inner cross-validated squared error of the expected target answer (INNER_FOLDS folds of the training
conversations), then the model refitted on the whole training set with it. So `train model=linear seed=f`
on the labels outside cv fold f fits what cv's `linear` column holds for fold f.

`LinearCalibrator` calls like CalibrationNet (x (M, B, D), judge (M, B) -> (M, B, Q, K) log-probabilities, one
model), so the ensemble code predicts with it unchanged; it reads the trailing n_inputs columns of x, the
expected answers that a feature spec with `expected` puts last (calibration/data/dataset.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from calibration.data.dataset import Dataset
from calibration.data.splits import group_folds
from calibration.model.bases import _for_every_question, padded_rows
from calibration.model.linear import GRID, LinearFit, fit_linear, parameter_shapes
from calibration.model.settings import torch_threads

MODELS = {"linear": "multinomial", "ordinal": "ordinal"}
"""`train model=` name -> the kind in calibration/model/linear.py."""
INNER_FOLDS = 3


class LinearCalibrator:
    """One fitted linear model of every question, called like CalibrationNet (n_models = 1)."""

    n_models = 1

    def __init__(self, fit: LinearFit, n_options: list[int]):
        self.fit = fit
        self.n_options = list(n_options)
        self.n_inputs = int(fit.weight.shape[2])  # E: the expected answers it reads, the last E columns of x

    def __call__(self, x: torch.Tensor, judge: torch.Tensor) -> torch.Tensor:
        """(M, B, Q, K) log-probabilities (-inf on padded options) for x (M, B, D) and judge (M, B), -1 = population."""
        with torch.no_grad():
            return self.fit.logp(x[..., -self.n_inputs :], judge, self.n_options)

    def subset(self, models) -> LinearCalibrator:
        """The one model (suggest asks for members one by one)."""
        return self

    def eval(self) -> LinearCalibrator:
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"weight": self.fit.weight, "bias": self.fit.bias, "judge": self.fit.judge}


def expected_shapes(kind: str, n_q: int, n_in: int, n_judges: int, n_k: int) -> dict[str, tuple[int, ...]]:
    """The tensors of a saved LinearCalibrator of `kind` (a model axis of 1 in front)."""
    return {name: (1, *shape) for name, shape in parameter_shapes(kind, n_q, n_in, n_judges, n_k).items()}


@dataclass
class Choice:
    """The refitted target models of `choose_and_refit`, one per training set, and how their L2 was chosen."""

    fit: LinearFit  # M = number of training sets, the target question only
    l2: list[float]
    sq_error: np.ndarray  # (M, len(GRID)) inner-cv summed squared error of the expected target answer


def choose_and_refit(ds: Dataset, e: torch.Tensor, kind: str, trains: list[np.ndarray], seeds: list[int]) -> Choice:
    """For each training set (label rows with a target answer), the L2 of GRID with the lowest inner-cv
    squared error of the expected answer (INNER_FOLDS folds of its conversations, drawn with its seed; rows
    weighted by their directory's `weights=` where the data has them, as in the network's early stopping), and
    the target model refitted on the whole set with it. Every (set, inner fold, penalty) model is fitted in
    one batched L-BFGS run, then every refit in another. e: (N, E) every item's expected inputs."""
    t = ds.target_index
    fits, evals, l2 = [], [], []
    for train, seed in zip(trains, seeds, strict=True):
        inner = group_folds(ds.groups, INNER_FOLDS, seed)[ds.label_item[train]]
        for i in range(INNER_FOLDS):
            for lam in GRID:
                fits.append(train[inner != i])
                evals.append(train[inner == i])
                l2.append(lam)
    values = ds.option_values()[t, : int(ds.n_options[t])]
    inner_fit = fit_target(ds, e, kind, fits, l2)
    sq_error = np.array(
        [
            (_row_weight(ds, rows) * (p @ values - values[ds.answers[rows, t]]) ** 2).sum()
            for p, rows in zip(target_proba(ds, e, inner_fit, evals), evals, strict=True)
        ]
    )
    sq_error = sq_error.reshape(len(trains), INNER_FOLDS, len(GRID)).sum(1)
    chosen = [GRID[int(np.argmin(row))] for row in sq_error]
    return Choice(fit_target(ds, e, kind, trains, chosen), chosen, sq_error)


def _row_weight(ds: Dataset, rows: np.ndarray) -> np.ndarray | float:
    """How much each label row counts (its directory's `weights=`, calibration/data/union.py); 1 without."""
    return 1.0 if ds.label_weight is None else ds.label_weight[rows]


def _padded_weight(ds: Dataset, idx: torch.Tensor) -> torch.Tensor | None:
    return None if ds.label_weight is None else torch.from_numpy(ds.label_weight)[idx]


def fit_target(ds: Dataset, e: torch.Tensor, kind: str, fits: list[np.ndarray], l2: list[float]) -> LinearFit:
    """One model of the target per (fit rows, l2), in one L-BFGS run (rows weighted as the network's are)."""
    t = ds.target_index
    item, judge = torch.from_numpy(ds.label_item.copy()), torch.from_numpy(ds.label_judge.copy())
    answers = torch.from_numpy(ds.answers[:, [t]].copy())
    idx, mask = padded_rows(fits)
    with torch_threads(None):  # small tensors: one thread (calibration/model/settings.py)
        return fit_linear(
            kind,
            e[item[idx]],
            judge[idx],
            answers[idx],
            mask,
            [int(ds.n_options[t])],
            len(ds.judges),
            torch.tensor(l2, dtype=torch.float64),
            row_weight=_padded_weight(ds, idx),
        )


def target_proba(ds: Dataset, e: torch.Tensor, fit: LinearFit, rows: list[np.ndarray]) -> list[np.ndarray]:
    """Model m of `fit` (the target only)'s (len(rows[m]), K) distributions on its rows."""
    item, judge = torch.from_numpy(ds.label_item.copy()), torch.from_numpy(ds.label_judge.copy())
    idx, _ = padded_rows(rows)
    with torch.no_grad():
        logp = fit.logp(e[item[idx]], judge[idx], [int(ds.n_options[ds.target_index])])[:, :, 0].numpy()  # (M, L, K)
    return [np.exp(logp[m, : len(r)]) for m, r in enumerate(rows)]


def train_linear(ds: Dataset, model: str, *, seed: int = 0) -> tuple[LinearCalibrator, dict, dict]:
    """Train `model` (a key of MODELS) on every label of `ds`: returns the calibrator, its feature spec and
    what to record in model.json (the kind, the chosen L2 and the inner-cv RMSE of every penalty).

    The target is fitted exactly as cv fits a fold's (`choose_and_refit`); the other questions, which
    predict writes too, with the same penalty, all in one L-BFGS run (their problems are separate: the loss
    and the penalty are sums over questions)."""
    kind = MODELS[model]
    expected = ds.expected_spec(ds.rubric.ids)
    spec = {"questions": [], "coverage": False, "mask": False, "expected": expected}
    e = torch.from_numpy(ds.expected_inputs(expected))
    t = ds.target_index
    train = np.flatnonzero(ds.answers[:, t] >= 0)
    choice = choose_and_refit(ds, e, kind, [train], [seed])
    n_options = [int(k) for k in ds.n_options]
    n_in, n_judges = e.shape[1], len(ds.judges)
    fit = _for_every_question(choice.fit, [t], n_options, n_in, n_judges)
    others = [q for q in range(len(n_options)) if q != t]
    if others:
        rows = np.flatnonzero((ds.answers[:, others] >= 0).any(1))
        idx, mask = padded_rows([rows])
        item, judge = torch.from_numpy(ds.label_item.copy()), torch.from_numpy(ds.label_judge.copy())
        answers = torch.from_numpy(ds.answers[:, others].copy())
        with torch_threads(None):
            rest = fit_linear(
                kind,
                e[item[idx]],
                judge[idx],
                answers[idx],
                mask,
                [n_options[q] for q in others],
                n_judges,
                choice.l2[0],
                row_weight=_padded_weight(ds, idx),
            )
        rest = _for_every_question(rest, others, n_options, n_in, n_judges)  # zeros on the target: a sum joins them
        fit = LinearFit(kind, *(getattr(fit, n) + getattr(rest, n) for n in ("weight", "bias", "judge")))
    record = {
        "kind": kind,
        "l2": choice.l2[0],
        "inner_folds": INNER_FOLDS,
        "seed": int(seed),
        "inner_cv_rmse": {
            f"{lam:g}": float(np.sqrt(err / np.sum(_row_weight(ds, train) * np.ones(len(train)))))
            for lam, err in zip(GRID, choice.sq_error[0], strict=True)
        },
    }
    return LinearCalibrator(fit, n_options), spec, record
