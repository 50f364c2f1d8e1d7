"""The seed ensemble: its members' predictions, pooled, and the target recalibration fitted on their
validation rows; `train_ensemble` trains the final ensemble on every label.

Pooling and the recalibration map themselves are in calibration/model/recalibrate.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from calibration.data.dataset import Dataset
from calibration.model import recalibrate
from calibration.model.network import CalibrationNet
from calibration.model.recalibrate import Recalibration, fit_recalibration
from calibration.model.settings import Settings, torch_threads
from calibration.model.train import Plan, train_models


def member_proba(net, X: torch.Tensor, items: list[np.ndarray], judges: list[np.ndarray]) -> list[np.ndarray]:
    """Each model m's distributions for its own (item, judge) pairs: a list of (L_m, Q, K) arrays.
    Judge -1 = population."""
    return [np.exp(lp) for lp in member_logproba(net, X, items, judges)]  # exp(-inf) = 0 on padded options


@torch.no_grad()
def member_logproba(net, X: torch.Tensor, items: list[np.ndarray], judges: list[np.ndarray]) -> list[np.ndarray]:
    """Like member_proba, as log-probabilities (-inf on options a question lacks)."""
    length = max(1, max(len(i) for i in items))
    item_idx = np.zeros((len(items), length), dtype=np.int64)
    judge_idx = np.full((len(items), length), -1, dtype=np.int64)
    for m, (i, j) in enumerate(zip(items, judges, strict=True)):
        item_idx[m, : len(i)] = i
        judge_idx[m, : len(j)] = j
    with torch_threads(None):
        logp = net(X[torch.from_numpy(item_idx)], torch.from_numpy(judge_idx))
    logp = logp.numpy().astype(np.float64)  # (M, L, Q, K)
    return [logp[m, : len(i)] for m, i in enumerate(items)]


def ensemble_proba(
    net,
    X: torch.Tensor,
    item: np.ndarray,
    judge: np.ndarray,
    *,
    pool: str = "geometric",
    recalibration: Recalibration | None = None,
) -> np.ndarray:
    """(B, Q, K) distributions of one seed ensemble (every model of `net`), pooled (`calibration.model.recalibrate`)
    and, given its recalibration, with the target question recalibrated."""
    members = member_logproba(net, X, [item] * net.n_models, [judge] * net.n_models)
    probs = recalibrate.pool(np.stack(members), pool)
    return probs if recalibration is None else recalibration.apply(probs)


def recalibrations(
    net: CalibrationNet, X: torch.Tensor, ds: Dataset, plan: Plan, ensembles: list[list[int]], settings: Settings
) -> list[Recalibration | None]:
    """The target recalibration of each ensemble (a list of model indices of `net`), fitted on its
    members' validation rows (calibration/model/recalibrate.py); None where Settings.recalibrates says no."""
    if not any(settings.recalibrates(len(members)) for members in ensembles):
        return [None] * len(ensembles)
    t = ds.target_index
    val_logp = member_logproba(
        net, X, [ds.label_item[v] for v in plan.val_rows], [ds.label_judge[v] for v in plan.val_rows]
    )
    return [
        target_recalibration(ds, settings, [plan.val_rows[m] for m in members], [val_logp[m][:, t] for m in members])
        for members in ensembles
    ]


NEW_RELEASE_MIN_CONVERSATIONS = 5
"""Labelled conversations of the last directory the recalibration's rows must hold before it gives them half
its weight (`recalibration_weight`): about what 10 labelled conversations give with 16 members (each one is
some member's validation conversation with probability 1 - 0.9^16 = 0.81); with fewer, the rows as weighted."""


def last_directory_rows(ds: Dataset) -> np.ndarray | None:
    """(R,) whether each label row comes from the last directory of `data=[...]` (items' `dataset` column, in
    data= order, or its last category where it is categorical); None where `ds` was read from one directory."""
    if "dataset" not in ds.items:
        return None
    column = ds.items["dataset"]
    names = column.cat.categories if isinstance(column.dtype, pd.CategoricalDtype) else pd.unique(column)
    return (column.to_numpy() == names[-1])[ds.label_item]


def recalibration_weight(ds: Dataset, val_rows: list[np.ndarray]) -> np.ndarray | None:
    """(R,) each label row's weight in the target recalibration. One directory: its `weights=` (as training).
    Several, with NEW_RELEASE_MIN_CONVERSATIONS labelled conversations of the last one among the validation
    rows: the last directory's rows there weigh as much in all as the other directories' together (`weights=`
    still sets the weights within each side, and a row of weight 0 stays out).

    Why: the recalibration is where the new release can correct a judge that reads it differently
    (benchmarks/far_shift.py: a hotter, more lenient judge); with 20 new conversations beside 56 old ones,
    weighted by their count, it barely moved, and the network on the union lost to the linear model there.
    Measured in benchmarks/adapt.py (`network` against `network_one_directory`, k = 20, six draws): far shift
    0.7775 -> 0.7651 RMSE (linear model 0.7762), covariate shift up 0.6396 -> 0.6343, down 0.8516 -> 0.8510,
    new chatbot 0.6851 -> 0.6862; but at k = 10 and 40 the shift down lost (0.8604 -> 0.8783, 0.8815 -> 0.8869,
    four draws). Fitted on the new rows alone it was noisier still where the old rows held."""
    new = last_directory_rows(ds)
    if new is None:
        return ds.label_weight
    t = ds.target_index
    weight = np.ones(len(ds.label_item)) if ds.label_weight is None else ds.label_weight.astype(np.float64)
    rows = np.unique(np.concatenate(val_rows)) if val_rows else np.zeros(0, dtype=np.int64)
    rows = rows[(ds.answers[rows, t] >= 0) & (weight[rows] > 0)]
    new_total, old_total = weight[rows[new[rows]]].sum(), weight[rows[~new[rows]]].sum()
    conversations = np.unique(ds.groups[ds.label_item[rows[new[rows]]]])
    if len(conversations) < NEW_RELEASE_MIN_CONVERSATIONS or not old_total > 0:
        return ds.label_weight
    return np.where(new, weight * (old_total / new_total), weight)


def target_recalibration(
    ds: Dataset, settings: Settings, val_rows: list[np.ndarray], val_logp: list[np.ndarray]
) -> Recalibration | None:
    """The target recalibration of one ensemble from its members' validation rows and target
    log-probabilities there (rows weighted by `recalibration_weight`); None where Settings.recalibrates says no."""
    if not settings.recalibrates(len(val_rows)):
        return None
    t = ds.target_index
    return fit_recalibration(
        val_rows,
        val_logp,
        ds.answers[:, t],
        question=t,
        n_options=int(ds.n_options[t]),
        how=settings.pool,
        prior=settings.recalibrate_prior,
        row_weight=recalibration_weight(ds, val_rows),
    )


def train_ensemble(ds: Dataset, settings: Settings, *, seed: int = 0, progress: bool = False):
    """Train the final ensemble on every label row of `ds`; returns (net, feature spec, plan), with the
    ensemble's target recalibration in plan.recalibration."""
    seeds = [seed * 1000 + e for e in range(settings.ensemble)]
    all_rows = np.arange(len(ds.label_item))
    trained = train_models(ds, [all_rows] * settings.ensemble, seeds, settings, progress=progress)
    net, plan = trained.net, trained.plan
    plan.recalibration = recalibrations(net, trained.X, ds, plan, [list(range(net.n_models))], settings)[0]
    return net, trained.spec, plan
