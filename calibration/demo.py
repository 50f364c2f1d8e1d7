"""`role-rubric demo`: the whole method offline, on the bundled role-adherence benchmark.

    role-rubric demo [data=DIR] [out=runs/demo] [judge=embedding] [limit=N] [folds=5]

1. gather: the offline embedding judge answers every rubric question about every assistant turn
   (SQLite cache in out/cache.sqlite, so a rerun asks nothing) -> out/dataset/ (a native dataset dir);
2. cross-validate the calibrator and the baselines (grouped by conversation) -> out/cv/;
3. train the final calibrator on every label -> out/model/ (use it with RoleAdherence or `role-rubric score`);
4. the reliability report (calibration/report/) -> out/report/report.html;
5. score every conversation with the final model through the API -> out/scores.csv;
6. print and write the summary -> out/summary.json: calibrated against raw-judge agreement with the human
   judges (RMSE, Pearson), smECE, per-role adherence, adherent-against-violation AUC per violation type.

The bundled data lives in the repository (data/role_adherence), not in the wheel: from a checkout (or an
editable install) it is found automatically; otherwise pass data=DIR.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from calibration.evaluation.adherence import item_adherence, oof_item_adherence, per_role, violation_aucs
from rubric.config.command_line import override
from rubric.errors import InputError
from rubric.files import atomic_to_csv
from rubric.jsonfile import write_json

if TYPE_CHECKING:
    from calibration.schema.commands_train import Demo

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

BENCHMARK = "role_adherence"
RAW = "expected_llm"  # the raw judge's expected answer: the uncalibrated baseline


def bundled_data() -> Path:
    """The bundled benchmark directory of a checkout (or an editable install); InputError if absent."""
    here = Path(__file__).resolve().parent.parent / "data" / BENCHMARK
    if (here / "conversations.jsonl").exists():
        return here
    raise InputError(
        f"the bundled benchmark data/{BENCHMARK} is not part of this installation (it ships with the "
        "repository, not the wheel).",
        fix=f"clone the repository and pass data=PATH/TO/data/{BENCHMARK} (or run from the checkout).",
    )


def prepare_dataset(
    data: str | Path | None, out: Path, judge: Any, *, limit: int | None = None, progress: bool = False
) -> tuple[Path, Any]:
    """Gather the judge's distributions for the benchmark into out/dataset (cached in out/cache.sqlite).
    Returns (dataset dir, GatherSummary)."""
    from rubric import a_gather, judge_config, load_conversations, load_rubric, write_outputs
    from rubric.judge.gather import run_sync

    src = bundled_data() if data is None else Path(data)
    for name in ("conversations.jsonl", "labels.csv", "rubric.yaml"):
        if not (src / name).exists():
            raise InputError(
                f"no {name} in the benchmark directory.",
                path=src,
                fix="pass data=DIR holding conversations.jsonl, labels.csv and rubric.yaml.",
            )
    conversations = load_conversations(src / "conversations.jsonl")
    if limit:
        conversations = conversations[: int(limit)]
    rubric = load_rubric(src / "rubric.yaml")
    judge = judge_config(judge)
    dataset = out / "dataset"
    dataset.mkdir(parents=True, exist_ok=True)
    # a_gather through run_sync: works from scripts and from notebooks (where an event loop is running)
    result = run_sync(a_gather(conversations, rubric, judge, cache=out / "cache.sqlite", progress=progress))
    write_outputs(result, dataset, rubric, conversations, judge)
    keep = {c.conversation_id for c in conversations}
    labels = pd.read_csv(src / "labels.csv", dtype=str, keep_default_na=False)
    atomic_to_csv(labels[labels["conversation_id"].isin(keep)], dataset / "labels.csv")
    if (src / "turn_designs.csv").exists():
        designs = pd.read_csv(src / "turn_designs.csv", dtype={"conversation_id": str, "turn": str})
        atomic_to_csv(designs[designs["conversation_id"].isin(keep)], dataset / "turn_designs.csv")
    return dataset, result.summary


def write_report(cfg: Demo, dataset: Path, cv_dir: Path, out: Path) -> tuple[dict | None, str]:
    """The reliability report via calibration.report; degrade to the reliability diagram alone (or nothing)
    if the report module cannot run here. Returns (report metrics or None, a one-line status)."""
    from calibration.schema.commands_train import DemoReport, Report, ReportOptions

    # the report's own defaults for the keys the demo does not set (its schema: calibration/schema); its
    # trimmed options, in one process on torch's default threads
    trimmed = {f.name: getattr(cfg.report, f.name) for f in dataclasses.fields(DemoReport)}
    report_cfg = Report(
        data=str(dataset),
        out=out,
        cv=cv_dir,
        folds=cfg.folds,
        seed=cfg.seed,
        target=cfg.target,
        settings=cfg.settings,
        report=ReportOptions(**trimmed, torch_threads=None, workers=1),
    )
    try:
        from calibration.report import run_report

        return run_report(report_cfg), f"report: {out / 'report.html'}"
    except InputError:
        raise
    except Exception as exc:  # the report is an extra: keep the demo's results if it fails
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    try:
        from calibration.report import method_arrays, read_cv_folder
        from calibration.report.reliability import plot_reliability, prepare_reliability
        from rubric import load_rubric

        target = load_rubric(dataset / "rubric.yaml").target if cfg.target is None else cfg.target
        predictions, _ = read_cv_folder(cv_dir, target)
        arrays = method_arrays(predictions)
        data = prepare_reliability(
            arrays["probs"],
            arrays["answers"],
            values=arrays["values"],
            threshold=cfg.report.adheres_threshold,
            groups=arrays["groups"],
            seed=cfg.seed,
            n_boot=cfg.report.smece_boot,
            band_bootstrap=cfg.report.band_bootstrap,
        )
        out.mkdir(parents=True, exist_ok=True)
        fig, _ = plot_reliability(data)
        fig.savefig(out / "reliability.png", dpi=90, metadata={"Software": None})
        curves = [{k: v for k, v in c.items() if k != "diagram"} for c in data["curves"]]
        return {"reliability": curves}, f"report: full report failed ({reason}); wrote {out / 'reliability.png'}"
    except Exception as exc2:  # noqa: BLE001
        return None, f"report: skipped ({reason}; reliability fallback: {type(exc2).__name__})"


def run_demo(cfg: Demo) -> dict[str, Any]:
    """CLI: `role-rubric demo [data=DIR] [out=runs/demo] [limit=N] [folds=5] [report.*=..] [train.*=..]`."""
    import torch

    threads = torch.get_num_threads()
    # The network's tensors are tiny: one thread is several times faster than many on a busy 2-core machine.
    torch.set_num_threads(max(1, cfg.threads))
    try:
        return _run_demo(cfg)
    finally:
        torch.set_num_threads(threads)


def _run_demo(cfg: Demo) -> dict[str, Any]:
    """The steps of the module docstring, each timed; the summary printed and written at the end."""
    from calibration.data.dataset import load_dataset
    from calibration.evaluation.crossval import format_table
    from rubric.judge.identity import stand_in_note

    start = time.perf_counter()
    out = cfg.out
    out.mkdir(parents=True, exist_ok=True)
    settings = cfg.settings
    folds, seed, progress = cfg.folds, cfg.seed, cfg.progress
    timings: dict[str, float] = {}
    judge = cfg.judge

    with _timed(timings, "gather"):
        dataset, gathered = prepare_dataset(cfg.data, out, judge, limit=cfg.limit, progress=progress)
    log.info(f"demo: gather: {gathered.line()}")
    with _timed(timings, "cross-validation"):
        ds = load_dataset(dataset, target=cfg.target)
        cv, cv_dir = _cross_validate(ds, settings, out, folds=folds, seed=seed, progress=progress)
    with _timed(timings, "final model"):
        model_dir = _final_model(ds, settings, dataset, out, seed=seed, progress=progress)
    with _timed(timings, "report"):
        report, report_line = write_report(cfg, dataset, cv_dir, out / "report")
    with _timed(timings, "scoring"):
        adheres_at = _score_through_the_api(model_dir, judge, dataset, out)
    with _timed(timings, "per-turn out-of-fold scores"):
        roles, aucs = _per_turn_scores(ds, settings, cv, dataset, out, folds=folds, seed=seed, adheres_at=adheres_at)
    smece = (
        []
        if not report
        else [{k: c[k] for k in ("name", "smece", "low", "high", "n")} for c in report.get("reliability", [])]
    )
    summary = {
        "data": cfg.data or str(bundled_data()),
        "items": len(ds.items),
        "label_rows": len(ds.label_item),
        "target_rows": int((ds.answers[:, ds.target_index] >= 0).sum()),  # the pairs the agreement is measured on
        "judges": len(ds.judges),
        "target": ds.rubric.target,
        "adheres_at": adheres_at,
        "folds": folds,
        "seed": seed,
        "agreement": {m: cv.metrics[m] for m in cv.metrics},
        "smece": smece,
        "per_role": roles.to_dict(orient="records"),
        "violation_auc": aucs,
        "gather": {"cached": gathered.cached, "answered": gathered.answered},
        "timings_s": timings,
        "wall_s": time.perf_counter() - start,
    }
    write_json(out / "summary.json", summary, newline=True)
    _print_summary(summary, cv.metrics, roles, aucs, format_table)
    note = stand_in_note(judge.model)
    if note:  # beside the scores, not only in a footnote
        log.info(f"\ndemo: note: {note}.")
    wall = time.perf_counter() - start
    log.info("demo: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + f"; total {wall:.1f}s")
    _say_what_was_written(out, dataset, cv_dir, model_dir, report_line, report_written=bool(report))
    return summary


@contextlib.contextmanager
def _timed(timings: dict[str, float], step: str) -> Iterator[None]:
    """The seconds the block took, as timings[step] (the summary's timings_s, in the order of the steps)."""
    tick = time.perf_counter()
    yield
    timings[step] = time.perf_counter() - tick


def _cross_validate(ds: Any, settings: Any, out: Path, *, folds: int, seed: int, progress: bool) -> tuple[Any, Path]:
    """Step 2: the calibrator and the baselines cross-validated -> out/cv/ (its models kept for step 6)."""
    from calibration.evaluation.crossval import cross_validate, write_cv_folder

    cv = cross_validate(ds, settings, folds=folds, seed=seed, progress=progress, keep_models=True)
    cv_dir = out / "cv"
    cv_dir.mkdir(exist_ok=True)
    write_cv_folder(cv_dir, ds, settings, cv, folds=folds, seed=seed)
    return cv, cv_dir


def _final_model(ds: Any, settings: Any, dataset: Path, out: Path, *, seed: int, progress: bool) -> Path:
    """Step 3: the final calibrator on every label -> out/model/ (replacing an earlier one)."""
    from calibration.model.ensemble import train_ensemble
    from calibration.model.files import save_model
    from rubric.judge.identity import dataset_judge_identity

    net, spec, plan = train_ensemble(ds, settings, seed=seed, progress=progress)
    model_dir = out / "model"
    if model_dir.exists():
        shutil.rmtree(model_dir)
    save_model(
        model_dir,
        net,
        ds,
        spec,
        settings,
        history=plan.history,
        recalibration=plan.recalibration,
        judge=dataset_judge_identity(dataset),
        data=dataset,
    )
    return model_dir


def _score_through_the_api(model_dir: Path, judge: Any, dataset: Path, out: Path) -> float:
    """Step 5: every conversation scored by the final model through RoleAdherence -> out/scores.csv and
    out/scores_turns.csv; returns the adherence cut it used (adheres_at)."""
    from calibration.api import RoleAdherence
    from calibration.api.frames import results_frames
    from rubric import load_conversations

    metric = RoleAdherence(model_dir, judge=judge, cache=out / "cache.sqlite")
    scored = load_conversations(dataset / "conversations.jsonl")
    conv_frame, turn_frame = results_frames(metric.measure_many(scored), scored)
    atomic_to_csv(conv_frame, out / "scores.csv")
    atomic_to_csv(turn_frame, out / "scores_turns.csv")
    return metric.adheres_at


def _per_turn_scores(
    ds: Any, settings: Any, cv: Any, dataset: Path, out: Path, *, folds: int, seed: int, adheres_at: float
) -> tuple[pd.DataFrame, dict]:
    """Step 6: per-turn adherence out of fold (the cross-validation's own models, on the same folds: nothing
    is trained again) -> out/item_adherence.csv; returns adherence per role and, where the data has turn
    designs, the AUC of adherent turns against each violation type."""
    designs_path = dataset / "turn_designs.csv"
    designs = pd.read_csv(designs_path, dtype={"conversation_id": str, "turn": str}) if designs_path.exists() else None
    oof = oof_item_adherence(ds, settings, folds=folds, seed=seed, adheres_at=adheres_at, trained=cv.members)
    human = item_adherence(cv.predictions, "calibrated", adheres_at=adheres_at)[["conversation_id", "turn", "human"]]
    items = oof.rename(columns={"adherence": "calibrated", "raw": "raw judge"}).merge(
        human, on=["conversation_id", "turn"], how="left"
    )
    atomic_to_csv(items, out / "item_adherence.csv")
    roles = per_role(items, designs, dataset / "conversations.jsonl")
    aucs = {}
    if designs is not None:
        for name in ("calibrated", "raw judge"):
            aucs[name] = violation_aucs(items.rename(columns={name: "adherence"}), designs)
    return roles, aucs


def _say_what_was_written(
    out: Path, dataset: Path, cv_dir: Path, model_dir: Path, report_line: str, *, report_written: bool
) -> None:
    log.info(
        f"demo: wrote {dataset} (llm.csv, labels.csv, rubric.yaml, conversations.jsonl), cache {out / 'cache.sqlite'}"
    )
    log.info(f"demo: wrote {cv_dir / 'predictions.csv'} and {cv_dir / 'metrics.json'} (out-of-fold)")
    log.info(
        f"demo: wrote {model_dir} (try: role-rubric score conversations=FILE {override('calibrator', model_dir)} "
        "out=scores.csv)"
    )
    log.info(f"demo: {report_line}")
    if report_written:
        log.info(
            f"demo: open {out / 'report' / 'report.html'} in a browser: the verdict on top, every turn with its "
            "text at the bottom (section 'Every turn'), worst disagreement with the humans first"
        )
    log.info(f"demo: wrote {out / 'scores.csv'} and {out / 'scores_turns.csv'} (final model, via RoleAdherence)")
    log.info(f"demo: wrote {out / 'item_adherence.csv'} (out-of-fold per-turn adherence) and {out / 'summary.json'}")


def _print_summary(summary: dict, metrics: dict, roles: pd.DataFrame, aucs: dict, format_table) -> None:
    skipped = summary["label_rows"] - summary["target_rows"]
    log.info(
        f"\ndemo: {summary['items']} turns, {summary['label_rows']} (turn, human judge) pairs, {summary['judges']} "
        f"judges; {summary['folds']}-fold cross-validation grouped by conversation, target {summary['target']!r}"
        + (
            f" ({summary['target_rows']} pairs answer it; in the other {skipped} the reviewer answered other "
            "questions only)"
            if skipped
            else ""
        )
    )
    cal, raw = metrics["calibrated"], metrics[RAW]
    log.info(
        f"\nAgreement with the human judges (out of fold, {cal['n']} judgments of {summary['target']!r}, one per "
        "pair that answers it):"
    )
    log.info(f"  calibrated  RMSE {cal['rmse']:.3f}  Pearson {cal['pearson']:.3f}")
    log.info(f"  raw judge   RMSE {raw['rmse']:.3f}  Pearson {raw['pearson']:.3f}   (expected answer of the judge)")
    log.info("\n" + format_table(metrics))
    if summary["smece"]:
        log.info("\nReliability of the calibrated distribution (smECE, 95% interval over conversations):")
        for c in summary["smece"]:
            log.info(f"  {c['name']:<14} {c['smece']:.3f}  [{c['low']:.3f}, {c['high']:.3f}]")
    log.info(
        f"\nPer role: mean adherence P({summary['target']} >= {summary['adheres_at']:g}) (out of fold; "
        "calibrated = mixture of all training judges) and the human rate of answers at or above it:"
    )
    log.info(roles.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if aucs:
        log.info("\nAUC, adherent turns against each violation type (per-turn adherence, out of fold):")
        kinds = list(next(iter(aucs.values())))
        log.info(f"  {'violation':<28}" + "".join(f"{name:>12}" for name in aucs) + f"{'n':>10}")
        for kind in kinds:
            first = next(iter(aucs.values()))[kind]
            log.info(
                f"  {kind:<28}"
                + "".join(f"{aucs[name][kind]['auc']:12.3f}" for name in aucs)
                + f"{first['n_adherent']:>5}/{first['n_violation']:<4}"
            )
    log.info("")
