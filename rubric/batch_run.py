"""Kept so that `from rubric.batch_run import gather_batch` (the API page's old path) still works: the stage
is rubric/batch/run.py, also exported as `rubric.gather_batch` and `rubric.batch.gather_batch`."""

from rubric.batch.run import gather_batch

__all__ = ["gather_batch"]
