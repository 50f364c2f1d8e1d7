"""The seed ensemble: its members' predictions, pooled, and the target recalibration fitted on their
validation rows; `train_ensemble` trains the final ensemble on every label.

Pooling and the recalibration map themselves are in calibration/model/recalibrate.py.
"""

from __future__ import annotations

import numpy as np
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


def ensemble_proba(net, X: torch.Tensor, item: np.ndarray, judge: np.ndarray, *, pool: str = "geometric",
                   recalibration: Recalibration | None = None) -> np.ndarray:
    """(B, Q, K) distributions of one seed ensemble (every model of `net`), pooled (`calibration.model.recalibrate`)
    and, given its recalibration, with the target question recalibrated."""
    members = member_logproba(net, X, [item] * net.n_models, [judge] * net.n_models)
    probs = recalibrate.pool(np.stack(members), pool)
    return probs if recalibration is None else recalibration.apply(probs)


def recalibrations(net: CalibrationNet, X: torch.Tensor, ds: Dataset, plan: Plan, ensembles: list[list[int]],
                   settings: Settings) -> list[Recalibration | None]:
    """The target recalibration of each ensemble (a list of model indices of `net`), fitted on its
    members' validation rows (calibration/model/recalibrate.py); None where Settings.recalibrates says no."""
    if not any(settings.recalibrates(len(members)) for members in ensembles):
        return [None] * len(ensembles)
    t = ds.target_index
    val_logp = member_logproba(net, X, [ds.label_item[v] for v in plan.val_rows],
                               [ds.label_judge[v] for v in plan.val_rows])
    return [target_recalibration(ds, settings, [plan.val_rows[m] for m in members],
                                 [val_logp[m][:, t] for m in members]) for members in ensembles]


def target_recalibration(ds: Dataset, settings: Settings, val_rows: list[np.ndarray],
                         val_logp: list[np.ndarray]) -> Recalibration | None:
    """The target recalibration of one ensemble from its members' validation rows and target
    log-probabilities there; None where Settings.recalibrates says no."""
    if not settings.recalibrates(len(val_rows)):
        return None
    t = ds.target_index
    return fit_recalibration(val_rows, val_logp, ds.answers[:, t], question=t, n_options=int(ds.n_options[t]),
                             how=settings.pool, prior=settings.recalibrate_prior, row_weight=ds.label_weight)


def train_ensemble(ds: Dataset, settings: Settings, *, seed: int = 0, progress: bool = False):
    """Train the final ensemble on every label row of `ds`; returns (net, feature spec, plan), with the
    ensemble's target recalibration in plan.recalibration."""
    seeds = [seed * 1000 + e for e in range(settings.ensemble)]
    all_rows = np.arange(len(ds.label_item))
    trained = train_models(ds, [all_rows] * settings.ensemble, seeds, settings, progress=progress)
    net, plan = trained.net, trained.plan
    plan.recalibration = recalibrations(net, trained.X, ds, plan, [list(range(net.n_models))], settings)[0]
    return net, trained.spec, plan
