"""`role-rubric report`: reliability diagrams, baselines, ablations -> report.html.

Its keys: calibration.schema.commands_train `Report` (`role-rubric report --help`);
the work: calibration.report.build `run_report` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import Report as Schema

__all__ = ["Schema", "run"]


def run(cfg: Schema) -> Any:
    """Run `report` on its checked object (calibration.cli builds it and locks its outputs)."""
    from calibration.report.build import run_report

    return run_report(cfg)
