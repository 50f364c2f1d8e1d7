"""The report's sections that retrain the model: ablations, every question as the target, learning curve.

Each is a `prepare_*` that cross-validates variants of the calibrated model (through
`calibration.report.pool.run_cvs`, so an executor can run them in parallel) and scores them, and a
`plot_*(frame, ax=None) -> (fig, ax)` that draws the result. Ablations (the paper's Table 2) drop
pretraining, fine-tuning, personalisation or one input question and are tested against the full model
with a paired permutation test; "every question as the target" (Table 3) compares the raw LLM's expected
answer with the calibrated model for each rubric question; the learning curve (Appendix J) trains on a
random fraction of the judgments, repeated with different seeds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from calibration.evaluation.cv_predictions import KEYS, METHOD_LABELS, REFERENCE, check_aligned, method_rows
from calibration.evaluation.significance import (
    METRICS,
    bootstrap_agreement,
    permutation_test,
    point_agreement,
)
from calibration.report.pool import run_cvs
from calibration.report.tables import figure_panels


def _scored(rows: pd.DataFrame, *, seed: int, n_boot: int) -> dict[str, float]:
    """Metrics of one method's rows with CIs, flattened: rmse, rmse_low, rmse_high, pearson, ..."""
    ci = bootstrap_agreement(
        rows["expected"].to_numpy(float),
        rows["answer"].to_numpy(float),
        rng=np.random.default_rng(seed),
        groups=rows["conversation_id"].astype(str).to_numpy(),
        n_boot=n_boot,
    )
    out: dict[str, float] = {}
    for metric in METRICS:
        out |= {
            metric: ci[metric]["value"],
            f"{metric}_low": ci[metric]["low"],
            f"{metric}_high": ci[metric]["high"],
        }
    return out


# ----------------------------------------------------------------------------- ablations (Table 2)


def ablation_variants(settings: Any, questions: Sequence[str], target: str) -> list[tuple[str, Any]]:
    """(name, settings) of every ablation: the paper's Table 2 plus one variant per non-target question."""
    replace = dataclasses.replace
    variants = [
        ("no pretraining", settings.without_pretraining()),
        ("no fine-tuning", replace(settings, finetune_steps=0)),
        ("no personalisation", replace(settings, personalised=False)),
    ]
    kept = [q for q in questions if q != target and q not in settings.drop_questions]
    variants += [(f"without {q}", replace(settings, drop_questions=(*settings.drop_questions, q))) for q in kept]
    return variants


def prepare_ablations(
    ds: Any,
    settings: Any,
    full: pd.DataFrame,
    *,
    folds: int = 5,
    fold_seed: int = 0,
    seed: int = 0,
    n_boot: int = 1000,
    n_perm: int = 1000,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Cross-validated metrics of the full model and each ablation, with CIs and a swap test against the
    full model's predictions `full` (its calibrated rows, same folds and seed). `executor`, `threads`:
    see `run_cvs`.

    Returns one row per variant: variant, rmse, rmse_low, rmse_high, ..., p_rmse, p_pearson.
    """
    full = method_rows(full, REFERENCE)
    records = [
        {
            "variant": "full model",
            **_scored(full, seed=seed, n_boot=n_boot),
            "p_rmse": math.nan,
            "p_pearson": math.nan,
        }
    ]
    variants = ablation_variants(settings, ds.rubric.ids, ds.rubric.target)
    jobs = [(f"ablation {name}", ds, variant, seed) for name, variant in variants]
    all_rows = run_cvs(jobs, folds=folds, fold_seed=fold_seed, executor=executor, threads=threads, progress=progress)
    for i, ((name, _), rows) in enumerate(zip(variants, all_rows, strict=True)):
        check_aligned(full, rows, f"ablation {name!r} and the full model")
        test = permutation_test(
            rows["expected"].to_numpy(float),
            full["expected"].to_numpy(float),
            full["answer"].to_numpy(float),
            rng=np.random.default_rng([seed, i]),
            groups=full["conversation_id"].astype(str).to_numpy(),
            n_perm=n_perm,
        )
        records.append(
            {
                "variant": name,
                **_scored(rows, seed=seed, n_boot=n_boot),
                "p_rmse": test["rmse"]["p_value"],
                "p_pearson": test["pearson"]["p_value"],
            }
        )
    return pd.DataFrame.from_records(records)


def _interval_panels(
    frame: pd.DataFrame,
    label: str,
    ax: Any,
    metrics: Sequence[str] = ("rmse", "pearson"),
    reference: str | None = None,
) -> tuple[Figure, Any]:
    names = frame[label].tolist()
    axes, fig = figure_panels(ax, len(metrics), figsize=(3.4 * len(metrics), 0.32 * len(names) + 1.2))
    y = np.arange(len(names))[::-1]
    for a, metric in zip(axes, metrics, strict=True):
        v, lo, hi = (frame[c].to_numpy(float) for c in (metric, f"{metric}_low", f"{metric}_high"))
        a.errorbar(v, y, xerr=[v - lo, hi - v], fmt="o", color="#4c72b0", capsize=2, ms=4)
        if reference is not None:
            a.axvline(float(frame.loc[frame[label] == reference, metric].iloc[0]), color="#c44e52", lw=0.8, ls=":")
        a.set_yticks(y, names if a is axes[0] else [""] * len(names), fontsize=7)
        a.set_title(metric, fontsize=9)
        a.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    return fig, axes


def plot_ablations(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """RMSE and Pearson of every ablation with 95% intervals; the dotted line is the full model."""
    return _interval_panels(frame, "variant", ax, reference="full model")


# ----------------------------------------------------------------------------- every question as target (Table 3)


def expected_llm_rows(ds: Any) -> pd.DataFrame:
    """The raw LLM's expected answer to `ds`'s target for every labelled (item, judge) row."""
    t = ds.target_index
    k = int(ds.n_options[t])
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    values = ds.option_values()[t, :k]
    keys = ds.items.iloc[ds.label_item[rows]].reset_index(drop=True)
    return (
        keys.assign(
            judge_id=[ds.judges[j] for j in ds.label_judge[rows]],
            method="expected_llm",
            expected=ds.probs[ds.label_item[rows], t, :k].astype(float) @ values,
            answer=values[ds.answers[rows, t]],
        )
        .sort_values(KEYS, kind="stable")
        .reset_index(drop=True)
    )


def prepare_targets(
    data: str | Path | Any,
    settings: Any,
    *,
    questions: Sequence[str] | None = None,
    reuse: dict[str, pd.DataFrame] | None = None,
    folds: int = 5,
    fold_seed: int = 0,
    seed: int = 0,
    n_boot: int = 1000,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Each question as the training target in turn: expected-LLM against the calibrated model (CV).
    data: a dataset directory, or a Dataset already read.

    `reuse` maps a question to calibrated predictions already computed (e.g. the main target's).
    `executor`, `threads`: see `run_cvs`.
    Returns one row per (question, method): question, method, n, rmse, rmse_low, ..., kendall_high.
    """
    from calibration.data.dataset import Dataset, load_dataset
    from calibration.data.union import retargeted

    reuse = reuse or {}
    ds = data if isinstance(data, Dataset) else load_dataset(data)
    all_questions = list(questions) if questions is not None else ds.rubric.ids
    datasets = {q: retargeted(ds, q) for q in all_questions}
    jobs = [(f"target {q}", datasets[q], settings, seed) for q in all_questions if q not in reuse]
    computed = dict(
        zip(
            (job[0][7:] for job in jobs),
            run_cvs(jobs, folds=folds, fold_seed=fold_seed, executor=executor, threads=threads, progress=progress),
            strict=True,
        )
    )
    records = []
    for q in all_questions:
        llm = expected_llm_rows(datasets[q])
        calibrated = method_rows(reuse[q], REFERENCE) if q in reuse else computed[q]
        check_aligned(llm, calibrated, f"question {q}'s LLM and calibrated predictions")
        for method, rows in (("expected_llm", llm), (REFERENCE, calibrated)):
            records.append({"question": q, "method": method, "n": len(rows), **_scored(rows, seed=seed, n_boot=n_boot)})
    return pd.DataFrame.from_records(records)


def plot_targets(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """Per question: RMSE and Pearson of expected-LLM and calibrated, with 95% intervals."""
    questions = list(dict.fromkeys(frame["question"]))
    axes, fig = figure_panels(ax, 2, figsize=(8.0, 3.2))
    x = np.arange(len(questions))
    for a, metric in zip(axes, ("rmse", "pearson"), strict=True):
        for shift, method, color in ((-0.15, "expected_llm", "#8c8c8c"), (0.15, REFERENCE, "#c44e52")):
            part = frame[frame["method"] == method].set_index("question").loc[questions]
            v, lo, hi = (part[c].to_numpy(float) for c in (metric, f"{metric}_low", f"{metric}_high"))
            a.errorbar(
                x + shift,
                v,
                yerr=[v - lo, hi - v],
                fmt="o",
                color=color,
                capsize=2,
                ms=4,
                label=METHOD_LABELS[method],
            )
        a.set_xticks(x, questions, fontsize=7)
        a.set_title(f"{metric} with each question as the target", fontsize=9)
        a.tick_params(axis="y", labelsize=7)
    axes[0].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig, axes


# ----------------------------------------------------------------------------- learning curve (App. J)


def prepare_learning_curve(
    ds: Any,
    settings: Any,
    *,
    fractions: Sequence[float] = (0.1, 0.25, 0.5, 0.75, 1.0),
    repeats: int = 3,
    folds: int = 5,
    fold_seed: int = 0,
    seed: int = 0,
    reuse: pd.DataFrame | None = None,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Cross-validated metrics when each model trains on a random `fraction` of its training judgments.

    Repeat r uses seed + r (new subsample, validation splits and initialisation, same folds), so the spread
    over repeats shows how much the estimate moves with training randomness. `reuse` = calibrated predictions already computed at fraction 1 with `seed`.
    `executor`, `threads`: see `run_cvs`.
    Returns one row per (fraction, repeat): fraction, repeat, rmse, pearson, spearman, kendall.
    """
    points = [(float(f), r) for f in fractions for r in range(repeats)]
    reused = {(f, r) for f, r in points if reuse is not None and f >= 1 and r == 0}
    jobs = [
        (f"learning curve {f:g} repeat {r}", ds, dataclasses.replace(settings, train_fraction=f), seed + r)
        for f, r in points
        if (f, r) not in reused
    ]
    computed = iter(
        run_cvs(jobs, folds=folds, fold_seed=fold_seed, executor=executor, threads=threads, progress=progress)
    )
    records = []
    for f, r in points:
        rows = method_rows(reuse, REFERENCE) if (f, r) in reused else next(computed)
        got = point_agreement(rows["expected"].to_numpy(float), rows["answer"].to_numpy(float))
        records.append({"fraction": f, "repeat": r, **got})
    return pd.DataFrame.from_records(records)


def plot_learning_curve(
    frame: pd.DataFrame, ax: Any = None, *, reference: dict[str, float] | None = None
) -> tuple[Figure, Any]:
    """Mean over repeats with the min-max range shaded; individual repeats as dots. `reference` draws a
    horizontal line per metric (e.g. the per-judge-mean baseline)."""
    axes, fig = figure_panels(ax, 2, figsize=(7.5, 3.0))
    summary = frame.groupby("fraction")[["rmse", "pearson"]].agg(["mean", "min", "max"])
    for a, metric in zip(axes, ("rmse", "pearson"), strict=True):
        x = summary.index.to_numpy(float)
        a.fill_between(x, summary[(metric, "min")], summary[(metric, "max")], color="#4c72b0", alpha=0.2, lw=0)
        a.plot(x, summary[(metric, "mean")], "o-", color="#4c72b0", ms=4, label="calibrated (mean of repeats)")
        a.plot(frame["fraction"], frame[metric], ".", color="#4c72b0", ms=3, alpha=0.6)
        if reference and metric in reference and np.isfinite(reference[metric]):
            a.axhline(reference[metric], color="#8c8c8c", ls="--", lw=1, label="per-judge mean")
        a.set_xlabel("fraction of training judgments", fontsize=8)
        a.set_title(metric, fontsize=9)
        a.tick_params(labelsize=7)
    axes[0].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig, axes
