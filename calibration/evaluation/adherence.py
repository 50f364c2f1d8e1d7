"""Per-turn adherence P(target >= adheres_at), out of fold, and how well it separates adherent turns from
each violation type (AUC) and roles: the demo's analysis of the role-adherence benchmark.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.data.splits import group_folds
from calibration.evaluation.out_of_fold import Members
from calibration.model.ensemble import member_logproba, recalibrations
from calibration.model.recalibrate import pool
from calibration.model.train import model_inputs, train_models


def item_adherence(predictions: pd.DataFrame, method: str, *, adheres_at: float = 3.0) -> pd.DataFrame:
    """Per item (conversation_id, turn): the mean over its labelled judges of P(answer >= adheres_at) under
    `method`'s out-of-fold distributions, and the human adherence rate (share of answers >= adheres_at)."""
    rows = predictions[predictions["method"] == method]
    columns = [c for c in rows.columns if c.startswith("p_") and float(c[2:]) >= adheres_at]
    frame = rows.assign(adherence=rows[columns].sum(axis=1), human=(rows["answer"] >= adheres_at).astype(float))
    return frame.groupby(["conversation_id", "turn"], as_index=False)[["adherence", "human"]].mean()


def oof_item_adherence(
    ds: Any,
    settings: Any,
    *,
    folds: int = 5,
    seed: int = 0,
    fold_seed: int = 0,
    adheres_at: float = 3.0,
    judges: str = "all",
    trained: Members | None = None,
) -> pd.DataFrame:
    """Out-of-fold per-item adherence P(target >= adheres_at) of the calibrated model, judge-independent.

    Same folds and members as `cross_validate`; each held-out item is predicted for every training judge
    and the distributions averaged (judges="all", what RoleAdherence does by default) or by the population
    model (judges="population"). Also returns the raw judge's P(target >= adheres_at) ("raw").
    trained: the calibrated models `cross_validate` trained on the same folds, seed and settings
    (`CVResult.members`): used instead of training them again.
    """
    t = ds.target_index
    fold_of_item = group_folds(ds.groups, folds, fold_seed)
    fold_of_row = fold_of_item[ds.label_item]
    members = [(f, e) for f in range(folds) for e in range(settings.ensemble)]
    seeds = [seed * 100_000 + f * 100 + e for f, e in members]
    if trained is not None and trained.net is not None and trained.plan is not None:
        if trained.plan.seeds != seeds or trained.fold != [f for f, _ in members]:
            raise ValueError("trained: models of other folds, seeds or ensemble size than these.")
        net, plan = trained.net, trained.plan
        _, X, _ = model_inputs(ds, settings)
    else:
        fresh = train_models(ds, [np.flatnonzero(fold_of_row != f) for f, _ in members], seeds, settings)
        net, plan, X = fresh.net, fresh.plan, fresh.X
    recal = recalibrations(
        net, X, ds, plan, [[m for m, (g, _) in enumerate(members) if g == f] for f in range(folds)], settings
    )
    panel = np.arange(len(ds.judges)) if judges == "all" and settings.personalised else np.array([-1])
    above = ds.option_values()[t] >= adheres_at
    above[int(ds.n_options[t]) :] = False
    score = np.zeros(len(ds.items))
    for f in range(folds):
        held = np.flatnonzero(fold_of_item == f)
        items = np.tile(held, len(panel))
        who = np.repeat(panel, len(held))
        mine = [m for m, (g, _) in enumerate(members) if g == f]
        per_member = member_logproba(
            net,
            X,
            [items if m in mine else items[:0] for m in range(len(members))],
            [who if m in mine else who[:0] for m in range(len(members))],
        )
        p = pool(np.stack([per_member[m][:, t] for m in mine]), settings.pool)  # (len(panel) * len(held), K)
        if (fold_recal := recal[f]) is not None:
            p = fold_recal.apply_target(p)
        score[held] = p[:, above].sum(axis=1).reshape(len(panel), len(held)).mean(axis=0)
    raw = ds.probs[:, t][:, above].sum(axis=1)
    return ds.items.assign(adherence=score, raw=raw)


def auc(positive: np.ndarray, negative: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counting one half (the Mann-Whitney AUC)."""
    pos, neg = np.asarray(positive, float), np.asarray(negative, float)
    if len(pos) == 0 or len(neg) == 0:
        return math.nan
    diff = pos[:, None] - neg[None, :]
    return float((diff > 0).mean() + 0.5 * (diff == 0).mean())


def violation_aucs(scores: pd.DataFrame, designs: pd.DataFrame, column: str = "adherence") -> dict[str, dict]:
    """AUC of `column` for telling adherent turns from each violation type (design in turn_designs.csv).

    scores: per item (conversation_id, turn, column); designs: conversation_id, turn, design.
    Returns {violation type: {"auc", "n_adherent", "n_violation"}}, plus "all violations".
    """
    merged = scores.merge(
        designs[["conversation_id", "turn", "design"]].astype({"turn": str}),
        on=["conversation_id", "turn"],
        how="inner",
    )
    adherent = merged.loc[merged["design"] == "adherent", column].to_numpy()
    out = {}
    kinds = sorted(d for d in merged["design"].unique() if d != "adherent")
    for kind in [*kinds, "all violations"]:
        bad = merged.loc[
            merged["design"] != "adherent" if kind == "all violations" else merged["design"] == kind, column
        ].to_numpy()
        out[kind] = {"auc": auc(adherent, bad), "n_adherent": len(adherent), "n_violation": len(bad)}
    return out


def per_role(
    items: pd.DataFrame,
    designs: pd.DataFrame | None,
    conversations: Path,
    columns: tuple[str, ...] = ("human", "calibrated", "raw judge"),
) -> pd.DataFrame:
    """Mean of each score column per role (items: conversation_id, turn and the columns), with turn counts."""
    merged = items.merge(_roles(designs, conversations), on="conversation_id", how="left")
    merged["role"] = merged["role"].fillna("(unknown)")
    grouped = merged.groupby("role")
    return pd.concat([grouped.size().rename("turns"), grouped[list(columns)].mean()], axis=1).reset_index()


def _roles(designs: pd.DataFrame | None, conversations: Path) -> pd.DataFrame:
    if designs is not None and "role" in designs.columns:
        return designs[["conversation_id", "role"]].drop_duplicates("conversation_id")
    rows = []
    with conversations.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rec = json.loads(line)
                rows.append((str(rec.get("conversation_id")), rec.get("role") or rec.get("chatbot_role", "")[:30]))
    return pd.DataFrame(rows, columns=["conversation_id", "role"])
