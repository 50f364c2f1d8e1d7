"""Cross-validating several directories (`cv data=[OLD,NEW]`): folds with every directory in every fold, the
metrics per directory, and which model to deploy, chosen on the last directory (the new release).

A user who adds a few labelled conversations of a new release cares about the new release: a model that
wins over the union's folds (mostly old conversations) can lose where it will be used. On the far-shift
benchmark (benchmarks/far_shift.py) the network won the union and lost the new release to the linear model.
So the deploy line and the report's verdict choose by the out-of-fold rows of the last directory, unless it
has fewer than MIN_DEPLOY_CONVERSATIONS labelled conversations: too few to tell the models apart, then the
union decides, and the line says so. On the last directory's rows they keep the network (the default) unless
another model's RMSE there is lower with its 95% paired bootstrap interval (whole conversations resampled)
below zero: twenty new conversations rarely separate models whose RMSEs differ by less than 0.01, and picking
the lowest point estimate then follows the noise (benchmarks/deploy_choice.py compares the rules).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from calibration.data.splits import group_folds
from calibration.evaluation.cv_predictions import REFERENCE
from calibration.evaluation.metrics import agreement
from calibration.evaluation.significance import bootstrap_counts

MIN_DEPLOY_CONVERSATIONS = 10
"""Labelled conversations of the last directory needed to choose the model by it: two per fold at 5 folds, so
no fold's new rows rest on a single conversation; with fewer, the union decides. How often the choice is
right at 20 new conversations: benchmarks/deploy_choice.py (benchmarks/results/deploy_choice.json)."""


def item_folds(ds, groups: np.ndarray | None, folds: int, fold_seed: int) -> np.ndarray:
    """(N,) cv fold of every item. One directory: `group_folds` of its groups, as always. Several: each
    directory's groups are dealt over the folds on their own (seeded by fold_seed and the directory's
    position), so every fold holds conversations of every directory that has at least `folds` of them."""
    groups = ds.groups if groups is None else groups
    if "dataset" not in ds.items:
        return group_folds(groups, folds, fold_seed)
    release = pd.factorize(ds.items["dataset"], sort=False)[0]
    out = np.empty(len(groups), dtype=np.int64)
    size = np.zeros(folds, dtype=np.int64)  # items per fold so far: small directories fill the emptiest folds
    for r in range(int(release.max()) + 1):
        mine = np.flatnonzero(release == r)
        unique, counts = np.unique(groups[mine], return_counts=True)
        fold_of_group = np.empty(len(unique), dtype=np.int64)
        mine_size = np.zeros(folds, dtype=np.int64)
        for g in np.random.default_rng([fold_seed, r]).permutation(len(unique)):
            f = int(np.lexsort((size, mine_size))[0])  # fewest of this directory, then fewest overall
            fold_of_group[g] = f
            mine_size[f] += counts[g]
            size[f] += counts[g]
        out[mine] = fold_of_group[np.searchsorted(unique, groups[mine])]
    return out


def _dataset_of_rows(frame: pd.DataFrame, labels: list[str]) -> pd.Series:
    """Each prediction row's directory: the `dataset` column, or the prefix of a qualified conversation id
    ("v2/c001", as the report reads cv's file)."""
    if "dataset" in frame:
        return frame["dataset"].astype(str)
    cid = frame["conversation_id"].astype(str)
    out = pd.Series("", index=frame.index)
    for label in labels:
        out[cid.str.startswith(f"{label}/")] = label
    return out


def metrics_by_dataset(frame: pd.DataFrame, labels: list[str]) -> dict[str, dict[str, dict[str, float]]]:
    """{directory: {method: agreement metrics and the labelled conversations}} of cv's predictions frame, for
    the directories `labels` in data= order (empty for one directory); a directory without labels is {}. The
    last directory's methods also get `rmse_vs_network_95`: the 95% paired bootstrap interval of their RMSE
    minus the network's there (`_versus_network`)."""
    if len(labels) < 2:
        return {}
    dataset = _dataset_of_rows(frame, labels)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for label in labels:
        rows = frame[dataset == label]
        conversations = int(rows["conversation_id"].nunique())
        out[label] = {
            m: agreement(r["expected"].to_numpy(float), r["answer"].to_numpy(float)) | {"conversations": conversations}
            for m, r in rows.groupby("method", sort=False)
        }
    last = frame[dataset == labels[-1]]
    for method, interval in _versus_network(last).items():
        out[labels[-1]][method]["rmse_vs_network_95"] = interval
    return out


def _versus_network(rows: pd.DataFrame, n_boot: int = 2000, seed: int = 0) -> dict[str, list[float]]:
    """method -> [low, high] of the 95% paired bootstrap interval (n_boot resamples of whole conversations, the
    same for every method) of its RMSE minus the network's (`calibrated`) on `rows`. cv writes every method's
    rows in the same order; a method whose rows do not line up with the network's (count or answers) is left
    out, as is everything without the network's rows."""
    reference = rows[rows["method"] == REFERENCE]
    if reference.empty:
        return {}
    answers = reference["answer"].to_numpy(float)
    weights = bootstrap_counts(
        reference["conversation_id"].astype(str).to_numpy(),
        len(reference),
        rng=np.random.default_rng(seed),
        n_boot=n_boot,
    )

    def boot_rmse(expected: np.ndarray) -> np.ndarray:
        return np.sqrt(weights @ ((expected - answers) ** 2) / weights.sum(1))

    base = boot_rmse(reference["expected"].to_numpy(float))
    out = {}
    for method, r in rows.groupby("method", sort=False):
        if method == REFERENCE or len(r) != len(reference) or not np.array_equal(r["answer"].to_numpy(float), answers):
            continue
        low, high = np.percentile(boot_rmse(r["expected"].to_numpy(float)) - base, [2.5, 97.5])
        out[method] = [round(float(low), 6), round(float(high), 6)]
    return out


def deploy_basis(by_dataset: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any] | None:
    """What the deploy choice reads: the last directory's rows when it has MIN_DEPLOY_CONVERSATIONS labelled
    conversations, else the union (None for one directory). {"dataset", "conversations", "by_last": bool,
    "note"}."""
    if not by_dataset:
        return None
    last = list(by_dataset)[-1]
    conversations = int(next(iter(by_dataset[last].values()))["conversations"]) if by_dataset[last] else 0
    by_last = conversations >= MIN_DEPLOY_CONVERSATIONS
    if by_last:
        note = (
            f"chosen on the last directory {last!r} ({conversations} labelled conversations, out of fold; the "
            f"network unless another model is significantly better there)"
        )
    else:
        note = (
            f"chosen on every directory: the last one, {last!r}, has {conversations} labelled conversations, "
            f"fewer than the {MIN_DEPLOY_CONVERSATIONS} needed to choose on it alone"
        )
    return {"dataset": last, "conversations": conversations, "by_last": by_last, "note": note}


def deploy_rmse(metrics: dict[str, dict[str, float]], by_dataset: dict, basis: dict | None) -> dict[str, float]:
    """method -> the RMSE the deploy choice compares: the last directory's where `basis` says so, else the
    union's (`metrics`)."""
    chosen = by_dataset[basis["dataset"]] if basis and basis["by_last"] else metrics
    return {m: v["rmse"] for m, v in chosen.items()}


def deploy_candidates(rmse: dict[str, float], by_dataset: dict, basis: dict | None) -> dict[str, float]:
    """The methods of `rmse` (deploy_rmse's) the deploy choice takes the lowest of: where the last directory
    decides and has the network, the network and the methods significantly better than it there (their
    `rmse_vs_network_95` wholly below 0); else all of them."""
    if not basis or not basis["by_last"] or REFERENCE not in by_dataset[basis["dataset"]]:
        return rmse
    last = by_dataset[basis["dataset"]]
    return {
        m: v
        for m, v in rmse.items()
        if m == REFERENCE or (m in last and last[m].get("rmse_vs_network_95", [0.0, 0.0])[1] < 0)
    }


def format_by_dataset(
    by_dataset: dict[str, dict[str, dict[str, float]]], methods=("calibrated", "linear", "ordinal")
) -> str:
    """One line per directory: its labelled conversations and rows, and the RMSE / Pearson of the models
    train ships."""
    lines = []
    for label, per_method in by_dataset.items():
        some = next(iter(per_method.values()))
        scores = ", ".join(
            f"{m} {per_method[m]['rmse']:.4f} / {per_method[m]['pearson']:.4f}" for m in methods if m in per_method
        )
        lines.append(
            f"cv: directory {label!r} ({some['conversations']} conversations, {some['n']} rows): "
            f"RMSE / Pearson {scores}"
        )
    return "\n".join(lines)
