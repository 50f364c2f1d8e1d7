"""Out-of-fold target distributions of the network: every (fold, member) model trains in one batch, then
each fold's members are pooled and recalibrated on their own validation rows (never the fold's test rows).

Used by cross-validation (calibration/evaluation/crossval.py) and the search's inner folds (search.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from calibration.data.dataset import Dataset
from calibration.model.ensemble import member_logproba, target_recalibration
from calibration.model.network import CalibrationNet
from calibration.model.recalibrate import pool
from calibration.model.settings import Settings
from calibration.model.train import Plan, train_models


def oof_network(
    ds: Dataset,
    settings: Settings,
    fold_of_row: np.ndarray,
    folds: int,
    seed: int,
    *,
    first_member: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """(R, K) out-of-fold target distributions: models for every (fold, member) train at once; the members
    of a fold are pooled and recalibrated on their own validation rows (`pool_members`)."""
    part = oof_members(ds, settings, fold_of_row, folds, seed, first_member=first_member, progress=progress)
    return pool_members(ds, settings, fold_of_row, [part])


@dataclass
class Members:
    """Trained (fold, member) models' target log-probabilities on their fold's test rows and on their own
    validation rows."""

    fold: list[int]
    test_logp: list[np.ndarray]  # per model, (rows of its fold, K)
    val_rows: list[np.ndarray]
    val_logp: list[np.ndarray]  # per model, (len(val_rows), K)
    net: CalibrationNet | None = None
    """The trained models themselves, for callers that predict other items with them (the demo's per-turn
    adherence, calibration/evaluation/adherence.py) instead of training the same models again."""
    plan: Plan | None = None


def oof_members(
    ds: Dataset,
    settings: Settings,
    fold_of_row: np.ndarray,
    folds: int,
    seed: int,
    *,
    first_member: int = 0,
    progress: bool = False,
) -> Members:
    """Train `settings.ensemble` members for every fold as one batched computation. Members are numbered
    from `first_member`, so an ensemble can be grown in steps (search's pruning rungs) with the same
    members a single call would train."""
    t = ds.target_index
    members = [(f, e) for f in range(folds) for e in range(first_member, first_member + settings.ensemble)]
    seeds = [seed * 100_000 + f * 100 + e for f, e in members]
    train_rows = [np.flatnonzero(fold_of_row != f) for f, _ in members]
    trained = train_models(ds, train_rows, seeds, settings, progress=progress)
    net, X, plan = trained.net, trained.X, trained.plan
    test_rows = [np.flatnonzero(fold_of_row == f) for f, _ in members]
    test_logp, val_logp = (
        [
            lp[:, t]
            for lp in member_logproba(net, X, [ds.label_item[r] for r in rows], [ds.label_judge[r] for r in rows])
        ]
        for rows in (test_rows, plan.val_rows)
    )
    return Members([f for f, _ in members], test_logp, plan.val_rows, val_logp, net, plan)


def pool_members(ds: Dataset, settings: Settings, fold_of_row: np.ndarray, parts: list[Members]) -> np.ndarray:
    """(R, K) out-of-fold target distributions: per fold, its members (from every part) pooled, then
    recalibrated with a map fitted on their validation rows (calibration/model/recalibrate.py)."""
    out = np.zeros((len(fold_of_row), int(ds.n_options.max())))
    fold = [f for part in parts for f in part.fold]
    test_logp = [lp for part in parts for lp in part.test_logp]
    val_rows = [r for part in parts for r in part.val_rows]
    val_logp = [lp for part in parts for lp in part.val_logp]
    for f in sorted(set(fold)):
        mine = [m for m, g in enumerate(fold) if g == f]
        probs = pool(np.stack([test_logp[m] for m in mine]), settings.pool)
        recal = target_recalibration(ds, settings, [val_rows[m] for m in mine], [val_logp[m] for m in mine])
        if recal is not None:
            probs = recal.apply_target(probs)
        out[fold_of_row == f] = probs
    return out
