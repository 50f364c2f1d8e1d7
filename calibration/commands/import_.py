"""`role-rubric import`: labels from Label Studio or a filled sheet, or LLM-Rubric files -> a native dataset dir.

Its keys: calibration.schema.commands_data `Import` (`role-rubric import --help`);
the work: calibration.labelling.commands `run_import` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import Import as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `import` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.labelling.commands import run_import

    return run_import(cfg)
