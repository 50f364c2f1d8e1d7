"""`role-rubric demo`: offline end-to-end run on the bundled role-adherence benchmark.

Its keys: calibration.schema.commands_train `Demo` (`role-rubric demo --help`);
the work: calibration.demo `run_demo` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_train import Demo as Schema

__all__ = ["Schema", "run"]


def run(cfg: Schema) -> Any:
    """Run `demo` on its checked object (calibration.cli builds it and locks its outputs)."""
    from calibration.demo import run_demo

    return run_demo(cfg)
