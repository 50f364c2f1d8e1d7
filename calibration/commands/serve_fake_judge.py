"""`role-rubric serve-fake-judge`: a local OpenAI-protocol judge for trying the pipeline (judge=fake).

Its keys: calibration.schema.commands_data `ServeFakeJudge` (`role-rubric serve-fake-judge --help`);
the work: rubric.servers.fake `run_serve` (imported when the command runs, so that `role-rubric --help` loads no stage).
"""

from __future__ import annotations

from typing import Any

from calibration.schema.commands_data import ServeFakeJudge as Schema

__all__ = ["Schema", "run"]


def run(cfg: Schema) -> Any:
    """Run `serve-fake-judge` on its checked object (calibration.cli builds it)."""
    from rubric.servers.fake import run_serve

    return run_serve(cfg.port, cfg.latency, cfg.background)
