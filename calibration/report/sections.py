"""The report's figure-and-table sections, one function each: it computes the section's numbers (returned,
for metrics.json) and draws its HTML through the section macro (templates/sections.html.j2, via
`section_html`); report/build.py calls them in page order. The verdict, reviewer, turn, release and decision
sections have their own modules (verdict.py, reviewers.py, turns.py, release.py, decisions.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from calibration.evaluation.cv_predictions import METHOD_LABELS, REFERENCE, method_arrays
from calibration.evaluation.significance import METRICS
from calibration.pages.parts import encode_png, html_table, interval_column
from calibration.pages.templating import escape
from calibration.report.page import metrics_for_html, per_judge_for_html, section_html
from calibration.report.reliability import plot_reliability, prepare_reliability
from calibration.report.tables import (
    plot_distributions,
    plot_metrics_table,
    plot_per_judge,
    prepare_distributions,
    prepare_metrics_table,
    prepare_per_judge,
)
from calibration.report.variants import (
    plot_ablations,
    plot_learning_curve,
    plot_targets,
    prepare_ablations,
    prepare_learning_curve,
    prepare_targets,
)
from rubric.jsonfile import jsonable

Section = tuple[Any, str]  # (the section's numbers, its HTML)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame as metrics.json holds it: one strict-JSON record per row."""
    return jsonable(frame.to_dict(orient="records"))


def reliability_section(predictions: pd.DataFrame, opts: Any, *, target: str, seed: int, out: Path) -> Section:
    """opts: the report's options (calibration/schema/commands_train.py ReportOptions)."""
    """Reliability diagrams of the target (one-vs-rest per value, and 'adheres' at report.adheres_threshold)."""
    arrays = method_arrays(predictions, REFERENCE)
    data = prepare_reliability(
        arrays["probs"],
        arrays["answers"],
        values=arrays["values"],
        threshold=opts.adheres_threshold,
        groups=arrays["groups"],
        seed=seed,
        n_boot=opts.smece_boot,
        band_bootstrap=opts.band_bootstrap,
        progress=True,
    )
    curves = [{k: v for k, v in c.items() if k != "diagram"} for c in data["curves"]]
    return curves, section_html(
        f"Reliability of the calibrated {target} distribution",
        "One-vs-rest for every answer value, and 'adheres' = P(answer &ge; threshold). Red: smoothed observed "
        "frequency against the predicted probability (relplot), grey band: its bootstrap 95% band, shaded: "
        "density of predictions. smECE (smooth expected calibration error, 0 = calibrated) with a 95% interval "
        "from resampling whole conversations.",
        ("reliability.png", encode_png(plot_reliability(data)[0], out / "reliability.png")),
        html_table(pd.DataFrame(curves)[["name", "n", "positives", "smece", "low", "high"]]),
    )


def agreement_section(
    predictions: pd.DataFrame, *, target: str, folds: int, seed: int, n_boot: int, n_perm: int, out: Path
) -> Section:
    """The metrics table: the calibrated model against the baselines, with intervals and permutation p."""
    table = prepare_metrics_table(predictions, seed=seed, n_boot=n_boot, n_perm=n_perm, progress=True)
    return table, section_html(
        "Agreement with the human judges: calibrated model against the baselines",
        f"Out-of-fold predictions of {escape(target)} pooled over {folds} folds (grouped by conversation). RMSE in "
        "answer units (lower is better); Pearson, Spearman, Kendall tau-b (higher is better). Brackets: bootstrap 95% "
        "intervals over conversations. p: paired permutation test (predictions swapped per conversation) of "
        f"each baseline against the calibrated model, two-sided; with {n_perm} swaps the smallest possible p "
        f"is {1 / (1 + n_perm):.2g}. The test treats the trained models as fixed: it measures the evidence over conversations, "
        "not over training seeds (the learning curve's repeats show the spread over seeds).",
        ("metrics.png", encode_png(plot_metrics_table(table)[0], out / "metrics.png")),
        html_table(metrics_for_html(table)),
    )


def distributions_section(predictions: pd.DataFrame, *, max_judges: int, out: Path) -> Section:
    distributions = prepare_distributions(predictions, max_judges=max_judges)
    return distributions, section_html(
        "Answer distributions per judge",
        "Each judge's observed answers (human), the distribution the calibrated model predicts for that judge "
        "(mean over the judge's items) and the raw LLM's distribution on the same items (the paper's Figure 2).",
        ("distributions.png", encode_png(plot_distributions(distributions)[0], out / "distributions.png")),
    )


def per_judge_section(predictions: pd.DataFrame, *, out: Path) -> Section:
    per_judge = prepare_per_judge(predictions)
    return per_judge, section_html(
        "Per-judge agreement",
        "RMSE of each method on each judge's judgments, the judge the calibrated model predicts worst on top; "
        "correlations are undefined (–) for a judge whose answers are all the same. The per-judge mean's "
        "within-judge correlation is negative by construction, not a bug: its prediction for a judge changes "
        "only between folds, and a fold holding that judge's higher answers leaves a lower mean to train on.",
        ("per_judge.png", encode_png(plot_per_judge(per_judge)[0], out / "per_judge.png")),
        html_table(per_judge_for_html(per_judge)),
    )


def ablations_section(
    ds,
    light,
    reference: pd.DataFrame,
    *,
    folds: int,
    seed: int,
    n_boot: int,
    n_perm: int,
    runner: dict[str, Any],
    out: Path,
) -> Section:
    ablations = prepare_ablations(ds, light, reference, folds=folds, seed=seed, n_boot=n_boot, n_perm=n_perm, **runner)
    shown = ablations[["variant"]].assign(
        **{m: interval_column(ablations, m) for m in METRICS},
        p_rmse=ablations["p_rmse"],
        p_pearson=ablations["p_pearson"],
    )
    return ablations, section_html(
        "Ablations (cross-validated)",
        f"The model without pretraining, without fine-tuning, without per-judge parameters, and without "
        f"each input question in turn (the paper's Table 2); ensemble of {light.ensemble}. p: permutation "
        "test against the full model (same folds and seeds, so even small consistent differences can be "
        "significant; read them with the intervals).",
        ("ablations.png", encode_png(plot_ablations(ablations)[0], out / "ablations.png")),
        html_table(shown),
    )


def targets_section(
    ds,
    light,
    reference: pd.DataFrame,
    *,
    target: str,
    folds: int,
    seed: int,
    n_boot: int,
    runner: dict[str, Any],
    out: Path,
) -> Section:
    targets = prepare_targets(ds, light, reuse={target: reference}, folds=folds, seed=seed, n_boot=n_boot, **runner)
    shown = targets[["question", "method", "n"]].assign(
        method=targets["method"].map(METHOD_LABELS),
        rmse=interval_column(targets, "rmse"),
        pearson=interval_column(targets, "pearson"),
    )
    return targets, section_html(
        "Every question as the target",
        "Cross-validated RMSE and Pearson when each rubric question is the training target in turn: the raw "
        "LLM's expected answer against the calibrated model (the paper's Table 3).",
        ("targets.png", encode_png(plot_targets(targets)[0], out / "targets.png")),
        html_table(shown),
    )


def learning_curve_section(
    ds,
    light,
    reference: pd.DataFrame,
    table: pd.DataFrame,
    opts: Any,
    *,
    folds: int,
    seed: int,
    runner: dict[str, Any],
    out: Path,
) -> Section:
    """Metrics against the fraction of training judgments, beside the per-judge mean with all of them."""
    repeats = opts.learning_curve.repeats
    curve = prepare_learning_curve(
        ds,
        light,
        fractions=list(opts.learning_curve.fractions),
        repeats=repeats,
        folds=folds,
        seed=seed,
        reuse=reference,
        **runner,
    )
    judge_mean = table[table["method"] == "judge_mean"].set_index("metric")["value"].to_dict()
    summary = curve.groupby("fraction")[["rmse", "pearson"]].agg(["mean", "std", "min", "max"])
    summary.columns = [f"{m} {s}" for m, s in summary.columns]
    return curve, section_html(
        "Learning curve",
        "Cross-validated metrics when each model sees only a random fraction of its training judgments "
        f"({repeats} repeats with different seeds: line = mean, band = min to max); "
        "dashed: the per-judge-mean baseline with all judgments (Appendix J of the paper).",
        (
            "learning_curve.png",
            encode_png(plot_learning_curve(curve, reference=judge_mean)[0], out / "learning_curve.png"),
        ),
        html_table(summary.reset_index()),
    )
