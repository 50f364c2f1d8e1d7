"""A new release far from the old one, and how far each shift benchmark's new side lies from its old side.

`far_shift`: the bundled role-adherence benchmark, its conversations split at random (within each chatbot
role) into an old and a new release of equal size; on the new release the judge answers with another
prompt style: every distribution is flattened (temperature TEMPERATURE > 1, as a judge sampled hotter) and
tilted towards the higher options (TILT per option step, as a judge prompted to be lenient). The humans'
labels are untouched: they still follow from the conversations, only the judge reads them differently.

`separability`: for each fold of a benchmark (its new side against everything else), the cross-validated
AUC of a logistic classifier telling a conversation's release from the judge's features (the mean over the
conversation's turns of every question's distribution, and the coverage where recorded). 0.5: the new
release looks like the old one; 1: every conversation gives away its release.

    python benchmarks/far_shift.py [--work DIR]   # the separability of every shift benchmark, as JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import numpy as np

TEMPERATURE = 2.5
TILT = 0.5
SPLIT_SEED = 0


def new_release_conversations(ds, seed: int = SPLIT_SEED) -> np.ndarray:
    """(C,) bool: which conversations (ds.groups codes) form the new release: half of each role's, at random."""
    first_item = np.unique(ds.groups, return_index=True)[1]
    conv_ids = ds.items["conversation_id"].to_numpy()[first_item]
    role = np.array([cid.rsplit("-", 1)[0] for cid in conv_ids])
    rng = np.random.default_rng(seed)
    new = np.zeros(len(conv_ids), bool)
    for r in np.unique(role):
        mine = rng.permutation(np.flatnonzero(role == r))
        new[mine[: len(mine) // 2]] = True
    return new


def restyled(
    probs: np.ndarray, present: np.ndarray, n_options: np.ndarray, temperature: float = TEMPERATURE, tilt: float = TILT
) -> np.ndarray:
    """(n, Q, K) the distributions as the restyled judge gives them: p^(1/T) * exp(tilt * option index),
    renormalised over each question's own options (padding and missing questions stay zero)."""
    k = probs.shape[-1]
    valid = (np.arange(k)[None, :] < n_options[:, None])[None] & present[..., None]  # (n, Q, K)
    logp = np.log(np.clip(probs, 1e-12, None)) / temperature + tilt * np.arange(k)
    logp = np.where(valid, logp, -np.inf)
    logp -= logp.max(-1, keepdims=True).clip(-1e30)
    out = np.where(valid, np.exp(logp), 0.0)
    total = out.sum(-1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1), 0.0).astype(probs.dtype)


def far_shift_dataset(ds, temperature: float = TEMPERATURE, tilt: float = TILT, seed: int = SPLIT_SEED):
    """(ds with the new release's items restyled, (N,) bool: the item belongs to the new release)."""
    new_item = new_release_conversations(ds, seed)[ds.groups]
    probs = ds.probs.copy()
    probs[new_item] = restyled(ds.probs[new_item], ds.present[new_item], ds.n_options, temperature, tilt)
    return dataclasses.replace(ds, probs=probs), new_item


def conversation_features(ds) -> np.ndarray:
    """(C, F) the mean over each conversation's items of the judge's distributions (and coverage)."""
    parts = [ds.probs.reshape(len(ds.probs), -1)]
    if ds.coverage is not None:
        parts.append(ds.coverage)
    x = np.concatenate(parts, axis=1).astype(np.float64)
    counts = np.bincount(ds.groups)
    return np.stack([np.bincount(ds.groups, x[:, j]) / counts for j in range(x.shape[1])], axis=1)


def release_auc(x: np.ndarray, is_new: np.ndarray, seed: int = 0) -> float | None:
    """Cross-validated (5 folds, stratified) AUC of a standardised logistic classifier of is_new from x."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    n_minor = int(min(is_new.sum(), (~is_new).sum()))
    if n_minor < 2:
        return None
    cv = StratifiedKFold(min(5, n_minor), shuffle=True, random_state=seed)
    model = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    score = cross_val_predict(model, x, is_new, cv=cv, method="predict_proba")[:, 1]
    return round(float(roc_auc_score(is_new, score)), 4)


def separability(ds, fold_of_row: np.ndarray, folds: int) -> dict:
    """Per fold of a benchmark, the AUC of telling its new conversations (the fold's test rows) from the
    others; None where every conversation is on both sides (new judges on the same conversations)."""
    x = conversation_features(ds)
    conv_of_row = ds.groups[ds.label_item]
    n_conv = int(ds.groups.max()) + 1
    labelled = np.zeros(n_conv, bool)
    labelled[conv_of_row] = True
    per_fold = []
    for f in range(folds):
        new = np.zeros(n_conv, bool)
        new[conv_of_row[fold_of_row == f]] = True
        old = np.zeros(n_conv, bool)
        old[conv_of_row[fold_of_row != f]] = True
        if (new & old).any():
            per_fold.append(None)
            continue
        keep = labelled
        per_fold.append(release_auc(x[keep], new[keep]))
    scored = [a for a in per_fold if a is not None]
    return {"auc_per_fold": per_fold, "auc_mean": round(float(np.mean(scored)), 4) if scored else None}


def main() -> None:
    from _results import add_results_argument, emit
    from shift import ROOT, dataset_for, folds_of

    parser = argparse.ArgumentParser(description="How separable each shift benchmark's old and new sides are.")
    parser.add_argument("--anchors", type=Path, default=ROOT.parent / "shared" / "anchors" / "llm_rubric_synth")
    parser.add_argument("--work", type=Path, default=None, help="where imported/gathered data is cached")
    add_results_argument(parser, "separability")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="role-rubric-far-"))
    out = {
        "far_shift_restyle": {"temperature": TEMPERATURE, "tilt": TILT, "split_seed": SPLIT_SEED},
        "classifier": "logistic regression (C=1, standardised) on each conversation's mean judge distributions "
        "and coverage; 5-fold stratified cv AUC",
    }
    for name in ("covariate_shift_down", "covariate_shift_up", "new_judges", "new_chatbot", "far_shift"):
        ds = dataset_for(name, args.anchors, work)
        out[name] = separability(ds, *folds_of(ds, name))
    emit(args.results_name, out, indent=1)


if __name__ == "__main__":
    main()
