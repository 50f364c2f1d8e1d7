"""The report's sections computed from the predictions frame alone (no training): Table 1, Figure 2, per judge.

Each section is a pair, as in relplot: `prepare_*(predictions, ...)` returns numbers (a frame or a dict)
and `plot_*(data, ax=None) -> (fig, ax)` draws them, so a notebook can call either half. In order:
the judges' answer distributions (observed, calibrated, raw LLM; the paper's Figure 2), the metrics table
(every method with grouped bootstrap 95% intervals and a paired permutation test against the calibrated
model; Table 1) and per-judge metrics. `figure_panels` is the shared "new figure or the axes passed in"
helper, also used by `calibration.report.variants`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from calibration.evaluation.cv_predictions import (
    METHOD_LABELS,
    REFERENCE,
    check_aligned,
    method_arrays,
    method_rows,
    option_values,
    ordered_methods,
)
from calibration.evaluation.significance import (
    METRICS,
    bootstrap_agreement,
    permutation_test,
    point_agreement,
)
from rubric.progress import progress_iter

COLORS = {"observed": "#4c72b0", "predicted": "#dd8452", "llm": "#8c8c8c"}


def figure_panels(ax: Any, n: int, *, figsize: tuple[float, float]) -> tuple[np.ndarray, Figure]:
    """`n` axes in one row: a new figure of `figsize` when `ax` is None, else the `n` axes passed in."""
    if ax is None:
        fig, axes = plt.subplots(1, n, figsize=figsize, squeeze=False)
        return axes[0], fig
    axes = np.atleast_1d(np.asarray(ax, dtype=object))
    if len(axes) != n:
        raise ValueError(f"this plot draws {n} panel(s); got {len(axes)} axes.")
    return axes, axes[0].figure


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
        check_aligned(method_rows(predictions, method), method_rows(predictions, llm_method), "methods")

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
    predictions: pd.DataFrame, *, seed: int = 0, n_boot: int = 1000, n_perm: int = 1000, progress: bool = False
) -> pd.DataFrame:
    """Every method's metrics with grouped bootstrap 95% CIs, and a paired swap test against `calibrated`.

    Returns a long frame: method, metric, value, low, high, difference (method - calibrated), p_value
    (NaN for the calibrated rows), n. All methods use the same resamples (common random numbers).
    """
    reference = method_rows(predictions, REFERENCE)
    records = []
    methods = ordered_methods(predictions)
    for i, method in enumerate(progress_iter(methods, progress, desc="report: metrics", unit="method")):
        rows = method_rows(predictions, method)
        check_aligned(reference, rows, f"methods {REFERENCE!r} and {method!r}")
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
    axes, fig = figure_panels(ax, len(METRICS), figsize=(3.0 * len(METRICS), 0.45 * len(methods) + 1.2))
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
    worst_first = frame[frame["method"] == REFERENCE].sort_values(["rmse", "judge_id"], ascending=[False, True])
    judge_rank = {j: i for i, j in enumerate(worst_first["judge_id"])}
    method_rank = {m: i for i, m in enumerate(methods)}
    order = np.lexsort((frame["method"].map(method_rank), frame["judge_id"].map(judge_rank)))
    return frame.iloc[order].reset_index(drop=True)


def plot_per_judge(frame: pd.DataFrame, ax: Any = None) -> tuple[Figure, Any]:
    """RMSE per judge for each method (horizontal bars), worst-predicted judge on top."""
    judges = list(dict.fromkeys(frame["judge_id"]))
    methods = list(dict.fromkeys(frame["method"]))
    axes, fig = figure_panels(ax, 1, figsize=(6.5, 0.28 * len(judges) + 1.2))
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
    a.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the bars, never on them
    fig.tight_layout()
    return fig, a
