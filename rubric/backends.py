"""Judge backends for any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, Ollama, llama.cpp server).

Requests go out through rubric/http.py (aiohttp with the `openai` client's URL and headers, or the
`openai` client itself) with no retries of their own: retries happen here, so they can be counted,
honour Retry-After and re-ask on answers that name no option. Responses are read as plain JSON, which
tolerates the small differences between servers and costs far less CPU per request than typed objects.

Answer modes (`answer_mode`): `logprobs` (first token's top-k), `sampled` (n samples at temperature 1),
`auto` (logprobs, switching once, loudly, to sampled when the endpoint rejects or omits logprobs).
`output_mode=binary` asks at temperature 0 and puts all mass on the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import random
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from rubric.errors import InputError
from rubric.extraction import (
    Distribution,
    TokenLogprob,
    from_samples,
    from_top_logprobs,
    one_hot,
    option_of,
    uniform_fallback,
)
from rubric.http import HTTP_CLIENTS, Reply, Retryable, error_message, make_channel, retry_after
from rubric.prompts import Prompt

REASK = "Reply with exactly one option code ({codes}) and nothing else."


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
        if self.concurrency < 1 or self.samples < 1 or not 1 <= self.top_logprobs <= 20:
            raise InputError("judge.concurrency and judge.samples must be >= 1, judge.top_logprobs 1..20.")
        if self.processes != "auto" and (
            isinstance(self.processes, bool) or not isinstance(self.processes, int) or self.processes < 0
        ):
            raise InputError(
                f"judge.processes={self.processes!r} is not valid.",
                fix="use auto (or 0) for automatic, or a number of worker processes >= 1.",
            )

    def resolved_base_url(self) -> str | None:
        return self.base_url or (os.environ.get(self.base_url_env) if self.base_url_env else None) or None

    def identity(self) -> dict[str, Any]:
        """What changes an answer (goes into cache keys); retries, timeouts, concurrency and processes do
        not."""
        return {
            "backend": self.backend,
            "model": self.model,
            "base_url": self.resolved_base_url(),
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


@dataclass
class Answer:
    """What one judged (item, question) — or one reason request — produced."""

    dist: Distribution | None
    """None for reason requests and for failures."""
    text: str | None = None
    """The reason text (reason requests only)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    """HTTP requests made, retries and re-asks included."""
    retries: int = 0
    error: str | None = None
    """Why it failed after all retries (then not cached and not written to llm.csv)."""

    def to_json(self) -> str:
        d = (
            None
            if self.dist is None
            else {"probs": self.dist.probs, "coverage": self.dist.coverage, "source": self.dist.source}
        )
        return json.dumps(
            {
                "dist": d,
                "text": self.text,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
            }
        )

    @classmethod
    def from_json(cls, raw: str) -> Answer:
        d = json.loads(raw)
        dist = (
            None
            if d["dist"] is None
            else Distribution(tuple(d["dist"]["probs"]), d["dist"]["coverage"], d["dist"]["source"])
        )
        return cls(dist, d.get("text"), d.get("prompt_tokens", 0), d.get("completion_tokens", 0))


class RequestFailed(Exception):
    """A request that still failed after every retry. `spent`: what the failed pair cost (requests,
    retries, tokens), with `error` set; judge() and reason() attach it, so the summary counts it."""

    spent: Answer | None = None


class _LogprobsUnsupported(Exception):
    pass


class OpenAIBackend:
    """Chat or legacy completions endpoint; one instance per gather run."""

    batch = False

    def __init__(self, cfg: JudgeConfig, *, log: Any = None):
        self.cfg = cfg
        self.mode = "sampled" if cfg.answer_mode == "sampled" else "logprobs"
        self._log = log or (lambda msg: print(msg, file=sys.stderr))
        self._rng = random.Random(cfg.seed)
        self._seen_logprobs = False
        key = cfg.api_key or (os.environ.get(cfg.api_key_env) if cfg.api_key_env else None)
        if not key:
            raise InputError(
                f"no API key: the environment variable {cfg.api_key_env} is not set.",
                fix=f"export {cfg.api_key_env}=... or set judge.api_key=EMPTY for a local server.",
            )
        # openai is imported in there: it takes ~0.6 s and only LLM judges need it.
        self.channel = make_channel(
            cfg.http_client, key, cfg.resolved_base_url(), cfg.timeout, cfg.concurrency
        )

    async def close(self) -> None:
        await self.channel.close()

    # one (item, question) --------------------------------------------------------------------------
    async def judge(self, prompt: Prompt) -> Answer:
        ans = Answer(None)
        with _charged_on_failure(ans):
            for ask in range(self.cfg.reasks + 1):
                dist = await self._ask(prompt, ans, reask=ask > 0)
                if dist is not None:
                    ans.dist = dist
                    return ans
        ans.dist = uniform_fallback(len(prompt.codes))  # flagged: source=fallback, coverage 0
        return ans

    async def reason(self, prompt: Prompt) -> Answer:
        ans = Answer(None)
        body = self._body(prompt, reask=False, max_tokens=self.cfg.reason_max_tokens, temperature=0.0)
        with _charged_on_failure(ans):
            data = await self._post(body, ans)
        ans.text = _texts(data, self.cfg.backend)[0].strip()
        return ans

    async def _ask(self, prompt: Prompt, ans: Answer, *, reask: bool) -> Distribution | None:
        cfg = self.cfg
        if cfg.output_mode == "binary":
            data = await self._post(self._body(prompt, reask=reask, max_tokens=1, temperature=0.0), ans)
            idx = option_of(_texts(data, cfg.backend)[0], prompt.codes)
            return None if idx is None else one_hot(idx, len(prompt.codes), floor=cfg.floor)
        if self.mode == "logprobs":
            try:
                return await self._ask_logprobs(prompt, ans, reask)
            except _LogprobsUnsupported as exc:
                self._switch_to_sampling(str(exc))
        return await self._ask_sampled(prompt, ans, reask)

    async def _ask_logprobs(self, prompt: Prompt, ans: Answer, reask: bool) -> Distribution | None:
        body = self._body(prompt, reask=reask, max_tokens=1, logprobs=True)
        for missing in range(1, self.cfg.max_retries + 2):
            data = await self._post(body, ans)
            top = _top_logprobs(data, self.cfg.backend)
            if top is not None:
                self._seen_logprobs = True
                return from_top_logprobs(top, prompt.codes, floor=self.cfg.floor)
            # No logprobs in a 200: a glitch if the server gave them before or gives them on a retry;
            # unsupported if one request keeps getting none and no request ever got any.
            if self.cfg.answer_mode == "auto" and not self._seen_logprobs and missing >= 3:
                raise _LogprobsUnsupported("the endpoint returns no logprobs")
            ans.retries += 1
        raise RequestFailed("responses carried no logprobs")

    async def _ask_sampled(self, prompt: Prompt, ans: Answer, reask: bool) -> Distribution | None:
        texts: list[str] = []
        while len(texts) < self.cfg.samples:  # some servers ignore n: ask again until we have enough
            body = self._body(
                prompt,
                reask=reask,
                max_tokens=1,
                temperature=self.cfg.sample_temperature,
                n=self.cfg.samples - len(texts),
            )
            texts += _texts(await self._post(body, ans), self.cfg.backend)
        return from_samples(texts[: self.cfg.samples], prompt.codes, floor=self.cfg.floor)

    def _switch_to_sampling(self, why: str) -> None:
        if self.mode == "sampled":
            return
        if self.cfg.answer_mode == "logprobs":
            raise InputError(
                f"{why}; judge.answer_mode=logprobs cannot work with it.",
                fix="set judge.answer_mode=auto or judge.answer_mode=sampled.",
            )
        self.mode = "sampled"
        self._log(
            f"WARNING: {why} (model {self.cfg.model}). Estimating each distribution from "
            f"{self.cfg.samples} samples at temperature {self.cfg.sample_temperature} instead; rows are "
            "flagged source=sampled. This costs more requests and is noisier."
        )

    # HTTP ------------------------------------------------------------------------------------------
    def _body(
        self,
        prompt: Prompt,
        *,
        reask: bool,
        max_tokens: int,
        logprobs: bool = False,
        temperature: float | None = None,
        n: int | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.cfg.model, "max_tokens": max_tokens}
        extra = REASK.format(codes=", ".join(prompt.codes)) if reask else None
        if self.cfg.backend == "chat":
            msgs = list(prompt.messages) + ([{"role": "user", "content": extra}] if extra else [])
            body["messages"] = msgs
            if logprobs:
                body.update(logprobs=True, top_logprobs=self.cfg.top_logprobs)
        else:
            body["prompt"] = (
                prompt.text if not extra else prompt.text[: -len("Answer:")] + extra + "\nAnswer:"
            )
            if logprobs:
                body["logprobs"] = self.cfg.top_logprobs
        if temperature is not None:
            body["temperature"] = temperature
        if n is not None and n > 1:
            body["n"] = n
        return body

    async def _post(self, body: dict[str, Any], ans: Answer) -> dict[str, Any]:
        path = "/chat/completions" if self.cfg.backend == "chat" else "/completions"
        last = "no attempt"
        for attempt in range(self.cfg.max_retries + 1):
            ans.requests += 1
            try:
                data = await self._post_once(path, body)
                usage = data.get("usage") or {}
                ans.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                ans.completion_tokens += int(usage.get("completion_tokens") or 0)
                return data
            except Retryable as exc:
                last = str(exc)
                if attempt == self.cfg.max_retries:
                    break
                ans.retries += 1
                await asyncio.sleep(self._wait(attempt, exc.wait))
        raise RequestFailed(f"{last} (after {self.cfg.max_retries} retries)")

    def _wait(self, attempt: int, server_wait: float | None) -> float:
        if server_wait is not None:
            return min(server_wait, self.cfg.max_backoff)
        return min(self.cfg.backoff * 2**attempt * (0.5 + self._rng.random()), self.cfg.max_backoff)

    async def _post_once(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await self.channel.post(path, body)
        if reply.status >= 400:
            raise self._classify(reply)
        try:
            data = json.loads(reply.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Retryable("malformed JSON in the response") from None
        if not isinstance(data, dict) or not data.get("choices"):
            raise Retryable("response without choices")
        return data

    def _classify(self, reply: Reply) -> Exception:
        status, message = reply.status, error_message(reply.content)
        if status in (408, 409, 429) or status >= 500:
            return Retryable(f"HTTP {status}", retry_after(reply.headers))
        if status in (400, 422) and "logprob" in message.lower():
            return _LogprobsUnsupported(f"the endpoint rejects logprobs ({message})")
        if status in (401, 403):
            return InputError(
                f"the judge endpoint refused the key (HTTP {status}: {message}).",
                fix=f"check {self.cfg.api_key_env} or judge.api_key.",
            )
        if status == 404:
            return InputError(
                f"the judge endpoint or model was not found (HTTP 404: {message}).",
                fix="check judge.base_url and judge.model.",
            )
        return RequestFailed(f"HTTP {status}: {message}")


@contextlib.contextmanager
def _charged_on_failure(ans: Answer) -> Iterator[None]:
    """Attach what a failing pair spent to its RequestFailed."""
    try:
        yield
    except RequestFailed as exc:
        ans.error = str(exc)
        exc.spent = ans
        raise


def _top_logprobs(data: dict[str, Any], backend: str) -> list[TokenLogprob] | None:
    """The first token's alternatives, or None when the response carries no logprobs."""
    lp = data["choices"][0].get("logprobs")
    if not lp:
        return None
    if backend == "chat":
        content = lp.get("content") or []
        if not content:
            return None
        first = content[0]
        alts = first.get("top_logprobs") or [
            {"token": first.get("token", ""), "logprob": first.get("logprob")}
        ]
        return [TokenLogprob(str(a.get("token", "")), _float(a.get("logprob"))) for a in alts]
    tops = lp.get("top_logprobs") or []
    if not tops or not tops[0]:
        return None
    return [TokenLogprob(str(t), _float(v)) for t, v in tops[0].items()]


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return -math.inf


def _texts(data: dict[str, Any], backend: str) -> list[str]:
    if backend == "chat":
        return [str((c.get("message") or {}).get("content") or "") for c in data["choices"]]
    return [str(c.get("text") or "") for c in data["choices"]]
