"""`role-rubric predict`: predict per-judge / population answers -> predictions.csv.

Its keys: calibration.schema.commands_train `Predict` (`role-rubric predict --help`);
the work: calibration.model.predict `run_predict` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import Predict as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `predict` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.model.predict import run_predict

    return run_predict(cfg)
