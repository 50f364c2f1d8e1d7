"""The old path of rubric.batch.run: its names, with a DeprecationWarning (import rubric.batch.run instead; nothing
in role-rubric imports this one)."""

import warnings

from rubric.batch.run import gather_batch

__all__ = ["gather_batch"]

warnings.warn("rubric.batch_run is deprecated: import rubric.batch.run", DeprecationWarning, stacklevel=2)
