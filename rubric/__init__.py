"""Rubrics, conversations, the judge client and the gather stage.

Packages, each importing only the ones listed before it (tests/test_layout.py holds the order; docs/design.md
draws it): the foundations at the top level of rubric/ (errors, files, jsonfile, ids, notices, progress,
extras, lifetime, secrets, plugins; the rubric schema and the conversations), `config` (what a config value
must be; printing one for the shell), `transport` (JSON over HTTP for the connectors), `servers` (the judges
role-rubric runs itself: fake and local), `judge` (the judge client: settings, prompts, backends, reading
answers, cache, workers, batch files and the gather stage), `traces` (decoding traces into conversations) and
`scorers` (reference-based scorers over the judge's encoder).

Public API (the openai client is imported only when an LLM judge is built)::

    from rubric import gather, load_conversations, load_rubric, JudgeConfig
    result = gather(conversations, rubric, {"backend": "embedding"})   # -> GatherResult(llm=DataFrame, ...)
    gather_batch(conversations, rubric, judge, out="runs/x")           # the same through batch files
"""

from __future__ import annotations

from typing import Any

# name -> the module that defines it, imported on first use: `import rubric` (and `role-rubric --help`)
# loads neither pandas nor the HTTP clients
_EXPORTS = {
    "LLM_COLUMNS": "rubric.judge.outputs",
    "BatchSettings": "rubric.judge.batch.lines",
    "Conversation": "rubric.conversations",
    "Distribution": "rubric.judge.extraction",
    "GatherResult": "rubric.judge.outputs",
    "GatherSummary": "rubric.judge.outputs",
    "InputError": "rubric.errors",
    "Item": "rubric.conversations",
    "JudgeConfig": "rubric.judge.settings",
    "Option": "rubric.schema",
    "Prompt": "rubric.judge.prompts",
    "Question": "rubric.schema",
    "RequestCache": "rubric.judge.cache",
    "Rubric": "rubric.schema",
    "TokenLogprob": "rubric.judge.extraction",
    "Turn": "rubric.conversations",
    "a_gather": "rubric.judge.gather",
    "conversations_from_records": "rubric.conversations",
    "format_value": "rubric.schema",
    "from_top_logprobs": "rubric.judge.extraction",
    "gather": "rubric.judge.gather",
    "gather_batch": "rubric.judge.batch.run",
    "iter_items": "rubric.conversations",
    "judge_config": "rubric.judge.settings",
    "load_conversations": "rubric.conversations",
    "load_rubric": "rubric.schema",
    "make_backend": "rubric.judge.gather",
    "render_prompt": "rubric.judge.prompts",
    "rubric_from_config": "rubric.judge.gather",
    "rubric_from_dict": "rubric.schema",
    "run_gather": "rubric.judge.gather",
    "save_conversations": "rubric.conversations",
    "save_rubric": "rubric.schema",
    "write_outputs": "rubric.judge.outputs",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    from rubric.plugins import lazy_attribute  # here, so that importing the package imports nothing more

    value = lazy_attribute(__name__, _EXPORTS, name)
    globals()[name] = value  # found once
    return value
