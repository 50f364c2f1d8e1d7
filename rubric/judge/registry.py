"""The judge backends by name, on the registry every kind of plug-in shares (rubric/plugins.py): `judge.backend`
(conf/judge/*.yaml) picks one as `source=` picks a trace source and `target=` a publish target.

Each backend is a class built as `Backend(cfg, log=log)` from the judge's `JudgeConfig`; nothing is imported
until a gather asks for it by name, and a backend's optional extra is checked before its import, so a missing
one is one line with the install command before any work. A llama.cpp model served by role-rubric itself
(`base_url: local`) is the chat or completions backend over that server (rubric/servers/local.py), not a
backend of its own. Adding a backend is one module with its class plus one `Plugin` line here.

>>> BACKENDS.names()
['chat', 'completions', 'embedding']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rubric.plugins import Plugin, Registry

__all__ = ["BACKENDS"]

BACKENDS: Registry[Callable[..., Any]] = Registry(
    "judge backend",
    [
        Plugin(
            "chat",
            "rubric.judge.backends",
            "OpenAIBackend",
            summary="any OpenAI-compatible endpoint's /v1/chat/completions (OpenAI, vLLM, TGI, Ollama, llama.cpp)",
        ),
        Plugin(
            "completions",
            "rubric.judge.backends",
            "OpenAIBackend",
            summary='the same endpoints\' /v1/completions: a prompt ending in "Answer:"',
        ),
        Plugin(
            "embedding",
            "rubric.judge.embedding",
            "EmbeddingBackend",
            extra="embedding",
            summary="offline, from sentence embeddings (all-MiniLM-L6-v2): no network, no key, a weak stand-in",
        ),
    ],
)
