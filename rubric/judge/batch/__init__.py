"""Gathering through batch files (`role-rubric gather mode=batch`), in four modules that import downwards:

- `lines`: the batch file format: one request line per (item, question), custom ids, splitting the files,
  reading result lines into distributions (`BatchSettings`, `split_lines`);
- `api`: the OpenAI Batch API through the `openai` client (upload, create, poll, download);
- `job`: one job's record in OUT/batch/state.json, the files it planned and the results it read;
- `run`: the stage that drives a job and writes the gather's outputs (`gather_batch`).

The names below are importable from `rubric.judge.batch` too, loaded on first use (the stage needs pandas; the
settings, which the command's schema names, do not).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "BatchSettings": "rubric.judge.batch.lines",
    "split_lines": "rubric.judge.batch.lines",
    "gather_batch": "rubric.judge.batch.run",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    from rubric.plugins import lazy_attribute  # here, so that importing the package imports nothing more

    return lazy_attribute(__name__, _EXPORTS, name)
