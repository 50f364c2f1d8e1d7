"""`role-rubric evaluate`: score predictions against human labels -> metrics.json.

Its keys: calibration.schema.commands_train `Evaluate` (`role-rubric evaluate --help`); the library it calls:
calibration.evaluation.metrics (read_predictions, target_labels, evaluate_predictions).
"""

from __future__ import annotations

import logging

from calibration.schema.commands_train import Evaluate as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> dict:
    """CLI: `role-rubric evaluate predictions=FILE data=DIR out=metrics.json [target=Q]`. Imports inside, so
    that `role-rubric --help` loads no stage."""
    from calibration.data.dataset import load_dataset
    from calibration.evaluation.metrics import evaluate_predictions, read_predictions, target_labels
    from rubric.jsonfile import write_json

    ds = load_dataset(cfg.data, target=cfg.target, unmatched_labels=cfg.unmatched_labels)
    predictions = read_predictions(cfg.predictions, ds.rubric)
    metrics = evaluate_predictions(predictions, target_labels(ds), ds.rubric.target)
    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, metrics)
    log.info(
        "evaluate: " + "  ".join(f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}" for k, v in metrics.items())
    )
    log.info(f"evaluate: wrote {out}")
    return metrics
