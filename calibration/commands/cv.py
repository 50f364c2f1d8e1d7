"""`role-rubric cv`: cross-validate the calibrator and the baselines -> predictions + metrics.

Its keys: calibration.schema.commands_train `CrossValidate` (`role-rubric cv --help`); the library it calls:
calibration.evaluation.crossval (cross_validate, nested_cross_validate, write_cv_folder, the tables),
calibration.evaluation.releases (several directories) and calibration.evaluation.reviewers.
"""

from __future__ import annotations

import logging
from typing import Any

from calibration.schema.commands_train import CrossValidate as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Any:
    """CLI: `role-rubric cv data=DIR folds=5 out=DIR [seed=0] [target=Q] [network.*=..] [train.*=..]`: the
    `CVResult`. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.data.union import data_paths, dataset_labels, training_data_of
    from calibration.evaluation.crossval import cross_validate, item_groups
    from calibration.evaluation.releases import metrics_by_dataset
    from calibration.evaluation.sizes import check_folds, print_warnings, size_warnings
    from rubric.files import out_lock

    settings = cfg.settings
    data = training_data_of(cfg)
    ds = data.ds
    check_folds(ds, cfg.folds)
    print_warnings("cv", size_warnings(ds, cfg.folds))
    with out_lock(cfg.out) as out:  # one run per folder, taken before the long work
        groups = item_groups(ds, cfg.data, cfg.group)
        result = cross_validate(
            ds,
            settings,
            folds=cfg.folds,
            seed=cfg.seed,
            fold_seed=cfg.fold_seed,
            progress=True,
            groups=groups,
        )
        chosen = _add_nested(cfg, ds, settings, groups, result) if cfg.nested else None
        by_dataset = metrics_by_dataset(
            result.predictions, dataset_labels(data_paths(cfg.data)), previous=result.previous
        )
        reviewers = _write(cfg, out, ds, settings, result, chosen, by_dataset, data.judge)
    _log_summary(cfg, ds, result, reviewers, by_dataset)
    log.info(f"cv: wrote {out / 'predictions.csv'}, {out / 'metrics.json'} and {out / 'reviewers.json'}")
    return result


def _add_nested(cfg: Schema, ds: Any, settings: Any, groups: Any, result: Any) -> Any:
    """nested=true: the network with its settings searched inside each outer fold, added to `result` as the
    method calibrated_nested; the settings chosen per fold."""
    import numpy as np
    import pandas as pd

    from calibration.evaluation.crossval import nested_cross_validate, tabulate_predictions
    from calibration.evaluation.releases import item_folds

    nested, chosen = nested_cross_validate(
        ds,
        settings,
        cfg.search.space,
        trials=cfg.search.trials,
        inner_folds=cfg.search.inner_folds,
        folds=cfg.folds,
        seed=cfg.seed,
        fold_seed=cfg.fold_seed,
        progress=True,
        groups=groups,
    )
    rows = np.flatnonzero(ds.answers[:, ds.target_index] >= 0)
    fold_of_row = item_folds(ds, groups, cfg.folds, cfg.fold_seed)[ds.label_item]
    frame, metrics = tabulate_predictions(ds, rows, fold_of_row, {"calibrated_nested": nested})
    result.predictions = pd.concat([result.predictions, frame], ignore_index=True)
    result.metrics.update(metrics)
    return chosen


def _write(
    cfg: Schema, out: Any, ds: Any, settings: Any, result: Any, chosen: Any, by_dataset: Any, judge: dict | None
) -> dict:
    """The cv folder: predictions.csv, metrics.json (the judge of its distributions, as train records it, None:
    not recorded; several directories: each one's metrics, and which rows chose the model to deploy) and reviewers.json (can the calibrated judge replace a reviewer?,
    calibration/evaluation/reviewers.py): the reviewers block."""
    from calibration.evaluation.crossval import write_cv_folder
    from calibration.evaluation.releases import deploy_basis
    from calibration.evaluation.reviewers import cv_reviewer_agreement
    from rubric.jsonfile import write_json

    extra = {"metrics_by_dataset": by_dataset, "deploy_basis": deploy_basis(by_dataset)} if by_dataset else {}
    extra["judge"] = judge  # suggest ... cv=DIR checks it against the model's (calibration/release/cv_spread.py)
    write_cv_folder(
        out,
        ds,
        settings,
        result,
        folds=cfg.folds,
        seed=cfg.seed,
        fold_seed=cfg.fold_seed,
        nested_choices=chosen,
        group=cfg.group,
        extra=extra,
    )
    reviewers = cv_reviewer_agreement(ds, result, cfg.epsilon)
    write_json(out / "reviewers.json", reviewers)
    return reviewers


def _log_summary(cfg: Schema, ds: Any, result: Any, reviewers: dict, by_dataset: Any) -> None:
    """The metrics table, the reviewers' verdicts, the run, each directory's metrics, and which model wins."""
    from calibration.evaluation.crossval import format_table, winner_line
    from calibration.evaluation.releases import format_by_dataset

    log.info(format_table(result.metrics, result.skipped))
    for block in reviewers["questions"].values():
        log.info(f"cv: {block['verdict']}")
    log.info(f"cv: {cfg.folds}-fold, target {ds.rubric.target!r}, {result.seconds:.1f}s")
    if by_dataset:
        log.info(format_by_dataset(by_dataset))
    log.info(winner_line(result.metrics, cfg.data, cfg.target, cfg.weights, by_dataset))
