"""Rubrics, conversations, prompt rendering, judge backends and the gather stage.

Public API (the openai client is imported only when an LLM judge is built)::

    from rubric import gather, load_conversations, load_rubric, JudgeConfig
    result = gather(conversations, rubric, {"backend": "embedding"})   # -> GatherResult(llm=DataFrame, ...)
    gather_batch(conversations, rubric, judge, out="runs/x")           # the same through batch files
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# name -> the module that defines it, imported on first use: `import rubric` (and `role-rubric --help`)
# loads neither pandas nor the HTTP clients
_EXPORTS = {
    "LLM_COLUMNS": "rubric.outputs",
    "BatchSettings": "rubric.batch.lines",
    "Conversation": "rubric.conversations",
    "Distribution": "rubric.extraction",
    "GatherResult": "rubric.outputs",
    "GatherSummary": "rubric.outputs",
    "InputError": "rubric.errors",
    "Item": "rubric.conversations",
    "JudgeConfig": "rubric.judge_settings",
    "Option": "rubric.schema",
    "Prompt": "rubric.prompts",
    "Question": "rubric.schema",
    "RequestCache": "rubric.cache",
    "Rubric": "rubric.schema",
    "TokenLogprob": "rubric.extraction",
    "Turn": "rubric.conversations",
    "a_gather": "rubric.gather",
    "conversations_from_records": "rubric.conversations",
    "format_value": "rubric.schema",
    "from_top_logprobs": "rubric.extraction",
    "gather": "rubric.gather",
    "gather_batch": "rubric.batch.run",
    "iter_items": "rubric.conversations",
    "judge_config": "rubric.judge_settings",
    "load_conversations": "rubric.conversations",
    "load_rubric": "rubric.schema",
    "make_backend": "rubric.gather",
    "render_prompt": "rubric.prompts",
    "rubric_from_config": "rubric.gather",
    "rubric_from_dict": "rubric.schema",
    "run_gather": "rubric.gather",
    "save_conversations": "rubric.conversations",
    "save_rubric": "rubric.schema",
    "write_outputs": "rubric.outputs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # found once
        return value
    raise AttributeError(f"module 'rubric' has no attribute {name!r}")


class _Package(types.ModuleType):
    """`rubric.gather` is the function (`from rubric import gather`), though rubric/gather.py, the module that
    defines it, has the same name: the import system's binding of that module to the package is not kept."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
