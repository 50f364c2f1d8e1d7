"""`role-rubric report`: everything a user needs to decide whether to trust a calibrator, with uncertainty.

Sections (LLM-Rubric paper in brackets), each a `prepare_*` (numbers, no drawing) and `plot_*(data, ax=None)
-> (fig, ax)` pair that notebooks use directly:
  reliability diagrams of the target (relplot smECE, calibration/reliability.py)
  judges' answer distributions: observed, calibrated, raw LLM          [Figure 2]
  metrics table: calibrated vs baselines, bootstrap CIs, permutation p [Table 1]
  ablations: no pretraining / fine-tuning / personalisation / question  [Table 2]
  every question as the target: expected-LLM vs calibrated             [Table 3]
  learning curve over the fraction of training judgments                [Appendix J]
  per-judge metrics
Predictions are the long-form out-of-fold frame of `calibration.crossval` (one row per item, judge,
method; p_<value> columns; expected; answer). Everything is seeded: a rerun writes identical numbers and
identical PNG bytes.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import json
import math
import multiprocessing
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from calibration.reliability import plot_reliability, prepare_reliability
from calibration.significance import METRICS, bootstrap_agreement, permutation_test, point_agreement
from rubric.errors import InputError

KEYS = ["conversation_id", "turn", "judge_id"]
REFERENCE = "calibrated"
METHOD_LABELS = {
    "calibrated": "calibrated (ours)",
    "constant": "constant (training mean)",
    "judge_mean": "per-judge mean",
    "random": "random answer",
    "argmax_llm": "argmax LLM",
    "expected_llm": "expected LLM",
    "calibrated_llm": "calibrated LLM (target only)",
}
COLORS = {"observed": "#4c72b0", "predicted": "#dd8452", "llm": "#8c8c8c"}


# ----------------------------------------------------------------------------- predictions frame helpers


def option_values(predictions: pd.DataFrame) -> list[float]:
    """Option values of the target, read from the p_<value> columns in their order."""
    columns = [c for c in predictions.columns if c.startswith("p_")]
    if not columns:
        raise ValueError("predictions have no p_<value> columns; pass the frame written by `role-rubric cv`.")
    return [float(c[2:]) for c in columns]


def method_rows(predictions: pd.DataFrame, method: str) -> pd.DataFrame:
    """The rows of one method, sorted by (conversation_id, turn, judge_id) so methods align row by row."""
    rows = predictions[predictions["method"] == method]
    if rows.empty:
        present = sorted(predictions["method"].unique())
        raise ValueError(f"no predictions for method {method!r}; methods present: {present}.")
    return rows.sort_values(KEYS, kind="stable").reset_index(drop=True)


def method_arrays(predictions: pd.DataFrame, method: str = REFERENCE) -> dict[str, np.ndarray]:
    """One method's arrays: probs (n, K), expected (n,), answers (n,), groups (n,) conversation ids,
    judges (n,), values (K,)."""
    rows = method_rows(predictions, method)
    values = option_values(predictions)
    return {
        "probs": rows[[c for c in rows.columns if c.startswith("p_")]].to_numpy(float),
        "expected": rows["expected"].to_numpy(float),
        "answers": rows["answer"].to_numpy(float),
        "groups": rows["conversation_id"].astype(str).to_numpy(),
        "judges": rows["judge_id"].astype(str).to_numpy(),
        "values": np.asarray(values),
    }


def _methods(predictions: pd.DataFrame) -> list[str]:
    present = list(dict.fromkeys(predictions["method"]))
    known = [m for m in METHOD_LABELS if m in present]
    return known + [m for m in present if m not in known]


def _check_aligned(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    if len(a) != len(b) or not (a[KEYS].astype(str).to_numpy() == b[KEYS].astype(str).to_numpy()).all():
        raise ValueError(
            f"{what} do not predict the same (conversation, turn, judge) rows; cannot pair them."
        )


# ----------------------------------------------------------------------------- answer distributions (Fig. 2)


def prepare_distributions(
    predictions: pd.DataFrame,
    *,
    method: str = REFERENCE,
    llm_method: str = "expected_llm",
    max_judges: int = 24,
) -> dict[str, Any]:
    """Per judge: the observed answer distribution, the mean predicted distribution, and the raw LLM's.

    Returns {"values": (K,), "panels": [{"judge_id", "n", "observed", "predicted", "llm"} (each (K,))]},
    the first panel pooling all judges, then judges by number of judgments (at most `max_judges`).
    The "llm" entry is None when the predictions have no `llm_method` rows.
    """
    values = option_values(predictions)
    ours = method_arrays(predictions, method)
    has_llm = llm_method in set(predictions["method"])
    llm = method_arrays(predictions, llm_method) if has_llm else None
    if llm is not None:
        _check_aligned(method_rows(predictions, method), method_rows(predictions, llm_method), "methods")

    def panel(name: str, mask: np.ndarray) -> dict[str, Any]:
        observed = np.array([(ours["answers"][mask] == v).mean() for v in values])
        return {
            "judge_id": name,
            "n": int(mask.sum()),
            "observed": observed.tolist(),
            "predicted": ours["probs"][mask].mean(axis=0).tolist(),
            "llm": None if llm is None else llm["probs"][mask].mean(axis=0).tolist(),
        }

    judges, counts = np.unique(ours["judges"], return_counts=True)
    by_size = [judges[i] for i in np.lexsort((judges, -counts))][:max_judges]
    panels = [panel("all judges", np.ones(len(ours["answers"]), bool))]
    panels += [panel(str(j), ours["judges"] == j) for j in by_size]
    return {"values": values, "panels": panels}


def plot_distributions(data: dict[str, Any], ax: Any = None) -> tuple[Figure, Any]:
    """Grouped bars per judge: observed (human), calibrated prediction, raw LLM. `ax`: one Axes per panel."""
    panels = data["panels"]
    if ax is None:
        cols = min(5, len(panels))
        rows = math.ceil(len(panels) / cols)
        fig, grid = plt.subplots(rows, cols, figsize=(2.4 * cols, 2.0 * rows), sharey=True, squeeze=False)
        axes = grid.ravel()
        for extra in axes[len(panels) :]:
            extra.set_visible(False)
    else:
        axes = np.atleast_1d(np.asarray(ax, dtype=object))
        fig = axes[0].figure
    x = np.arange(len(data["values"]))
    for a, p in zip(axes, panels, strict=False):
        series = [("observed", "human"), ("predicted", "calibrated")] + ([("llm", "LLM")] if p["llm"] else [])
        width = 0.8 / len(series)
        for i, (key, label) in enumerate(series):
            a.bar(x + (i - (len(series) - 1) / 2) * width, p[key], width, color=COLORS[key], label=label)
        a.set_xticks(x, [f"{v:g}" for v in data["values"]], fontsize=7)
        a.tick_params(axis="y", labelsize=7)
        a.set_title(f"{p['judge_id']} (n={p['n']})", fontsize=8)
    axes[0].legend(fontsize=6, frameon=False)
    fig.tight_layout()
    return fig, axes


# ----------------------------------------------------------------------------- metrics table (Table 1)


def prepare_metrics_table(
    predictions: pd.DataFrame, *, seed: int = 0, n_boot: int = 1000, n_perm: int = 1000
) -> pd.DataFrame:
    """Every method's metrics with grouped bootstrap 95% CIs, and a paired swap test against `calibrated`.

    Returns a long frame: method, metric, value, low, high, difference (method - calibrated), p_value
    (NaN for the calibrated rows), n. All methods use the same resamples (common random numbers).
    """
    reference = method_rows(predictions, REFERENCE)
    records = []
    for i, method in enumerate(_methods(predictions)):
        rows = method_rows(predictions, method)
        _check_aligned(reference, rows, f"methods {REFERENCE!r} and {method!r}")
        groups = rows["conversation_id"].astype(str).to_numpy()
        answers = rows["answer"].to_numpy(float)
        ci = bootstrap_agreement(
            rows["expected"].to_numpy(float),
            answers,
            rng=np.random.default_rng(seed),
            groups=groups,
            n_boot=n_boot,
        )
        test = None
        if method != REFERENCE:
            test = permutation_test(
                rows["expected"].to_numpy(float),
                reference["expected"].to_numpy(float),
                answers,
                rng=np.random.default_rng([seed, i]),
                groups=groups,
                n_perm=n_perm,
            )
        for metric in METRICS:
            records.append(
                {
                    "method": method,
                    "metric": metric,
                    **ci[metric],
                    "difference": 0.0 if test is None else test[metric]["difference"],
                    "p_value": math.nan if test is None else test[metric]["p_value"],
                    "n": len(rows),
                }
            )
    return pd.DataFrame.from_records(records)


def plot_metrics_table(table: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """Forest plot: one panel per metric, each method's estimate with its 95% interval."""
    methods = list(dict.fromkeys(table["method"]))
    axes, fig = _panels(ax, len(METRICS), figsize=(3.0 * len(METRICS), 0.45 * len(methods) + 1.2))
    y = np.arange(len(methods))[::-1]
    for a, metric in zip(axes, METRICS, strict=True):
        part = table[table["metric"] == metric].set_index("method").loc[methods]
        finite = np.isfinite(part["value"].to_numpy())
        colors = ["#c44e52" if m == REFERENCE else "#4c72b0" for m in methods]
        for yi, (_, r), c, ok in zip(y, part.iterrows(), colors, finite, strict=True):
            if ok:
                a.errorbar(
                    r["value"],
                    yi,
                    xerr=[[r["value"] - r["low"]], [r["high"] - r["value"]]],
                    fmt="o",
                    color=c,
                    capsize=2,
                    ms=4,
                )
            else:
                a.text(
                    0.5,
                    yi,
                    "undefined",
                    transform=a.get_yaxis_transform(),
                    ha="center",
                    va="center",
                    fontsize=7,
                )
        a.axvline(part.loc[REFERENCE, "value"], color="#c44e52", lw=0.8, ls=":")
        a.set_title(metric, fontsize=9)
        a.tick_params(labelsize=7)
        a.set_yticks(y, [METHOD_LABELS.get(m, m) for m in methods] if a is axes[0] else [""] * len(methods))
        a.set_ylim(-0.7, len(methods) - 0.3)
    fig.tight_layout()
    return fig, axes


# ----------------------------------------------------------------------------- per-judge metrics


def prepare_per_judge(
    predictions: pd.DataFrame, *, methods: Sequence[str] = (REFERENCE, "judge_mean", "expected_llm")
) -> pd.DataFrame:
    """RMSE/Pearson/Spearman/Kendall per (judge, method); correlations NaN where a judge's answers are
    constant. Sorted by the calibrated model's RMSE, worst first."""
    present = set(predictions["method"])
    records = []
    for method in [m for m in methods if m in present]:
        rows = method_rows(predictions, method)
        for judge, part in rows.groupby(rows["judge_id"].astype(str), sort=True):
            got = point_agreement(part["expected"].to_numpy(float), part["answer"].to_numpy(float))
            records.append({"judge_id": judge, "method": method, "n": len(part), **got})
    frame = pd.DataFrame.from_records(records)
    worst_first = frame[frame["method"] == REFERENCE].sort_values(
        ["rmse", "judge_id"], ascending=[False, True]
    )
    judge_rank = {j: i for i, j in enumerate(worst_first["judge_id"])}
    method_rank = {m: i for i, m in enumerate(methods)}
    order = np.lexsort((frame["method"].map(method_rank), frame["judge_id"].map(judge_rank)))
    return frame.iloc[order].reset_index(drop=True)


def plot_per_judge(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """RMSE per judge for each method (horizontal bars), worst-predicted judge on top."""
    judges = list(dict.fromkeys(frame["judge_id"]))
    methods = list(dict.fromkeys(frame["method"]))
    axes, fig = _panels(ax, 1, figsize=(6.5, 0.28 * len(judges) + 1.2))
    a = axes[0]
    height = 0.8 / len(methods)
    y = np.arange(len(judges))[::-1]
    palette = {REFERENCE: "#c44e52", "judge_mean": "#4c72b0", "expected_llm": "#8c8c8c"}
    for i, method in enumerate(methods):
        part = frame[frame["method"] == method].set_index("judge_id").reindex(judges)
        a.barh(
            y + (len(methods) / 2 - i - 0.5) * height,
            part["rmse"],
            height,
            label=METHOD_LABELS.get(method, method),
            color=palette.get(method, "#55a868"),
        )
    n = frame[frame["method"] == methods[0]].set_index("judge_id").reindex(judges)["n"]
    a.set_yticks(y, [f"{j} (n={k})" for j, k in zip(judges, n, strict=True)], fontsize=7)
    a.set_xlabel("RMSE (answer units)", fontsize=8)
    a.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig, a


# ----------------------------------------------------------------------------- cross-validated variants


def _cv_calibrated(ds: Any, settings: Any, *, folds: int, seed: int) -> pd.DataFrame:
    from calibration.crossval import cross_validate

    result = cross_validate(ds, settings, folds=folds, seed=seed, baselines=False)
    return method_rows(result.predictions, REFERENCE)


def _cv_job(job: tuple[Any, Any, int, int, int | None]) -> tuple[pd.DataFrame, float]:
    """One cross-validation (top-level so a process pool can pickle it): (ds, settings, folds, seed, threads)."""
    ds, settings, folds, seed, threads = job
    start = time.perf_counter()
    with _torch_threads(threads):
        rows = _cv_calibrated(ds, settings, folds=folds, seed=seed)
    return rows, time.perf_counter() - start


def run_cvs(
    jobs: Sequence[tuple[str, Any, Any, int]],
    *,
    folds: int = 5,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> list[pd.DataFrame]:
    """Cross-validate the calibrated model for each job (label, dataset, settings, seed), in job order.

    Every job is seeded and self-contained, so running them on a process pool (`executor`) gives the
    same predictions as running them here one after another.
    """
    args = [(ds, settings, folds, seed, threads) for _, ds, settings, seed in jobs]
    results = executor.map(_cv_job, args) if executor is not None else map(_cv_job, args)
    out = []
    for i, ((label, *_), (rows, seconds)) in enumerate(zip(jobs, results, strict=True)):
        out.append(rows)
        if progress:
            print(
                f"report: {label} ({i + 1}/{len(jobs)}): rmse {np.sqrt(np.mean((rows['expected'] - rows['answer']) ** 2)):.3f} ({seconds:.1f}s)"
            )
    return out


class _Prefetched(Executor):
    """A process pool whose cross-validations were submitted ahead of time, so the workers train while
    this process computes the other sections. `map(_cv_job, jobs)` hands back the result of a matching
    earlier submission (same target, settings, folds, seed) and submits anything it has not seen, so a
    prefetch list that misses a job costs time, never correctness."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool
        self.pending: dict[tuple, Any] = {}

    @staticmethod
    def _key(job: tuple) -> tuple:
        ds, settings, folds, seed, _ = job
        return (ds.rubric.target, settings, folds, seed)

    def prefetch(self, jobs: Sequence[tuple]) -> None:
        for job in jobs:
            self.pending.setdefault(self._key(job), self.pool.submit(_cv_job, job))

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        return self.pool.submit(fn, *args, **kwargs)

    def map(
        self, fn: Any, *iterables: Any, timeout: float | None = None, chunksize: int = 1
    ) -> Iterator[Any]:
        futures = [
            self.pending.pop(self._key(job), None) or self.pool.submit(fn, job) for job in iterables[0]
        ]
        return (f.result() for f in futures)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self.pool.shutdown(wait, cancel_futures=cancel_futures)


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


def ablation_variants(settings: Any, questions: Sequence[str], target: str) -> list[tuple[str, Any]]:
    """(name, settings) of every ablation: the paper's Table 2 plus one variant per non-target question."""
    replace = dataclasses.replace
    variants = [
        ("no pretraining", replace(settings, pretrain_steps=0)),
        ("no fine-tuning", replace(settings, finetune_steps=0)),
        ("no personalisation", replace(settings, personalised=False)),
    ]
    kept = [q for q in questions if q != target and q not in settings.drop_questions]
    variants += [
        (f"without {q}", replace(settings, drop_questions=(*settings.drop_questions, q))) for q in kept
    ]
    return variants


def prepare_ablations(
    ds: Any,
    settings: Any,
    full: pd.DataFrame,
    *,
    folds: int = 5,
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
    all_rows = run_cvs(jobs, folds=folds, executor=executor, threads=threads, progress=progress)
    for i, ((name, _), rows) in enumerate(zip(variants, all_rows, strict=True)):
        _check_aligned(full, rows, f"ablation {name!r} and the full model")
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
    axes, fig = _panels(ax, len(metrics), figsize=(3.4 * len(metrics), 0.32 * len(names) + 1.2))
    y = np.arange(len(names))[::-1]
    for a, metric in zip(axes, metrics, strict=True):
        v, lo, hi = (frame[c].to_numpy(float) for c in (metric, f"{metric}_low", f"{metric}_high"))
        a.errorbar(v, y, xerr=[v - lo, hi - v], fmt="o", color="#4c72b0", capsize=2, ms=4)
        if reference is not None:
            a.axvline(
                float(frame.loc[frame[label] == reference, metric].iloc[0]), color="#c44e52", lw=0.8, ls=":"
            )
        a.set_yticks(y, names if a is axes[0] else [""] * len(names), fontsize=7)
        a.set_title(metric, fontsize=9)
        a.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    return fig, axes


def plot_ablations(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """RMSE and Pearson of every ablation with 95% intervals; the dotted line is the full model."""
    return _interval_panels(frame, "variant", ax, reference="full model")


# ----------------------------------------------------------------------------- every question as target


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
    data: str | Path,
    settings: Any,
    *,
    questions: Sequence[str] | None = None,
    reuse: dict[str, pd.DataFrame] | None = None,
    folds: int = 5,
    seed: int = 0,
    n_boot: int = 1000,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Each question as the training target in turn: expected-LLM against the calibrated model (CV).

    `reuse` maps a question to calibrated predictions already computed (e.g. the main target's).
    `executor`, `threads`: see `run_cvs`.
    Returns one row per (question, method): question, method, n, rmse, rmse_low, ..., kendall_high.
    """
    from calibration.dataset import load_dataset

    reuse = reuse or {}
    all_questions = list(questions) if questions is not None else load_dataset(data).rubric.ids
    datasets = {q: load_dataset(data, target=q) for q in all_questions}
    jobs = [(f"target {q}", datasets[q], settings, seed) for q in all_questions if q not in reuse]
    computed = dict(
        zip(
            (job[0][7:] for job in jobs),
            run_cvs(jobs, folds=folds, executor=executor, threads=threads, progress=progress),
            strict=True,
        )
    )
    records = []
    for q in all_questions:
        llm = expected_llm_rows(datasets[q])
        calibrated = method_rows(reuse[q], REFERENCE) if q in reuse else computed[q]
        _check_aligned(llm, calibrated, f"question {q}'s LLM and calibrated predictions")
        for method, rows in (("expected_llm", llm), (REFERENCE, calibrated)):
            records.append(
                {"question": q, "method": method, "n": len(rows), **_scored(rows, seed=seed, n_boot=n_boot)}
            )
    return pd.DataFrame.from_records(records)


def plot_targets(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """Per question: RMSE and Pearson of expected-LLM and calibrated, with 95% intervals."""
    questions = list(dict.fromkeys(frame["question"]))
    axes, fig = _panels(ax, 2, figsize=(8.0, 3.2))
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
    seed: int = 0,
    reuse: pd.DataFrame | None = None,
    executor: Executor | None = None,
    threads: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Cross-validated metrics when each model trains on a random `fraction` of its training judgments.

    Repeat r uses seed + r (new folds, subsample and initialisation), so the spread over repeats shows how
    much the estimate moves. `reuse` = calibrated predictions already computed at fraction 1 with `seed`.
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
    computed = iter(run_cvs(jobs, folds=folds, executor=executor, threads=threads, progress=progress))
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
    axes, fig = _panels(ax, 2, figsize=(7.5, 3.0))
    summary = frame.groupby("fraction")[["rmse", "pearson"]].agg(["mean", "min", "max"])
    for a, metric in zip(axes, ("rmse", "pearson"), strict=True):
        x = summary.index.to_numpy(float)
        a.fill_between(
            x, summary[(metric, "min")], summary[(metric, "max")], color="#4c72b0", alpha=0.2, lw=0
        )
        a.plot(
            x, summary[(metric, "mean")], "o-", color="#4c72b0", ms=4, label="calibrated (mean of repeats)"
        )
        a.plot(frame["fraction"], frame[metric], ".", color="#4c72b0", ms=3, alpha=0.6)
        if reference and metric in reference and np.isfinite(reference[metric]):
            a.axhline(reference[metric], color="#8c8c8c", ls="--", lw=1, label="per-judge mean")
        a.set_xlabel("fraction of training judgments", fontsize=8)
        a.set_title(metric, fontsize=9)
        a.tick_params(labelsize=7)
    axes[0].legend(fontsize=7, frameon=False)
    fig.tight_layout()
    return fig, axes


def _panels(ax: Any, n: int, *, figsize: tuple[float, float]) -> tuple[np.ndarray, Figure]:
    if ax is None:
        fig, axes = plt.subplots(1, n, figsize=figsize, squeeze=False)
        return axes[0], fig
    axes = np.atleast_1d(np.asarray(ax, dtype=object))
    if len(axes) != n:
        raise ValueError(f"this plot draws {n} panel(s); got {len(axes)} axes.")
    return axes, axes[0].figure


# ----------------------------------------------------------------------------- the command


def read_cv_folder(folder: str | Path, target: str) -> tuple[pd.DataFrame, dict[str, Any]]:
    """predictions.csv (and metrics.json, if present) of a `role-rubric cv` output folder."""
    folder = Path(folder)
    path = folder / "predictions.csv"
    if not path.exists():
        raise InputError(
            "no predictions.csv in the cv folder.",
            path=folder,
            fix="pass cv=DIR written by `role-rubric cv`.",
        )
    ids = {c: str for c in ("conversation_id", "turn", "judge_id", "question_id", "method")}
    predictions = pd.read_csv(path, dtype=ids, keep_default_na=False)
    missing = [
        c for c in [*KEYS, "question_id", "method", "expected", "answer"] if c not in predictions.columns
    ]
    if missing:
        raise InputError(
            f"missing column(s) {missing}.",
            path=path,
            fix="pass a predictions.csv written by `role-rubric cv`.",
        )
    if REFERENCE not in set(predictions["method"]):
        raise InputError(
            "no rows of method 'calibrated'.", path=path, fix="rerun `role-rubric cv` on this dataset."
        )
    found = sorted(set(predictions["question_id"]))
    if found != [target]:
        raise InputError(
            f"predictions are for question(s) {found}, the report's target is {target!r}.",
            path=path,
            fix=f"pass target={found[0]} or a cv folder for {target}.",
        )
    info_path = folder / "metrics.json"
    info = json.loads(info_path.read_text()) if info_path.exists() else {}
    return predictions, info


def _encode_png(fig: Figure, path: Path) -> str:
    """Save `fig` as PNG with no varying metadata (so reruns give identical bytes); return base64."""
    fig.savefig(path, format="png", dpi=90, metadata={"Software": None})
    plt.close(fig)
    return base64.b64encode(path.read_bytes()).decode("ascii")


def _jsonable(value: Any) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, recursively (metrics.json must be strict JSON)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return _jsonable(frame.to_dict(orient="records"))


def _fmt(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return "–" if not np.isfinite(value) else f"{value:.3f}"
    return html.escape(str(value))


def _ci(frame: pd.DataFrame, metric: str) -> pd.Series:
    return frame.apply(
        lambda r: (
            "–"
            if not np.isfinite(r[metric])
            else f"{r[metric]:.3f} [{r[metric + '_low']:.3f}, {r[metric + '_high']:.3f}]"
        ),
        axis=1,
    )


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _metrics_html(table: pd.DataFrame) -> pd.DataFrame:
    wide = {}
    for method, part in table.groupby("method", sort=False):
        row = {"method": METHOD_LABELS.get(method, method), "n": int(part["n"].iloc[0])}
        for r in part.itertuples():
            row[r.metric] = "–" if not np.isfinite(r.value) else f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]"
            if method != REFERENCE:
                row[f"p {r.metric}"] = r.p_value
        wide[method] = row
    return pd.DataFrame(list(wide.values()))


def _per_judge_html(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per judge: n, then RMSE and Pearson of every method side by side."""
    wide = frame.pivot(index="judge_id", columns="method", values=["rmse", "pearson"])
    methods = list(dict.fromkeys(frame["method"]))
    judges = list(dict.fromkeys(frame["judge_id"]))
    out = pd.DataFrame(
        {
            "judge": judges,
            "n": frame.drop_duplicates("judge_id").set_index("judge_id").loc[judges, "n"].to_numpy(),
        }
    )
    for metric in ("rmse", "pearson"):
        for method in methods:
            out[f"{metric} {METHOD_LABELS.get(method, method)}"] = wide.loc[
                judges, (metric, method)
            ].to_numpy()
    return out


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>role-rubric report: {title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }}
th, td {{ padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
img {{ max-width: 100%; }} .note {{ color: #555; font-size: 0.9em; }} code {{ background: #f4f4f4; }}
</style></head><body>
<h1>role-rubric report: target {title}</h1>
<p class="note">{intro}</p>
{sections}
</body></html>
"""


def _section(title: str, note: str, image: tuple[str, str] | None, table: str = "") -> str:
    img = ""
    if image is not None:
        name, data = image
        img = f'<p><img src="data:image/png;base64,{data}" alt="{html.escape(title)}" data-file="{name}"></p>'
    return f'<h2>{html.escape(title)}</h2>\n<p class="note">{note}</p>\n{img}\n{table}\n'


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run torch with `n` intra-op threads inside the block (None: leave as is), then restore.

    The report trains dozens of small batched models one after another; with more than one thread each
    tiny matmul pays a thread hand-off, and on a busy 2-core machine that costs 10-100x (measured: a
    2-fold cv of 2 small models took 3-14 s with 2 threads and 0.1 s with 1).
    """
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_report(cfg: Any) -> dict[str, Any]:
    """CLI: `role-rubric report data=DIR out=DIR [cv=DIR] [target=Q] [report.*=..] [network.*=..] [train.*=..]`.

    Writes out/report.html (self-contained, images embedded), out/*.png and out/metrics.json; returns
    the metrics.json content.
    """
    with _torch_threads(cfg.report.get("torch_threads")), contextlib.ExitStack() as stack:
        return _run_report(cfg, stack)


def _run_report(cfg: Any, stack: contextlib.ExitStack) -> dict[str, Any]:
    from calibration.crossval import cross_validate
    from calibration.dataset import load_dataset
    from calibration.train import Settings

    start = time.perf_counter()
    opts = cfg.report
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    settings, folds, seed = Settings.from_cfg(cfg), int(cfg.folds), int(cfg.seed)
    ds = load_dataset(cfg.data, target=cfg.get("target"))
    target = ds.rubric.target
    if cfg.get("cv"):
        predictions, info = read_cv_folder(cfg.cv, target)
        # The ablations and the learning curve are compared with these predictions: use the cv run's setup.
        if "settings" in info:
            saved = dict(info["settings"])
            saved["drop_questions"] = tuple(saved.get("drop_questions") or ())
            settings = dataclasses.replace(settings, **saved)
        folds, seed = int(info.get("folds", folds)), int(info.get("seed", seed))
        print(f"report: reusing {Path(cfg.cv) / 'predictions.csv'} ({folds} folds, seed {seed})")
    n_boot, n_perm = int(opts.n_boot), int(opts.n_perm)
    # Ablations, targets and learning curve may use a smaller ensemble to stay fast; the full model they are
    # compared with is then recomputed with the same ensemble, so every comparison is like for like.
    light = (
        settings
        if opts.get("ensemble") is None
        else dataclasses.replace(settings, ensemble=int(opts.ensemble))
    )
    threads = opts.get("torch_threads")
    curve_points = [
        (float(f), r) for f in opts.learning_curve.fractions for r in range(int(opts.learning_curve.repeats))
    ]
    variant_jobs = []
    if light != settings:
        variant_jobs.append((ds, light, folds, seed, threads))
    if opts.ablations:
        variant_jobs += [
            (ds, v, folds, seed, threads) for _, v in ablation_variants(light, ds.rubric.ids, target)
        ]
    if opts.targets:
        variant_jobs += [
            (load_dataset(cfg.data, target=q), light, folds, seed, threads)
            for q in ds.rubric.ids
            if q != target
        ]
    variant_jobs += [
        (ds, dataclasses.replace(light, train_fraction=f), folds, seed + r, threads)
        for f, r in curve_points
        if not (f >= 1 and r == 0)
    ]
    workers = int(opts.get("workers") or 1)
    pool = None
    if variant_jobs and workers > 1:
        # Spawned (not forked) workers: forking a process that has started torch's thread pools can hang.
        pool = _Prefetched(ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")))
        pool.prefetch(variant_jobs)
        stack.callback(pool.shutdown, cancel_futures=True)
    if not cfg.get("cv"):
        print(f"report: cross-validating the calibrated model and baselines ({folds} folds, seed {seed})")
        predictions = cross_validate(ds, settings, folds=folds, seed=seed, progress=True).predictions
    timings = {"main cv": time.perf_counter() - start}
    main_calibrated = method_rows(predictions, REFERENCE)

    results: dict[str, Any] = {
        "target": target,
        "data": str(cfg.data),
        "folds": folds,
        "seed": seed,
        "settings": settings.to_dict(),
        "variant_ensemble": light.ensemble,
    }
    html_sections = []
    with plt.style.context("default"):
        tick = time.perf_counter()
        arrays = method_arrays(predictions, REFERENCE)
        threshold = opts.get("adheres_threshold")
        reliability = prepare_reliability(
            arrays["probs"],
            arrays["answers"],
            values=arrays["values"],
            threshold=threshold,
            groups=arrays["groups"],
            seed=seed,
            n_boot=int(opts.smece_boot),
            band_bootstrap=int(opts.band_bootstrap),
        )
        results["reliability"] = [
            {k: v for k, v in c.items() if k != "diagram"} for c in reliability["curves"]
        ]
        html_sections.append(
            _section(
                f"Reliability of the calibrated {target} distribution",
                "One-vs-rest for every answer value, and 'adheres' = P(answer &ge; threshold). Red: smoothed observed "
                "frequency against the predicted probability (relplot), grey band: its bootstrap 95% band, shaded: "
                "density of predictions. smECE (smooth expected calibration error, 0 = calibrated) with a 95% interval "
                "from resampling whole conversations.",
                ("reliability.png", _encode_png(plot_reliability(reliability)[0], out / "reliability.png")),
                _html_table(
                    pd.DataFrame(results["reliability"])[["name", "n", "positives", "smece", "low", "high"]]
                ),
            )
        )
        timings["reliability"] = time.perf_counter() - tick

        tick = time.perf_counter()
        table = prepare_metrics_table(predictions, seed=seed, n_boot=n_boot, n_perm=n_perm)
        results["metrics"] = _records(table)
        html_sections.append(
            _section(
                "Agreement with the human judges: calibrated model against the baselines",
                f"Out-of-fold predictions of {target} pooled over {folds} folds (grouped by conversation). RMSE in answer "
                "units (lower is better); Pearson, Spearman, Kendall tau-b (higher is better). Brackets: bootstrap 95% "
                "intervals over conversations. p: paired permutation test (predictions swapped per conversation) of "
                f"each baseline against the calibrated model, two-sided; with {n_perm} swaps the smallest possible p "
                f"is {1 / (1 + n_perm):.2g}. The test treats the trained models as fixed: it measures the evidence over conversations, "
                "not over training seeds (the learning curve's repeats show the spread over seeds).",
                ("metrics.png", _encode_png(plot_metrics_table(table)[0], out / "metrics.png")),
                _html_table(_metrics_html(table)),
            )
        )
        distributions = prepare_distributions(predictions, max_judges=int(opts.max_judges))
        results["distributions"] = distributions
        html_sections.append(
            _section(
                "Answer distributions per judge",
                "Each judge's observed answers (human), the distribution the calibrated model predicts for that judge "
                "(mean over the judge's items) and the raw LLM's distribution on the same items (the paper's Figure 2).",
                (
                    "distributions.png",
                    _encode_png(plot_distributions(distributions)[0], out / "distributions.png"),
                ),
            )
        )
        per_judge = prepare_per_judge(predictions)
        results["per_judge"] = _records(per_judge)
        html_sections.append(
            _section(
                "Per-judge agreement",
                "RMSE of each method on each judge's judgments, the judge the calibrated model predicts worst on top; "
                "correlations are undefined (–) for a judge whose answers are all the same.",
                ("per_judge.png", _encode_png(plot_per_judge(per_judge)[0], out / "per_judge.png")),
                _html_table(_per_judge_html(per_judge)),
            )
        )
        timings["tables"] = time.perf_counter() - tick

        reference = main_calibrated
        variants = bool(opts.ablations or opts.targets or opts.learning_curve.repeats)
        runner = {"executor": pool, "threads": opts.get("torch_threads"), "progress": True}
        if light != settings and variants:
            tick = time.perf_counter()
            jobs = [(f"full model with an ensemble of {light.ensemble}", ds, light, seed)]
            reference = run_cvs(jobs, folds=folds, **runner)[0]
            timings["variant reference cv"] = time.perf_counter() - tick
        if opts.ablations:
            tick = time.perf_counter()
            ablations = prepare_ablations(
                ds, light, reference, folds=folds, seed=seed, n_boot=n_boot, n_perm=n_perm, **runner
            )
            results["ablations"] = _records(ablations)
            shown = ablations[["variant"]].assign(
                **{m: _ci(ablations, m) for m in METRICS},
                p_rmse=ablations["p_rmse"],
                p_pearson=ablations["p_pearson"],
            )
            html_sections.append(
                _section(
                    "Ablations (cross-validated)",
                    f"The model without pretraining, without fine-tuning, without per-judge parameters, and without "
                    f"each input question in turn (the paper's Table 2); ensemble of {light.ensemble}. p: permutation "
                    "test against the full model (same folds and seeds, so even small consistent differences can be "
                    "significant; read them with the intervals).",
                    ("ablations.png", _encode_png(plot_ablations(ablations)[0], out / "ablations.png")),
                    _html_table(shown),
                )
            )
            timings["ablations"] = time.perf_counter() - tick
        if opts.targets:
            tick = time.perf_counter()
            targets = prepare_targets(
                cfg.data,
                light,
                reuse={target: reference},
                folds=folds,
                seed=seed,
                n_boot=n_boot,
                **runner,
            )
            results["targets"] = _records(targets)
            shown = targets[["question", "method", "n"]].assign(
                method=targets["method"].map(METHOD_LABELS),
                rmse=_ci(targets, "rmse"),
                pearson=_ci(targets, "pearson"),
            )
            html_sections.append(
                _section(
                    "Every question as the target",
                    "Cross-validated RMSE and Pearson when each rubric question is the training target in turn: the raw "
                    "LLM's expected answer against the calibrated model (the paper's Table 3).",
                    ("targets.png", _encode_png(plot_targets(targets)[0], out / "targets.png")),
                    _html_table(shown),
                )
            )
            timings["targets"] = time.perf_counter() - tick
        if opts.learning_curve.repeats:
            tick = time.perf_counter()
            curve = prepare_learning_curve(
                ds,
                light,
                fractions=list(opts.learning_curve.fractions),
                repeats=int(opts.learning_curve.repeats),
                folds=folds,
                seed=seed,
                reuse=reference,
                **runner,
            )
            results["learning_curve"] = _records(curve)
            judge_mean = table[table["method"] == "judge_mean"].set_index("metric")["value"].to_dict()
            summary = curve.groupby("fraction")[["rmse", "pearson"]].agg(["mean", "std", "min", "max"])
            summary.columns = [f"{m} {s}" for m, s in summary.columns]
            html_sections.append(
                _section(
                    "Learning curve",
                    "Cross-validated metrics when each model sees only a random fraction of its training judgments "
                    f"({int(opts.learning_curve.repeats)} repeats with different seeds: line = mean, band = min to max); "
                    "dashed: the per-judge-mean baseline with all judgments (Appendix J of the paper).",
                    (
                        "learning_curve.png",
                        _encode_png(
                            plot_learning_curve(curve, reference=judge_mean)[0], out / "learning_curve.png"
                        ),
                    ),
                    _html_table(summary.reset_index()),
                )
            )
            timings["learning curve"] = time.perf_counter() - tick

    intro = (
        f"Data <code>{html.escape(str(cfg.data))}</code>, target {html.escape(target)}, "
        f"{len(main_calibrated)} judgments by {main_calibrated['judge_id'].nunique()} judges on "
        f"{main_calibrated['conversation_id'].nunique()} conversations; {folds}-fold cross-validation "
        f"grouped by conversation, seed {seed}, ensemble of {settings.ensemble}."
    )
    (out / "report.html").write_text(
        PAGE.format(title=html.escape(target), intro=intro, sections="\n".join(html_sections)),
        encoding="utf-8",
    )
    (out / "metrics.json").write_text(json.dumps(_jsonable(results), indent=2) + "\n")
    total = time.perf_counter() - start
    print("report: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; total {total:.1f}s")
    print(f"report: wrote {out / 'report.html'}, {out / 'metrics.json'} and the PNG files")
    return results
