"""The `compare` stage: every scorer (and any other method's scores) on one scale, the paper's way.

    role-rubric compare conversations=FILE labels=turn_designs.csv out=DIR [sizes=[15,50,150]]

For each corpus size n, every role's reference corpus (the distinct references of its turns) is
subsampled to n (seeded; all of them when there are fewer); kNN and the distribution scorers are fitted
on it, then every turn is scored. Pairwise scorers (cosine, BERTScore, NLI) compare each reply with its
own reference and do not depend on n. Metrics per method, size and subset (all violations, then
adherent turns against each violation type alone): AUC, AP, mean score per class, separation
(adherent - violation), and at a cut chosen out of fold (5 folds of conversations, best macro F1 on the
other folds) per-class F1, macro F1 and Cohen's kappa; all with 95% intervals from `n_boot` bootstrap
resamples of conversations (the same resamples for every method).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.compare import metrics as M
from calibration.compare.data import KEY, load_turns, read_extra_scores
from rubric.errors import InputError
from rubric.scorers import SCORERS, EmbeddingStore, ScorerUnavailable, make_scorer


def corpus_sample(turns: pd.DataFrame, size: int, seed: int) -> dict[str, list[str]]:
    """role -> up to `size` distinct references of the role, drawn without replacement (seeded by
    (seed, size), so each size is one fixed condition)."""
    rng = np.random.default_rng([seed, size])
    out = {}
    for role, refs in turns.dropna(subset=["reference"]).groupby("role", sort=True)["reference"]:
        pool = sorted(set(refs))
        pick = rng.choice(len(pool), size=min(size, len(pool)), replace=False)
        out[str(role)] = [pool[i] for i in sorted(pick)]
    return out


def score_methods(
    turns: pd.DataFrame,
    *,
    methods: Sequence[str],
    sizes: Sequence[int],
    params: Mapping[str, Mapping[str, Any]],
    store: EmbeddingStore,
    seed: int = 0,
    log=print,
) -> tuple[pd.DataFrame, dict[str, str], dict[int, dict[str, int]], dict[str, dict[str, Any]]]:
    """Long frame (conversation_id, turn, method, size, score), unavailable methods with the reason,
    the corpus size used per role at each size, and each scorer's parameters."""
    replies, roles = turns["reply"].tolist(), turns["role"].tolist()
    references = turns["reference"].tolist()
    scorers, unavailable = {}, {}
    for name in methods:
        try:
            scorers[name] = make_scorer(name, store=store, **dict(params.get(name) or {}))
        except ScorerUnavailable as exc:
            unavailable[name] = exc.one_line()
            log(f"compare: {name} unavailable: {exc.one_line()}")
    started = time.perf_counter()
    store.sentences(list(dict.fromkeys(replies + [r for r in references if isinstance(r, str)])))
    log(f"compare: embedded {store.encoded} new texts in {time.perf_counter() - started:.1f} s")
    frames, used = [], {}
    fixed: dict[str, np.ndarray] = {}
    for size in sizes:
        corpus = corpus_sample(turns, int(size), seed)
        used[int(size)] = {r[:40]: len(v) for r, v in corpus.items()}
        for name, scorer in scorers.items():
            if scorer.needs_fit:
                scores = scorer.fit(corpus).score_batch(replies, references, roles)
            else:  # pairwise without a corpus: the same scores at every size
                if name not in fixed:
                    fixed[name] = scorer.score_batch(replies, references, roles)
                scores = fixed[name]
            frames.append(turns[KEY].assign(method=name, size=int(size), score=scores))
    settings = {name: scorer.params() for name, scorer in scorers.items()}
    return pd.concat(frames, ignore_index=True), unavailable, used, settings


def metric_rows(
    turns: pd.DataFrame, scores: pd.DataFrame, *, n_boot: int, seed: int, families: Mapping[str, str]
) -> pd.DataFrame:
    """One row per (method, size, subset) with every metric, its interval (_low, _high) and the cuts."""
    groups = pd.factorize(turns["conversation_id"])[0]
    y = turns["adherent"].to_numpy()
    labels = turns["label"].to_numpy()
    W = M.bootstrap_weights(groups, n_boot, seed)
    ones = np.ones((1, len(turns)))
    subsets = {"all": np.ones(len(turns), bool)} | {
        t: (labels == t) | (y == 1) for t in sorted(set(labels) - {"adherent"})
    }
    rows = []
    for (method, size), part in scores.groupby(["method", "size"], sort=False):
        s = part["score"].to_numpy(float)
        pred, cuts = M.cross_fitted_predictions(s, y, groups, seed=seed)
        for subset, mask in subsets.items():
            row = {"method": method, "family": families.get(method, ""), "size": int(size), "subset": subset}
            row |= {
                "n_adherent": int(y[mask].sum()),
                "n_violation": int((1 - y[mask]).sum()),
                "cut": float(np.median(cuts)),
            }
            for w_name, w in (("point", ones), ("boot", W)):
                values = _metrics(s[mask], y[mask], pred[mask], w[:, mask])
                for k, v in values.items():
                    if w_name == "point":
                        row[k] = float(v[0])
                    else:
                        row[f"{k}_low"], row[f"{k}_high"] = M.interval(v)
            rows.append(row)
    return pd.DataFrame(rows)


def _metrics(s: np.ndarray, y: np.ndarray, pred: np.ndarray, W: np.ndarray) -> dict[str, np.ndarray]:
    adh, vio = M.class_means(s, y, W)
    out = {
        "auc": M.auc(s, y, W),
        "ap": M.average_precision(s, y, W),
        "mean_adherent": adh,
        "mean_violation": vio,
    }
    out["separation"] = adh - vio
    return out | M.confusion_metrics(pred, y, W)


def compare(
    conversations: str | Path,
    labels: str | Path,
    *,
    methods: Sequence[str] = tuple(SCORERS),
    sizes: Sequence[int] = (15, 50, 150),
    params: Mapping[str, Mapping[str, Any]] | None = None,
    extra: Mapping[str, str | Path] | None = None,
    extra_options: Mapping[str, Any] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    cache: str | Path | None = None,
    store: EmbeddingStore | None = None,
    log=print,
) -> dict[str, Any]:
    """Run the comparison; returns the compare.json content (plus the per-turn scores frame under
    "_scores", which `role-rubric compare` writes as scores.csv: calibration/commands/compare.py)."""
    started = time.perf_counter()
    unknown = sorted(set(methods) - set(SCORERS))
    if unknown:
        raise InputError(f"unknown method(s) {unknown}.", fix=f"use {', '.join(SCORERS)}.")
    if not sizes or any(int(n) < 1 for n in sizes):
        raise InputError(f"sizes={list(sizes)} is not valid.", fix="give corpus sizes >= 1, e.g. sizes=[15,50,150].")
    turns, report = load_turns(conversations, labels)
    if report["no_reference"] and any(SCORERS[m].kind == "pairwise" for m in methods):
        raise InputError(
            f"{report['no_reference']} labelled turns have no reference reply.",
            path=conversations,
            fix="add `reference` to every turn, or compare distribution methods only (methods=[mahalanobis,...]).",
        )
    store = store or EmbeddingStore(cache=cache)
    scores, unavailable, used, settings = score_methods(
        turns, methods=methods, sizes=sizes, params=params or {}, store=store, seed=seed, log=log
    )
    families = {m: SCORERS[m].kind for m in methods}
    for name, path in (extra or {}).items():
        got = read_extra_scores(path, **dict(extra_options or {}))
        s = turns.set_index(KEY).index.map(got.to_dict())
        missing = int(pd.isna(s).sum())
        if missing:
            raise InputError(
                f"{missing} labelled turns have no {name} score.",
                path=path,
                fix="score every turn of the conversations.",
            )
        families[name] = "given scores"
        for size in sizes:
            scores = pd.concat([scores, turns[KEY].assign(method=name, size=int(size), score=np.asarray(s, float))])
    scored = time.perf_counter() - started
    table = metric_rows(turns, scores, n_boot=n_boot, seed=seed, families=families)
    result = {
        "settings": {
            "sizes": [int(n) for n in sizes],
            "methods": list(methods),
            "extra": {k: str(v) for k, v in (extra or {}).items()},
            "params": settings,
            "n_boot": n_boot,
            "seed": seed,
            "encoder": store.encoder.name,
            "positive_class": "adherent",
            "cut": "per fold of conversations, best macro F1 on the other 4 folds",
        },
        "data": report | {"labelled": len(turns), "by_label": turns["label"].value_counts().sort_index().to_dict()},
        "corpus_used": used,
        "unavailable": unavailable,
        "results": table.to_dict(orient="records"),
        "timing_s": {"scoring": round(scored, 2), "total": round(time.perf_counter() - started, 2)},
        "_scores": scores.merge(turns[[*KEY, "label"]], on=KEY),
    }
    return result
