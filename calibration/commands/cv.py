"""`role-rubric cv`: cross-validate the calibrator and the baselines -> predictions + metrics.

Its keys: calibration.schema.commands_train `CrossValidate` (`role-rubric cv --help`);
the work: calibration.evaluation.crossval `run_cv` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import CrossValidate as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `cv` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.evaluation.crossval import run_cv

    return run_cv(cfg)
