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
from calibration.evaluation.cv_predictions import KEYS, REFERENCE, TRAINABLE, best_trainable
from calibration.evaluation.metrics import agreement
from calibration.evaluation.significance import bootstrap_counts

PREVIOUS = "previous"
"""cv's method (several directories) for the network trained without the last directory, scored on that
directory's rows: the model a team has before it adapts, which every adapted model must beat there."""

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


def metrics_by_dataset(
    frame: pd.DataFrame, labels: list[str], previous: pd.DataFrame | None = None
) -> dict[str, dict[str, dict[str, Any]]]:
    """{directory: {method: agreement metrics and the labelled conversations}} of cv's predictions frame, for
    the directories `labels` in data= order (empty for one directory); a directory without labels is {}. The
    last directory's methods also get `rmse_vs_network_95` and `rmse_vs_previous_95`: the 95% paired bootstrap
    intervals of their RMSE minus the network's and minus PREVIOUS's there (`_versus`). previous: the last directory's rows predicted by the
    network trained without it (`crossval.previous_predictions`), scored there as method PREVIOUS."""
    if len(labels) < 2:
        return {}
    if previous is not None and not previous.empty:
        frame = pd.concat([frame, previous], ignore_index=True)
    dataset = _dataset_of_rows(frame, labels)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label in labels:
        rows = frame[dataset == label]
        conversations = int(rows["conversation_id"].nunique())
        out[label] = {
            m: agreement(r["expected"].to_numpy(float), r["answer"].to_numpy(float)) | {"conversations": conversations}
            for m, r in rows.groupby("method", sort=False)
        }
    last = frame[dataset == labels[-1]]
    for reference, key in ((REFERENCE, "rmse_vs_network"), (PREVIOUS, "rmse_vs_previous")):
        for method, (interval, share) in _versus(last, reference).items():
            out[labels[-1]][method][f"{key}_95"] = interval
            if reference == PREVIOUS:
                out[labels[-1]][method]["share_worse_than_previous"] = share
    return out


def _versus(
    rows: pd.DataFrame, method_of_reference: str, n_boot: int = 2000, seed: int = 0
) -> dict[str, tuple[list[float], float]]:
    """method -> ([low, high] of the 95% paired bootstrap interval (n_boot resamples of whole conversations,
    the same for every method) of its RMSE minus the reference method's (the network, `calibrated`, or
    PREVIOUS) on `rows`, the share of resamples where it is above 0). Rows are paired by (conversation, turn,
    judge), not by position (a file sorted in a spreadsheet pairs the same); a method without exactly the
    reference's rows and answers is left out, as is everything without the reference's rows."""
    reference = rows[rows["method"] == method_of_reference]
    if reference.empty:
        return {}
    keys = pd.MultiIndex.from_frame(reference[KEYS].astype(str))
    answers = reference["answer"].to_numpy(float)
    weights = bootstrap_counts(  # each row's weight follows its conversation alone: any row order draws alike
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
        own = pd.MultiIndex.from_frame(r[KEYS].astype(str))
        if method == method_of_reference or len(r) != len(reference) or own.has_duplicates:
            continue
        at = own.get_indexer(keys)  # each reference row's position in this method's rows
        if (at < 0).any() or not np.array_equal(r["answer"].to_numpy(float)[at], answers):
            continue
        r = r.iloc[at]
        diff = boot_rmse(r["expected"].to_numpy(float)) - base
        low, high = np.percentile(diff, [2.5, 97.5])
        out[method] = ([round(float(low), 6), round(float(high), 6)], round(float(np.mean(diff > 0)), 4))
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
    if by_last and PREVIOUS in by_dataset[last]:
        note = (
            f"chosen on the last directory {last!r} ({conversations} labelled conversations, out of fold; the "
            f"network unless it loses there to the network trained without {last!r})"
        )
    elif by_last:  # a cv folder of an earlier version: no model trained without the last directory
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
        if PREVIOUS in per_method:
            before = per_method[PREVIOUS]
            scores += f"; the network trained without it {before['rmse']:.4f} / {before['pearson']:.4f}"
        lines.append(
            f"cv: directory {label!r} ({some['conversations']} conversations, {some['n']} rows): "
            f"RMSE / Pearson {scores}"
        )
    return "\n".join(lines)


def deploy_choice(
    metrics: dict[str, dict[str, float]], by_dataset: dict, data: Any, target: str | None = None, weights: Any = None
) -> dict[str, Any] | None:
    """The model to deploy and the command that trains it (`best_trainable`'s dict, with "basis": which rows
    chose, and "why": the reason in words where adapting was weighed against not adapting), or None.

    One directory, or a last directory with fewer than MIN_DEPLOY_CONVERSATIONS labelled conversations: the
    lowest out-of-fold RMSE (over every row). Otherwise, on the last directory's rows: the network, unless it
    loses there to the network trained without that directory (PREVIOUS, which cv scores there): then the
    linear model, or PREVIOUS itself (`_guarded`). A cv folder of an earlier version, without PREVIOUS: the
    network unless another model is significantly better there (`deploy_candidates`)."""
    basis = deploy_basis(by_dataset)
    rmse = deploy_rmse(metrics, by_dataset, basis)
    last = by_dataset[basis["dataset"]] if basis is not None and basis["by_last"] else {}
    guarded = PREVIOUS in last and REFERENCE in last
    best = best_trainable(
        {REFERENCE: rmse[REFERENCE]} if guarded else deploy_candidates(rmse, by_dataset, basis), data, target, weights
    )
    if best is None:
        return None
    best |= {"basis": basis["note"] if basis else None, "why": None}
    if guarded and basis is not None:  # guarded: the basis chose the last directory
        return _guarded(best, basis["dataset"], last, data, target, weights)
    return best


LOSES_TO_PREVIOUS = 2 / 3
"""The share of paired bootstrap resamples (whole conversations of the last directory) in which an adapted
model's RMSE there is above the model's trained without it, from which the deploy guard (`_guarded`) no
longer ships it: "worse in two resamples of three". The point estimate alone (a share of one half) fires on
noise, and 95% significance never fires with 20 conversations. benchmarks/deploy_choice.py, ten shift
benchmarks, no adaptation counted among the candidates: mean regret 0.0041 at 20 new conversations and
0.0025 at 40 (worst 0.035 and 0.026), against 0.0053 and 0.0031 (worst 0.048 and 0.047) for the rule before
(the network unless another model is significantly better) and 0.0032 and 0.0031 (worst 0.020 and 0.047) for
always the network, which no release unlike the benchmarks' would stop."""


def _guarded(best: dict, name: str, last: dict, data: Any, target: str | None, weights: Any) -> dict:
    """`best` (the network), unless it loses to the model trained without the last directory (PREVIOUS) on
    that directory's rows in LOSES_TO_PREVIOUS of the paired resamples; then the linear model, the least
    flexible adapted model, unless it is significantly worse than PREVIOUS there (its paired 95% interval
    wholly above 0): then PREVIOUS, the model trained without the last directory.

    Why: where the new release is unlike the old one, the network trained on both can fit the few new
    conversations' noise and predict them worse than the model that never saw them, and twenty conversations
    rarely make that loss significant (issue 52's real release: 0.792 against 0.784 RMSE, the linear model on
    both 0.774). A flexible model that does not beat the old one out of fold on the new rows shows no evidence
    that its freedom helps there; the linear model adapts too, at far less risk of fitting noise. Keeping the
    old model only on clear evidence matters as much: out of fold on 20 conversations it often looks better
    than adapting where adapting helps. Nor does the network give way to a model merely significantly
    better on the new rows (the rule before): out of fold on 20 conversations that significance misled by up
    to 0.047 RMSE. The rule against the others, on every shift benchmark: benchmarks/deploy_choice.py
    (benchmarks/results/deploy_choice.json)."""
    if PREVIOUS not in last or best["method"] not in last:
        return best
    before, mine = last[PREVIOUS]["rmse"], last[best["method"]]["rmse"]
    shown = TRAINABLE[best["method"]]
    share = last[best["method"]].get("share_worse_than_previous", 0.0)
    if share < LOSES_TO_PREVIOUS:
        best["why"] = (
            f"{shown} {mine:.4f} against {before:.4f} for the model trained without {name!r} on its rows, worse in "
            f"{share:.0%} of resamples{_interval(last, best['method'])}"
        )
        return best
    lost = (
        f"{shown} {mine:.4f} loses to the model trained without {name!r} ({before:.4f}) on its rows in {share:.0%} "
        f"of resamples"
    )
    linear = last.get("linear")
    if linear is not None and not linear.get("rmse_vs_previous_95", [0.0, 0.0])[0] > 0:
        shipped = best_trainable({"linear": linear["rmse"]}, data, target, weights)  # None: its RMSE not finite
        if shipped is not None:
            shipped["basis"] = best["basis"]
            shipped["why"] = (
                f"{lost}: shipping the linear model ({linear['rmse']:.4f}), the least flexible adapted model, the "
                f"safer under shift{_interval(last, 'linear')}"
            )
            return shipped
    pick = previous_model(before, data, target, weights) | {"basis": best["basis"]}
    pick["why"] = (
        f"{lost}, and the linear model is significantly worse than it there{_interval(last, 'linear')}: "
        f"keeping the model without it until more labels show a gain"
    )
    return pick


def _interval(last: dict, method: str) -> str:
    """ "; METHOD minus the model without it: [low, high] (95%, paired)" from the last directory's metrics."""
    if "rmse_vs_previous_95" not in last.get(method, {}):
        return ""
    low, high = last[method]["rmse_vs_previous_95"]
    return f"; {TRAINABLE.get(method, method)} minus the model without it: [{low:+.4f}, {high:+.4f}] (95%, paired)"


def previous_model(rmse: float, data: Any, target: str | None, weights: Any) -> dict[str, Any]:
    """The deploy choice's dict for the network trained without the last directory of `data` (a list of
    several), with the `role-rubric train` command that trains it."""
    from rubric.config.command_line import override

    kept = list(data)[:-1]
    where = override("data", kept[0] if len(kept) == 1 else kept)
    if weights is not None:
        where += f" weights=[{','.join(f'{float(w):g}' for w in list(weights)[:-1])}]"
    option = f" {override('target', target)}" if target else ""
    return {
        "method": PREVIOUS,
        "model": "network",
        "rmse": float(rmse),
        "command": f"role-rubric train {where}{option} out=MODEL_DIR",
    }
