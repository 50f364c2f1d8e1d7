"""`role-rubric predict`: predict per-judge / population answers -> predictions.csv.

Its keys: calibration.schema.commands_train `Predict` (`role-rubric predict --help`); the library:
calibration.model.predict (which pairs, the predictions table) and calibration.model.files (the model).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_train import Predict as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric predict model=DIR data=DIR out=predictions.csv [judges=labelled|population|[ids]]`.
    Imports inside, so that `role-rubric --help` loads no stage."""
    import numpy as np
    import torch

    from calibration.data.dataset import load_dataset
    from calibration.model.files import load_model
    from calibration.model.predict import prediction_pairs, predictions_frame
    from calibration.model.shift import handle_shift, roles_of

    model = load_model(cfg.model)
    rubric = model.check_data(
        cfg.data, command="predict", model_dir=cfg.model, allow_judge_mismatch=cfg.allow_judge_mismatch
    )
    ds = load_dataset(cfg.data, rubric=rubric, require_labels=False)
    shift = handle_shift(model.record.shift_summary(), ds, roles_of([cfg.data]), cfg.on_shift, "predict")
    X = torch.from_numpy(ds.features(model.spec))
    item, judge_names = prediction_pairs(ds, cfg.judges, cfg.data)
    judge = np.array([model.judge_index(j) for j in judge_names], dtype=np.int64)
    unseen = sorted({j for j in judge_names if j and model.judge_index(j) < 0})
    if unseen:
        log.info(
            f"predict: {len(unseen)} judge(s) not seen in training, predicted by the population model: {unseen[:5]}"
        )
    frame = predictions_frame(ds.items.iloc[item], judge_names, model.proba(X, item, judge), ds.rubric)
    return _write(cfg, frame, shift, len(item), len(ds.rubric.ids))


def _write(cfg: Schema, frame: Any, shift: dict, pairs: int, questions: int) -> Path:
    """predictions.csv and, beside it, the shift check's block (calibration/model/shift.py)."""
    from rubric.files import atomic_to_csv
    from rubric.jsonfile import write_json

    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_to_csv(frame, out)
    shift_out = out.with_name(out.stem + "_shift.json")
    write_json(shift_out, {"shift": shift})
    log.info(f"predict: {len(frame)} rows ({pairs} item-judge pairs x {questions} questions)")
    log.info(f"predict: wrote {out} and {shift_out} (shift check)")
    return out
