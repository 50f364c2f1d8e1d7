"""`role-rubric score`: score a conversations file per conversation -> CSV.

Its keys: calibration.schema.commands_release `Score` (`role-rubric score --help`);
the work: calibration.score `run_score` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_release import Score as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `score` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.score import run_score

    return run_score(cfg)
