"""`role-rubric train`: train the calibration network (or the linear / ordinal model) on a dataset dir ->
model dir.

Its keys: calibration.schema.commands_train `Train` (`role-rubric train --help`); the model files:
calibration.model.files (save_model, load_model).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from calibration.schema.commands_train import Train as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric train data=DIR|[DIR1,DIR2] [weights=[1,3]] out=MODEL_DIR [model=network|linear|ordinal]
    [target=Q] [network.*=..] [train.*=..]`. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.data.union import training_data_of
    from calibration.model.ensemble import train_ensemble
    from calibration.model.files import save_linear_model, save_model
    from calibration.model.linear_calibrator import train_linear
    from calibration.model.provenance import training_records
    from calibration.model.shift import roles_of
    from rubric.files import out_lock
    from rubric.judge.identity import describe

    settings, model = cfg.settings, cfg.model
    data = training_data_of(cfg)
    ds, judge = data.ds, data.judge
    roles = roles_of([s.path for s in data.sources])
    start = time.perf_counter()
    with out_lock(cfg.out) as out:  # one training per model folder; taken before the long work
        if model == "network":
            net, spec, plan = train_ensemble(ds, settings, seed=cfg.seed, progress=True)
            save_model(
                out,
                net,
                ds,
                spec,
                settings,
                history=plan.history,
                recalibration=plan.recalibration,
                judge=judge,
                trained_on=training_records(data),
                roles=roles,
            )
            what = f"{settings.ensemble} models"
        else:  # the simple models cv reports beside the network (calibration/model/linear_calibrator.py)
            calibrator, spec, record = train_linear(ds, model, seed=cfg.seed)
            save_linear_model(
                out,
                calibrator,
                ds,
                spec,
                record,
                model=model,
                judge=judge,
                trained_on=training_records(data),
                roles=roles,
            )
            what = f"the {model} model (L2 {record['l2']:g}, chosen by {record['inner_folds']}-fold inner cv)"
    log.info(
        f"train: {what} on {len(ds.label_item)} label rows, {len(ds.judges)} judges, "
        f"target {ds.rubric.target!r} in {time.perf_counter() - start:.1f}s"
    )
    if len(data.sources) > 1:
        log.info(f"train: trained on {data.summary()}")
        if model == "network":  # on a release unlike the old one the network can lose to the linear model
            log.info(
                "train: for a new release, deploy the model `role-rubric cv` with the same data= names: it "
                "chooses on the last directory's conversations (docs/how-to/adapt.md)"
            )
    log.info(f"train: trained on the distributions of the {describe(judge)}")
    log.info(f"train: wrote model to {out}")
    return out
