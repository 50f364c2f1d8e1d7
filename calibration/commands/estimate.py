"""`role-rubric estimate`: a release's adherence rate with valid intervals, a comparison and a CI gate.

Its keys: calibration.schema.commands_release `Estimate` (`role-rubric estimate --help`);
the work: calibration.release.estimate `run_estimate` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_release import Estimate as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `estimate` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.release.estimate import run_estimate

    return run_estimate(cfg)
