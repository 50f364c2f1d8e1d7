"""Rubrics, conversations, prompt rendering, judge backends and the gather stage.

Public API (imported lazily, so `import rubric.errors` stays instant)::

    from rubric import gather, load_conversations, load_rubric, JudgeConfig
    result = gather(conversations, rubric, {"backend": "embedding"})   # -> GatherResult(llm=DataFrame, ...)
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "InputError": "rubric.errors",
    "Rubric": "rubric.schema",
    "Question": "rubric.schema",
    "Option": "rubric.schema",
    "load_rubric": "rubric.schema",
    "rubric_from_dict": "rubric.schema",
    "save_rubric": "rubric.schema",
    "format_value": "rubric.schema",
    "Conversation": "rubric.conversations",
    "Turn": "rubric.conversations",
    "Item": "rubric.conversations",
    "load_conversations": "rubric.conversations",
    "conversations_from_records": "rubric.conversations",
    "save_conversations": "rubric.conversations",
    "iter_items": "rubric.conversations",
    "Prompt": "rubric.prompts",
    "render_prompt": "rubric.prompts",
    "Distribution": "rubric.extraction",
    "TokenLogprob": "rubric.extraction",
    "from_top_logprobs": "rubric.extraction",
    "JudgeConfig": "rubric.backends",
    "RequestCache": "rubric.cache",
    "gather": "rubric.gather",
    "a_gather": "rubric.gather",
    "make_backend": "rubric.gather",
    "run_gather": "rubric.gather",
    "write_outputs": "rubric.gather",
    "GatherResult": "rubric.gather",
    "GatherSummary": "rubric.gather",
    "LLM_COLUMNS": "rubric.gather",
    "judge_config": "rubric.gather",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'rubric' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
