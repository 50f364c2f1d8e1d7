"""`role-rubric evaluate`: score predictions against human labels -> metrics.json.

Its keys: calibration.schema.commands_train `Evaluate` (`role-rubric evaluate --help`);
the work: calibration.evaluation.metrics `run_evaluate` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import Evaluate as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `evaluate` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.evaluation.metrics import run_evaluate

    return run_evaluate(cfg)
