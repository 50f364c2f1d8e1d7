"""`role-rubric search`: Optuna search of hyperparameters by inner cross-validation.

Its keys: calibration.schema.commands_train `Search` (`role-rubric search --help`);
the work: calibration.evaluation.search `run_search` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import Search as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `search` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.evaluation.search import run_search

    return run_search(cfg)
