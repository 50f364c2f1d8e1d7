"""`role-rubric report` (`run_report`): cross-validate, or reuse a cv folder, then write every section of the
report page, its PNGs and metrics.json."""

from __future__ import annotations

import contextlib
import dataclasses
import html
import json
import time
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd

from calibration.evaluation.cv_predictions import (
    METHOD_LABELS,
    REFERENCE,
    method_arrays,
    method_rows,
    read_cv_folder,
)
from calibration.evaluation.metrics import jsonable
from calibration.evaluation.significance import METRICS
from calibration.evaluation.sizes import check_folds, print_warnings, reliability_warnings, size_warnings
from calibration.report.decisions import decision_sections
from calibration.report.page import (
    PAGE,
    encode_png,
    html_table,
    interval_column,
    metrics_for_html,
    per_judge_for_html,
    section_html,
)
from calibration.report.pool import prefetching_pool, report_threads, run_cvs
from calibration.report.release import raw_adherence, release_section, release_summary
from calibration.report.reliability import plot_reliability, prepare_reliability
from calibration.report.tables import (
    plot_distributions,
    plot_metrics_table,
    plot_per_judge,
    prepare_distributions,
    prepare_metrics_table,
    prepare_per_judge,
)
from calibration.report.turns import TURNS_CSS, turn_sections
from calibration.report.variants import (
    ablation_variants,
    plot_ablations,
    plot_learning_curve,
    plot_targets,
    prepare_ablations,
    prepare_learning_curve,
    prepare_targets,
)
from calibration.report.shipped import as_shipped, shipped_html, shipped_model, shipped_verdict
from calibration.report.verdict import VERDICT_CSS, prepare_verdict, verdict_html
from rubric.files import atomic_write_text


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return jsonable(frame.to_dict(orient="records"))


def run_report(cfg: Any) -> dict[str, Any]:
    """CLI: `role-rubric report data=DIR out=DIR [cv=DIR] [target=Q] [report.*=..] [network.*=..] [train.*=..]`.

    Writes out/report.html (self-contained, images embedded), out/*.png and out/metrics.json; returns
    the metrics.json content.
    """
    with report_threads(cfg.report.get("torch_threads")), contextlib.ExitStack() as stack:
        return _run_report(cfg, stack)


def _run_report(cfg: Any, stack: contextlib.ExitStack) -> dict[str, Any]:
    from calibration.data.union import (
        qualified,
        qualified_predictions,
        retargeted,
        training_data_from_cfg,
    )
    from calibration.evaluation.crossval import cross_validate
    from calibration.model.settings import Settings

    start = time.perf_counter()
    opts = cfg.report
    shipped = shipped_model(cfg.model) if cfg.get("model") else None
    if shipped is not None and shipped["kind"] != "network":  # the variants retrain the network only
        from omegaconf import OmegaConf

        opts = OmegaConf.merge(opts, {"ablations": False, "targets": False, "learning_curve": {"repeats": 0}})
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    settings, folds, seed = Settings.from_cfg(cfg), int(cfg.folds), int(cfg.seed)
    fold_seed = int(cfg.get("fold_seed") or 0)
    if shipped is not None and shipped["settings"] is not None:
        settings = shipped["settings"]  # the network as it was trained
    data = training_data_from_cfg(cfg)
    ds = qualified(data.ds)  # several directories: conversation ids prefixed by their directory, "new/c001"
    target = ds.rubric.target
    if cfg.get("cv"):
        predictions, info = read_cv_folder(cfg.cv, target)
        predictions = qualified_predictions(predictions)
        # The ablations and the learning curve are compared with these predictions: use the cv run's setup.
        if "settings" in info:
            saved = dict(info["settings"])
            saved["drop_questions"] = tuple(saved.get("drop_questions") or ())
            settings = dataclasses.replace(settings, **saved)
        folds, seed = int(info.get("folds", folds)), int(info.get("seed", seed))
        fold_seed = int(info.get("fold_seed", fold_seed))
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
        variant_jobs.append((ds, light, folds, fold_seed, seed, threads))
    if opts.ablations:
        variant_jobs += [
            (ds, v, folds, fold_seed, seed, threads) for _, v in ablation_variants(light, ds.rubric.ids, target)
        ]
    if opts.targets:
        variant_jobs += [
            (retargeted(ds, q), light, folds, fold_seed, seed, threads)
            for q in ds.rubric.ids
            if q != target
        ]
    variant_jobs += [
        (ds, dataclasses.replace(light, train_fraction=f), folds, fold_seed, seed + r, threads)
        for f, r in curve_points
        if not (f >= 1 and r == 0)
    ]
    workers = int(opts.get("workers") or 1)
    pool = None
    if variant_jobs and workers > 1:
        pool = prefetching_pool(workers, variant_jobs)
        stack.callback(pool.shutdown, cancel_futures=True)
    if not cfg.get("cv"):
        check_folds(ds, folds)
        print(f"report: cross-validating the calibrated model and baselines ({folds} folds, seed {seed})")
        predictions = cross_validate(ds, settings, folds=folds, seed=seed, fold_seed=fold_seed, progress=True).predictions
    if shipped is not None:
        predictions = as_shipped(predictions, shipped["kind"])
    timings = {"main cv": time.perf_counter() - start}
    main_calibrated = method_rows(predictions, REFERENCE)

    results: dict[str, Any] = {
        "target": target,
        "data": data.summary(),
        "folds": folds,
        "fold_seed": fold_seed,
        "seed": seed,
        "settings": settings.to_dict(),
        "variant_ensemble": light.ensemble,
    }
    html_sections = []
    with plt.style.context("default"):
        tick = time.perf_counter()
        # A line per stage, so that a log (where no bar is drawn) shows what the next seconds are spent on.
        print(f"report: reliability diagrams ({int(opts.smece_boot)} resamples per panel) ...", flush=True)
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
            progress=True,
        )
        results["reliability"] = [
            {k: v for k, v in c.items() if k != "diagram"} for c in reliability["curves"]
        ]
        html_sections.append(
            section_html(
                f"Reliability of the calibrated {target} distribution",
                "One-vs-rest for every answer value, and 'adheres' = P(answer &ge; threshold). Red: smoothed observed "
                "frequency against the predicted probability (relplot), grey band: its bootstrap 95% band, shaded: "
                "density of predictions. smECE (smooth expected calibration error, 0 = calibrated) with a 95% interval "
                "from resampling whole conversations.",
                ("reliability.png", encode_png(plot_reliability(reliability)[0], out / "reliability.png")),
                html_table(
                    pd.DataFrame(results["reliability"])[["name", "n", "positives", "smece", "low", "high"]]
                ),
            )
        )
        timings["reliability"] = time.perf_counter() - tick

        tick = time.perf_counter()
        print(f"report: metrics of every method ({n_boot} bootstrap resamples, {n_perm} permutations) ...", flush=True)
        table = prepare_metrics_table(predictions, seed=seed, n_boot=n_boot, n_perm=n_perm, progress=True)
        results["metrics"] = _records(table)
        html_sections.append(
            section_html(
                "Agreement with the human judges: calibrated model against the baselines",
                f"Out-of-fold predictions of {target} pooled over {folds} folds (grouped by conversation). RMSE in answer "
                "units (lower is better); Pearson, Spearman, Kendall tau-b (higher is better). Brackets: bootstrap 95% "
                "intervals over conversations. p: paired permutation test (predictions swapped per conversation) of "
                f"each baseline against the calibrated model, two-sided; with {n_perm} swaps the smallest possible p "
                f"is {1 / (1 + n_perm):.2g}. The test treats the trained models as fixed: it measures the evidence over conversations, "
                "not over training seeds (the learning curve's repeats show the spread over seeds).",
                ("metrics.png", encode_png(plot_metrics_table(table)[0], out / "metrics.png")),
                html_table(metrics_for_html(table)),
            )
        )
        distributions = prepare_distributions(predictions, max_judges=int(opts.max_judges))
        results["distributions"] = distributions
        html_sections.append(
            section_html(
                "Answer distributions per judge",
                "Each judge's observed answers (human), the distribution the calibrated model predicts for that judge "
                "(mean over the judge's items) and the raw LLM's distribution on the same items (the paper's Figure 2).",
                (
                    "distributions.png",
                    encode_png(plot_distributions(distributions)[0], out / "distributions.png"),
                ),
            )
        )
        per_judge = prepare_per_judge(predictions)
        results["per_judge"] = _records(per_judge)
        html_sections.append(
            section_html(
                "Per-judge agreement",
                "RMSE of each method on each judge's judgments, the judge the calibrated model predicts worst on top; "
                "correlations are undefined (–) for a judge whose answers are all the same. The per-judge mean's "
                "within-judge correlation is negative by construction, not a bug: its prediction for a judge changes "
                "only between folds, and a fold holding that judge's higher answers leaves a lower mean to train on.",
                ("per_judge.png", encode_png(plot_per_judge(per_judge)[0], out / "per_judge.png")),
                html_table(per_judge_for_html(per_judge)),
            )
        )
        timings["tables"] = time.perf_counter() - tick

        tick = time.perf_counter()
        turn_results, turn_html_sections, drilldown = turn_sections([s.path for s in data.sources], ds, predictions,
                                                                     adheres_at=threshold)
        results.update(turn_results)
        html_sections += turn_html_sections
        if threshold is not None:  # what `role-rubric estimate` would give on a release like this data
            results["release"] = release_summary(predictions, raw_adherence(ds, float(threshold)),
                                                 adheres_at=float(threshold), seed=seed)
            html_sections.append(release_section(results["release"]))
        skipped = [
            f"{title} (report.{key}{'.repeats=0' if key == 'learning_curve' else '=false'})"
            for title, key, on in (
                ("ablations", "ablations", opts.ablations),
                ("every question as the target", "targets", opts.targets),
                ("learning curve", "learning_curve", opts.learning_curve.repeats),
            )
            if not on
        ]
        if threshold is None:
            skipped.append("the 'adheres' reliability panel (report.adheres_threshold=null)")
        size_notes = size_warnings(ds, folds) + reliability_warnings(results["reliability"])
        print_warnings("report", size_notes)
        results["verdict"] = prepare_verdict(
            table,
            results["reliability"],
            judge=data.judge,
            size={
                "judgments": len(main_calibrated),
                "judges": int(main_calibrated["judge_id"].nunique()),
                "turns": int(main_calibrated[["conversation_id", "turn"]].drop_duplicates().shape[0]),
                "conversations": int(main_calibrated["conversation_id"].nunique()),
                "folds": folds,
            },
            skipped=skipped,
            warnings=size_notes,
            data=cfg.data,
            target=cfg.get("target"),
            weights=cfg.get("weights"),
        )
        if shipped is not None:
            results["verdict"] = shipped_verdict(results["verdict"], shipped)
            html_sections.insert(0, shipped_html(shipped))
        timings["turns and verdict"] = time.perf_counter() - tick

        reference = main_calibrated
        variants = bool(opts.ablations or opts.targets or opts.learning_curve.repeats)
        runner = {"executor": pool, "threads": opts.get("torch_threads"), "progress": True, "fold_seed": fold_seed}
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
                **{m: interval_column(ablations, m) for m in METRICS},
                p_rmse=ablations["p_rmse"],
                p_pearson=ablations["p_pearson"],
            )
            html_sections.append(
                section_html(
                    "Ablations (cross-validated)",
                    f"The model without pretraining, without fine-tuning, without per-judge parameters, and without "
                    f"each input question in turn (the paper's Table 2); ensemble of {light.ensemble}. p: permutation "
                    "test against the full model (same folds and seeds, so even small consistent differences can be "
                    "significant; read them with the intervals).",
                    ("ablations.png", encode_png(plot_ablations(ablations)[0], out / "ablations.png")),
                    html_table(shown),
                )
            )
            timings["ablations"] = time.perf_counter() - tick
        if opts.targets:
            tick = time.perf_counter()
            targets = prepare_targets(
                ds,
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
                rmse=interval_column(targets, "rmse"),
                pearson=interval_column(targets, "pearson"),
            )
            html_sections.append(
                section_html(
                    "Every question as the target",
                    "Cross-validated RMSE and Pearson when each rubric question is the training target in turn: the raw "
                    "LLM's expected answer against the calibrated model (the paper's Table 3).",
                    ("targets.png", encode_png(plot_targets(targets)[0], out / "targets.png")),
                    html_table(shown),
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
                section_html(
                    "Learning curve",
                    "Cross-validated metrics when each model sees only a random fraction of its training judgments "
                    f"({int(opts.learning_curve.repeats)} repeats with different seeds: line = mean, band = min to max); "
                    "dashed: the per-judge-mean baseline with all judgments (Appendix J of the paper).",
                    (
                        "learning_curve.png",
                        encode_png(
                            plot_learning_curve(curve, reference=judge_mean)[0], out / "learning_curve.png"
                        ),
                    ),
                    html_table(summary.reset_index()),
                )
            )
            timings["learning curve"] = time.perf_counter() - tick
        tick = time.perf_counter()
        decided, decision_html = decision_sections(main_calibrated, threshold, opts.get("active_labelling"), seed=seed,
                                                   out=out)
        results.update(decided)
        html_sections += decision_html
        if threshold is not None:
            timings["decisions"] = time.perf_counter() - tick

    intro = (
        f"Data <code>{html.escape(data.summary())}</code>, target {html.escape(target)}, "
        f"{len(main_calibrated)} judgments by {main_calibrated['judge_id'].nunique()} judges on "
        f"{main_calibrated['conversation_id'].nunique()} conversations; {folds}-fold cross-validation "
        f"grouped by conversation, seed {seed}, ensemble of {settings.ensemble}."
    )
    stubs = [section_html(title[0].upper() + title[1:], f"Skipped: {title}.", None) for title in skipped]
    sections = [verdict_html(results["verdict"]), *html_sections, *stubs, drilldown]
    page = PAGE.format(title=html.escape(target), intro=intro, sections="\n".join(sections))
    atomic_write_text(out / "report.html", page.replace("</style>", VERDICT_CSS + TURNS_CSS + "</style>", 1))
    atomic_write_text(out / "metrics.json", json.dumps(jsonable(results), indent=2) + "\n")
    total = time.perf_counter() - start
    print("report: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; total {total:.1f}s")
    print(f"report: wrote {out / 'report.html'}, {out / 'metrics.json'} and the PNG files")
    return results
