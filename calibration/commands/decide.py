"""`role-rubric decide`: adheres / violates / escalate per turn at a guaranteed disagreement risk.

Its keys: calibration.schema.commands_release `Decide` (`role-rubric decide --help`);
the work: calibration.decide `run_decide` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_release import Decide as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `decide` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.decide import run_decide

    return run_decide(cfg)
