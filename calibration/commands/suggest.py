"""`role-rubric suggest`: rank unlabelled (turn, reviewer) pairs by what a label would teach -> CSV.

Its keys: calibration.schema.commands_release `Suggest` (`role-rubric suggest --help`);
the work: calibration.suggest `run_suggest` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_release import Suggest as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `suggest` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.suggest import run_suggest

    return run_suggest(cfg)
