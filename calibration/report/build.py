"""`role-rubric report` (`run_report`): cross-validate, or reuse a cv folder, then write every section of the
report page, its PNGs and metrics.json.

`_run_report` is the orchestration: the main cross-validation, then each section in page order (a function
per section in report/sections.py and its sibling modules returns the section's numbers and its HTML), then
the page from the templates (report/templating.py) and metrics.json.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib.pyplot as plt
import pandas as pd

from calibration.data.union import dataset_labels
from calibration.evaluation.cv_predictions import REFERENCE, method_rows, previous_for_report, read_cv_folder
from calibration.evaluation.releases import metrics_by_dataset
from calibration.evaluation.reviewers import agreement_from_predictions
from calibration.evaluation.sizes import check_folds, reliability_warnings, size_warnings
from calibration.pages.templating import Markup, escape, render_page
from calibration.report.decisions import decision_sections
from calibration.report.page import section_html
from calibration.report.pool import prefetching_pool, report_threads, run_cvs
from calibration.report.release import raw_adherence, release_section, release_summary
from calibration.report.reviewers import reviewer_section
from calibration.report.sections import (
    ablations_section,
    agreement_section,
    distributions_section,
    learning_curve_section,
    per_judge_section,
    records,
    reliability_section,
    targets_section,
)
from calibration.report.shipped import as_shipped, shipped_html, shipped_model, shipped_shift, shipped_verdict
from calibration.report.turns import turn_sections
from calibration.report.turns_html import TURNS_CSS
from calibration.report.variants import ablation_variants
from calibration.report.verdict import VERDICT_CSS, prepare_verdict, verdict_html
from rubric.files import atomic_write_text
from rubric.jsonfile import write_json
from rubric.notices import warn_data

if TYPE_CHECKING:
    from calibration.schema.commands_train import Report

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run_report(cfg: Report) -> dict[str, Any]:
    """CLI: `role-rubric report data=DIR out=DIR [cv=DIR] [target=Q] [report.*=..] [network.*=..] [train.*=..]`.
    cfg: the command's checked object (calibration/schema/commands_train.py `Report`; from Python:
    `command_config("report", [...])`).

    Writes out/report.html (self-contained, images embedded), out/*.png and out/metrics.json; returns
    the metrics.json content.
    """
    with report_threads(cfg.report.torch_threads), contextlib.ExitStack() as stack:
        return _run_report(cfg, stack)


@dataclasses.dataclass
class _Run:
    """What every section of one report shares."""

    cfg: Report
    out: Path
    data: Any  # calibration.data.union.TrainingData
    ds: Any
    settings: Any
    light: Any  # the settings of the ablations, targets and learning curve (maybe a smaller ensemble)
    folds: int
    seed: int
    fold_seed: int
    previous: pd.DataFrame | None = None
    """Several directories: the last one's rows predicted by the network trained without it (the deploy
    choice weighs adapting against it; calibration/evaluation/releases.py)."""

    @property
    def target(self) -> str:
        return self.ds.rubric.target


def _prepare(cfg: Report, shipped: dict[str, Any] | None = None) -> tuple[_Run, pd.DataFrame | None]:
    """The data, the settings and, with cv=DIR, that folder's predictions (whose settings, folds and seeds
    the report then uses); shipped: the model= directory's kind and settings (calibration/report/shipped.py)."""
    from calibration.data.union import qualified, qualified_predictions, training_data_of

    out = cfg.out
    out.mkdir(parents=True, exist_ok=True)
    settings, folds, seed, fold_seed = cfg.settings, cfg.folds, cfg.seed, cfg.fold_seed
    if shipped is not None and shipped["settings"] is not None:
        settings = shipped["settings"]  # the network as it was trained
    data = training_data_of(cfg)
    ds = qualified(data.ds)  # several directories: conversation ids prefixed by their directory, "new/c001"
    predictions = previous = None
    if cfg.cv:
        predictions, info = read_cv_folder(cfg.cv, ds.rubric.target)
        predictions = qualified_predictions(predictions)
        previous = previous_for_report(
            cfg.cv, ds.rubric.target, info, predictions, dataset_labels([s.path for s in data.sources])
        )
        # The ablations and the learning curve are compared with these predictions: use the cv run's setup.
        if "settings" in info:
            saved = dict(info["settings"])
            saved["drop_questions"] = tuple(saved.get("drop_questions") or ())
            settings = dataclasses.replace(settings, **saved)
        folds, seed = int(info.get("folds", folds)), int(info.get("seed", seed))
        fold_seed = int(info.get("fold_seed", fold_seed))
        log.info(f"report: reusing {cfg.cv / 'predictions.csv'} ({folds} folds, seed {seed})")
    # Ablations, targets and learning curve may use a smaller ensemble to stay fast; the full model they are
    # compared with is then recomputed with the same ensemble, so every comparison is like for like.
    ensemble = cfg.report.ensemble
    light = settings if ensemble is None else dataclasses.replace(settings, ensemble=ensemble)
    return _Run(cfg, out, data, ds, settings, light, folds, seed, fold_seed, previous), predictions


def _variant_jobs(run: _Run) -> list[tuple]:
    """The cross-validations of the ablations, targets and learning curve, in the order they are asked for
    (a process pool starts them while the main sections are computed)."""
    from calibration.data.union import retargeted

    opts, ds, light = run.cfg.report, run.ds, run.light
    common = (run.folds, run.fold_seed)
    threads = opts.torch_threads
    jobs = []
    if light != run.settings:
        jobs.append((ds, light, *common, run.seed, threads))
    if opts.ablations:
        jobs += [(ds, v, *common, run.seed, threads) for _, v in ablation_variants(light, ds.rubric.ids, run.target)]
    if opts.targets:
        jobs += [(retargeted(ds, q), light, *common, run.seed, threads) for q in ds.rubric.ids if q != run.target]
    points = [(float(f), r) for f in opts.learning_curve.fractions for r in range(opts.learning_curve.repeats)]
    jobs += [
        (ds, dataclasses.replace(light, train_fraction=f), *common, run.seed + r, threads)
        for f, r in points
        if not (f >= 1 and r == 0)
    ]
    return jobs


def _run_report(cfg: Report, stack: contextlib.ExitStack) -> dict[str, Any]:
    from calibration.evaluation.crossval import cross_validate

    start = time.perf_counter()
    shipped = shipped_model(cfg.model, cfg.data, allow_judge_mismatch=cfg.allow_judge_mismatch) if cfg.model else None
    if shipped is not None and shipped["kind"] != "network":  # the variants retrain the network only
        opts = cfg.report
        curve = dataclasses.replace(opts.learning_curve, repeats=0)
        opts = dataclasses.replace(opts, ablations=False, targets=False, learning_curve=curve)
        cfg = dataclasses.replace(cfg, report=opts)
    run, predictions = _prepare(cfg, shipped)
    jobs = _variant_jobs(run)
    workers = cfg.report.workers
    pool = None
    if jobs and workers > 1:
        pool = prefetching_pool(workers, jobs)
        stack.callback(pool.shutdown, cancel_futures=True)
    if predictions is None:
        check_folds(run.ds, run.folds)
        log.info(f"report: cross-validating the calibrated model and baselines ({run.folds} folds, seed {run.seed})")
        result = cross_validate(
            run.ds, run.settings, folds=run.folds, seed=run.seed, fold_seed=run.fold_seed, progress=True
        )
        predictions, run.previous = result.predictions, result.previous
    if shipped is not None:
        predictions = as_shipped(predictions, shipped["kind"])
    timings = {"main cv": time.perf_counter() - start}
    main_calibrated = method_rows(predictions, REFERENCE)
    results: dict[str, Any] = {
        "target": run.target,
        "data": run.data.summary(),
        "folds": run.folds,
        "fold_seed": run.fold_seed,
        "seed": run.seed,
        "settings": run.settings.to_dict(),
        "variant_ensemble": run.light.ensemble,
    }
    with plt.style.context("default"):
        html_sections, skipped, drilldown, table = _main_sections(run, predictions, main_calibrated, results, timings)
        html_sections += _variant_sections(run, pool, main_calibrated, table, results, timings)
        tick = time.perf_counter()
        threshold = cfg.report.adheres_threshold
        decided, decision_html = decision_sections(
            main_calibrated, threshold, cfg.report.active_labelling, seed=run.seed, out=run.out
        )
        results.update(decided)
        html_sections += decision_html
        if threshold is not None:
            timings["decisions"] = time.perf_counter() - tick
    stubs = [section_html(title[0].upper() + title[1:], escape(f"Skipped: {title}."), None) for title in skipped]
    shipped_line = []
    if shipped is not None:  # the verdict of the model= directory, and one line on it under the verdict
        results["verdict"] = shipped_verdict(results["verdict"], shipped)
        results["shift"] = shipped_shift(shipped, run.data)
        shipped_line = [shipped_html(shipped, results["shift"])]
    sections = [
        verdict_html(results["verdict"]),
        *shipped_line,
        reviewer_section(results["reviewers"]),
        *html_sections,
        *stubs,
        drilldown,
    ]
    page = render_page(
        "report.html.j2",
        target=run.target,
        intro=_intro(run, main_calibrated),
        sections=sections,
        extra_css=Markup(VERDICT_CSS + TURNS_CSS),
    )
    atomic_write_text(run.out / "report.html", page)
    write_json(run.out / "metrics.json", results, newline=True)
    total = time.perf_counter() - start
    log.info("report: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; total {total:.1f}s")
    log.info(f"report: wrote {run.out / 'report.html'}, {run.out / 'metrics.json'} and the PNG files")
    return results


def _intro(run: _Run, main_calibrated: pd.DataFrame) -> Markup:
    return Markup(
        "Data <code>{}</code>, target {}, {} judgments by {} judges on {} conversations; {}-fold cross-validation "
        "grouped by conversation, seed {}, ensemble of {}."
    ).format(
        run.data.summary(),
        run.target,
        len(main_calibrated),
        main_calibrated["judge_id"].nunique(),
        main_calibrated["conversation_id"].nunique(),
        run.folds,
        run.seed,
        run.settings.ensemble,
    )


def _main_sections(
    run: _Run,
    predictions: pd.DataFrame,
    main_calibrated: pd.DataFrame,
    results: dict[str, Any],
    timings: dict[str, float],
) -> tuple[list[str], list[str], str, pd.DataFrame]:
    """Reliability, agreement, distributions, per-judge, turns, release, verdict and reviewers: their numbers
    into `results`; returns (their HTML sections, the skipped sections, the turn drill-down, the metrics
    table)."""
    opts, seed, out = run.cfg.report, run.seed, run.out
    tick = time.perf_counter()
    # A line per stage, so that a log (where no bar is drawn) shows what the next seconds are spent on.
    log.info(f"report: reliability diagrams ({opts.smece_boot} resamples per panel) ...")
    results["reliability"], reliability_html = reliability_section(
        predictions, opts, target=run.target, seed=seed, out=out
    )
    timings["reliability"] = time.perf_counter() - tick
    tick = time.perf_counter()
    n_boot, n_perm = opts.n_boot, opts.n_perm
    log.info(f"report: metrics of every method ({n_boot} bootstrap resamples, {n_perm} permutations) ...")
    table, agreement_html = agreement_section(
        predictions, target=run.target, folds=run.folds, seed=seed, n_boot=n_boot, n_perm=n_perm, out=out
    )
    results["metrics"] = records(table)
    results["distributions"], distributions_html = distributions_section(
        predictions, max_judges=opts.max_judges, out=out
    )
    per_judge, per_judge_html = per_judge_section(predictions, out=out)
    results["per_judge"] = records(per_judge)
    html_sections = [reliability_html, agreement_html, distributions_html, per_judge_html]
    timings["tables"] = time.perf_counter() - tick

    tick = time.perf_counter()
    threshold = opts.adheres_threshold
    turn_results, turn_html_sections, drilldown = turn_sections(
        [s.path for s in run.data.sources], run.ds, predictions, adheres_at=threshold
    )
    results.update(turn_results)
    html_sections += turn_html_sections
    if threshold is not None:  # what `role-rubric estimate` would give on a release like this data
        results["release"] = release_summary(
            predictions, raw_adherence(run.ds, float(threshold)), adheres_at=float(threshold), seed=seed
        )
        html_sections.append(release_section(results["release"]))
    skipped = _skipped(opts)
    size_notes = size_warnings(run.ds, run.folds) + reliability_warnings(results["reliability"])
    warn_data("report", size_notes)
    results["verdict"] = prepare_verdict(
        table,
        results["reliability"],
        judge=run.data.judge,
        size={
            "judgments": len(main_calibrated),
            "judges": int(main_calibrated["judge_id"].nunique()),
            "turns": int(main_calibrated[["conversation_id", "turn"]].drop_duplicates().shape[0]),
            "conversations": int(main_calibrated["conversation_id"].nunique()),
            "folds": run.folds,
        },
        skipped=skipped,
        warnings=size_notes,
        data=run.cfg.data,
        target=run.cfg.target,
        weights=run.cfg.weights,
        by_dataset=metrics_by_dataset(
            predictions, dataset_labels([s.path for s in run.data.sources]), previous=run.previous
        ),
    )
    # beside the verdict: can the calibrated judge replace a reviewer? (calibration/evaluation/reviewers.py)
    results["reviewers"] = agreement_from_predictions(run.ds, main_calibrated, run.cfg.epsilon)
    timings["turns and verdict"] = time.perf_counter() - tick
    return html_sections, skipped, drilldown, table


def _skipped(opts: Any) -> list[str]:
    """The sections this configuration leaves out, each with the setting that would bring it back."""
    skipped = [
        f"{title} (report.{key}{'.repeats=0' if key == 'learning_curve' else '=false'})"
        for title, key, on in (
            ("ablations", "ablations", opts.ablations),
            ("every question as the target", "targets", opts.targets),
            ("learning curve", "learning_curve", opts.learning_curve.repeats),
        )
        if not on
    ]
    if opts.adheres_threshold is None:
        skipped.append("the 'adheres' reliability panel (report.adheres_threshold=null)")
    return skipped


def _variant_sections(
    run: _Run,
    pool: Any,
    main_calibrated: pd.DataFrame,
    table: pd.DataFrame,
    results: dict[str, Any],
    timings: dict[str, float],
) -> list[str]:
    """Ablations, every question as the target and the learning curve, each against the same reference."""
    opts, light = run.cfg.report, run.light
    reference = main_calibrated
    runner = {"executor": pool, "threads": opts.torch_threads, "progress": True, "fold_seed": run.fold_seed}
    common: dict[str, Any] = {"folds": run.folds, "seed": run.seed, "runner": runner, "out": run.out}
    html_sections = []
    if light != run.settings and (opts.ablations or opts.targets or opts.learning_curve.repeats):
        tick = time.perf_counter()
        jobs = [(f"full model with an ensemble of {light.ensemble}", run.ds, light, run.seed)]
        reference = run_cvs(jobs, folds=run.folds, **runner)[0]
        timings["variant reference cv"] = time.perf_counter() - tick
    # (metrics.json key, timings key, asked for, the section: its frame and its html), in the page's order
    sections = (
        (
            "ablations",
            "ablations",
            opts.ablations,
            lambda: ablations_section(run.ds, light, reference, n_boot=opts.n_boot, n_perm=opts.n_perm, **common),
        ),
        (
            "targets",
            "targets",
            opts.targets,
            lambda: targets_section(run.ds, light, reference, target=run.target, n_boot=opts.n_boot, **common),
        ),
        (
            "learning_curve",
            "learning curve",
            opts.learning_curve.repeats,
            lambda: learning_curve_section(run.ds, light, reference, table, opts, **common),
        ),
    )
    for key, timed, asked, section in sections:
        if asked:
            tick = time.perf_counter()
            frame, html = section()
            results[key] = records(frame)
            html_sections.append(html)
            timings[timed] = time.perf_counter() - tick
    return html_sections
