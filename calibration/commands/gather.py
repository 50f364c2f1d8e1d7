"""`role-rubric gather`: ask the LLM judge every rubric question about every turn -> llm.csv.

Its keys: calibration.schema.commands_data `Gather` (`role-rubric gather --help`);
the work: rubric.gather `run_gather` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import Gather as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `gather` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from rubric.gather import run_gather

    return run_gather(cfg)
