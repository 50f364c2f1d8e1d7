"""Rubrics, conversations, prompt rendering, judge backends and the gather stage.

Public API (the openai client is imported only when an LLM judge is built)::

    from rubric import gather, load_conversations, load_rubric, JudgeConfig
    result = gather(conversations, rubric, {"backend": "embedding"})   # -> GatherResult(llm=DataFrame, ...)
    gather_batch(conversations, rubric, judge, out="runs/x")           # the same through batch files
"""

from __future__ import annotations

from rubric.batch.lines import BatchSettings
from rubric.batch.run import gather_batch
from rubric.cache import RequestCache
from rubric.conversations import (
    Conversation,
    Item,
    Turn,
    conversations_from_records,
    iter_items,
    load_conversations,
    save_conversations,
)
from rubric.errors import InputError
from rubric.extraction import Distribution, TokenLogprob, from_top_logprobs
from rubric.gather import a_gather, gather, make_backend, rubric_from_config, run_gather
from rubric.judge_settings import JudgeConfig, judge_config
from rubric.outputs import LLM_COLUMNS, GatherResult, GatherSummary, write_outputs
from rubric.prompts import Prompt, render_prompt
from rubric.schema import Option, Question, Rubric, format_value, load_rubric, rubric_from_dict, save_rubric

__all__ = [
    "LLM_COLUMNS",
    "BatchSettings",
    "Conversation",
    "Distribution",
    "GatherResult",
    "GatherSummary",
    "InputError",
    "Item",
    "JudgeConfig",
    "Option",
    "Prompt",
    "Question",
    "RequestCache",
    "Rubric",
    "TokenLogprob",
    "Turn",
    "a_gather",
    "conversations_from_records",
    "format_value",
    "from_top_logprobs",
    "gather",
    "gather_batch",
    "iter_items",
    "judge_config",
    "load_conversations",
    "load_rubric",
    "make_backend",
    "render_prompt",
    "rubric_from_config",
    "rubric_from_dict",
    "run_gather",
    "save_conversations",
    "save_rubric",
    "write_outputs",
]
