"""`role-rubric label-studio`: Label Studio tasks and labelling config from a dataset -> files or a project.

Its keys: calibration.schema.commands_data `LabelStudio` (`role-rubric label-studio --help`);
the work: calibration.labelling.commands `run_label_studio` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import LabelStudio as Schema

__all__ = ["Schema", "run"]


def run(cfg: Any) -> Any:
    """Run `label-studio` on a composed and checked config (calibration.cli composes, checks and locks its outputs)."""
    from calibration.labelling.commands import run_label_studio

    return run_label_studio(cfg)
