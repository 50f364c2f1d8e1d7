"""Gathering through batch files (`role-rubric gather mode=batch`), in four modules that import downwards:

- `lines`: the batch file format: one request line per (item, question), custom ids, splitting the files,
  reading result lines into distributions (`BatchSettings`, `split_lines`);
- `api`: the OpenAI Batch API through the `openai` client (upload, create, poll, download);
- `job`: one job's record in OUT/batch/state.json, the files it planned and the results it read;
- `run`: the stage that drives a job and writes the gather's outputs (`gather_batch`).

The names below are importable from `rubric.batch` as they were when it was one module.
"""

from rubric.batch.lines import BatchSettings, split_lines
from rubric.batch.run import gather_batch

__all__ = ["BatchSettings", "gather_batch", "split_lines"]
