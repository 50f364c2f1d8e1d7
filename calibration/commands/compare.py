"""`role-rubric compare`: reference-based scorers and judges on one scale: AUC table -> compare.json/html.

Its keys: calibration.schema.commands_data `Compare` (`role-rubric compare --help`);
the work: calibration.compare.stage `run_compare` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import Compare as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `compare` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.compare.stage import run_compare

    return run_compare(cfg)
