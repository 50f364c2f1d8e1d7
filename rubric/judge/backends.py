"""Judge backends for any OpenAI-compatible endpoint (OpenAI, vLLM, TGI, Ollama, llama.cpp server).

Requests go out through rubric/judge/http.py (aiohttp with the `openai` client's URL and headers, or the
`openai` client itself) with no retries of their own: retries happen here, so they can be counted,
honour Retry-After and re-ask on answers that name no option. Responses are read as plain JSON, which
tolerates the small differences between servers and costs far less CPU per request than typed objects.

Answer modes (`answer_mode`): `logprobs` (top-k at the first non-whitespace token), `sampled` (n samples at
temperature 1), `auto` (logprobs, switching once, loudly, to sampled when the endpoint rejects or omits
logprobs). `output_mode=binary` asks at temperature 0 and puts all mass on the answer.

Every request states its sampling parameters (temperature, plus `extra_body`): a server's defaults are
its own (llama.cpp samples at 0.8 with top-k 40), and a sampled end-of-text would otherwise be an empty
reply. An empty reply (the model ended at once) names no option: it is re-asked, then a flagged fallback,
and never taken for an endpoint without logprobs.

The judge's settings (`JudgeConfig`) live in rubric/judge/settings.py and reading a response body (texts,
per-token logprobs) in rubric/judge/response_reading.py; `JudgeConfig` is re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from rubric.errors import InputError
from rubric.judge.extraction import (
    Distribution,
    first_word,
    from_answer_steps,
    from_samples,
    one_hot,
    option_of,
    uniform_fallback,
)
from rubric.judge.http import Reply, Retryable, error_message, make_channel, retry_after
from rubric.judge.prompts import Prompt
from rubric.judge.response_reading import answer_steps, choice_texts, ended_at_once
from rubric.judge.responses import BadResponse, check_completion
from rubric.judge.settings import JudgeConfig
from rubric.secrets import mask_secrets

REASK = "Reply with exactly one option code ({codes}) and nothing else."
REFUSED_WAIT_S = 10.0
"""How long a refused connection is retried (every half second) before the endpoint has ever answered: a
judge started a moment before the gather gets that long to listen; a wrong address is one line, not
minutes of backoff ending in a failure per pair."""


def nothing_listens(url: str | None, waited: float) -> InputError:
    """The one line for a judge address where nothing listened for `waited` seconds."""
    return InputError(
        f"connection refused at {url}: nothing listens there (tried for {waited:.0f} s).",
        fix="start the judge's server (role-rubric serve-fake-judge for judge=fake) or correct judge.base_url.",
    )


async def wait_for_listener(cfg: JudgeConfig) -> None:
    """The wait a backend makes on its first refused connection, made once for every worker process of a
    gather before they start (each would otherwise wait out its own): until something listens at the
    judge's address, every half second up to REFUSED_WAIT_S (no wait with judge.max_retries=0), else
    `nothing_listens`. An address behind a proxy, or one that cannot be told in a few seconds, is left to
    the workers (rubric/judge/http.py `refused_at`)."""
    from rubric.judge.http import refused_at

    url = cfg.resolved_base_url()
    started = time.monotonic()
    while await asyncio.to_thread(refused_at, url):
        waited = time.monotonic() - started
        if waited >= REFUSED_WAIT_S or cfg.max_retries == 0:
            raise nothing_listens(url, waited)
        await asyncio.sleep(0.5)


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
        self._log = log or logging.getLogger(__name__).warning  # printed on stderr (rubric/notices.py)
        self._rng = random.Random(cfg.seed)
        self._seen_logprobs = False
        self._reached = False  # the endpoint has answered once: a refusal after that is a failure to retry
        self._refused_since: float | None = None
        key = cfg.resolved_api_key()
        self._key = key  # masked out of any error text a server sends back
        if not key:
            raise InputError(
                f"no API key: the environment variable {cfg.api_key_env} is not set.",
                fix=f"export {cfg.api_key_env}=... or set judge.api_key=EMPTY for a local server.",
            )
        self._server = None
        base_url = cfg.resolved_base_url()
        if cfg.is_local:  # serve the model ourselves, on a free loopback port, until close()
            from rubric.servers.local import LocalServer

            self._server = LocalServer(cfg.model_path, alias=cfg.model, options=cfg.server).start()
            base_url = self._server.base_url
        try:  # openai is imported in there: it takes ~0.6 s and only LLM judges need it.
            self.channel = make_channel(cfg.http_client, key, base_url, cfg.timeout, cfg.concurrency)
        except BaseException:
            if self._server is not None:
                self._server.stop()
            raise

    async def close(self) -> None:
        try:
            await self.channel.close()
        finally:
            if self._server is not None:
                self._server.stop()

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
        body = request_body(self.cfg, prompt, reask=False, max_tokens=self.cfg.reason_max_tokens, temperature=0.0)
        with _charged_on_failure(ans):
            data = await self._post(body, ans)
        ans.text = choice_texts(data, self.cfg.backend)[0].strip()
        return ans

    async def _ask(self, prompt: Prompt, ans: Answer, *, reask: bool) -> Distribution | None:
        cfg = self.cfg
        if cfg.output_mode == "binary":
            body = request_body(self.cfg, prompt, reask=reask, max_tokens=cfg.answer_tokens, temperature=0.0)
            data = await self._post(body, ans)
            idx = option_of(first_word(choice_texts(data, cfg.backend)[0]), prompt.codes)
            return None if idx is None else one_hot(idx, len(prompt.codes), floor=cfg.floor)
        if self.mode == "logprobs":
            try:
                return await self._ask_logprobs(prompt, ans, reask)
            except _LogprobsUnsupported as exc:
                self._switch_to_sampling(str(exc))
        return await self._ask_sampled(prompt, ans, reask)

    async def _ask_logprobs(self, prompt: Prompt, ans: Answer, reask: bool) -> Distribution | None:
        body = request_body(
            self.cfg,
            prompt,
            reask=reask,
            max_tokens=self.cfg.answer_tokens,
            logprobs=True,
            temperature=self.cfg.temperature,
        )
        for missing in range(1, self.cfg.max_retries + 2):
            data = await self._post(body, ans)
            steps = answer_steps(data, self.cfg.backend)
            if steps is not None:
                self._seen_logprobs = True
                return from_answer_steps(steps, prompt.codes, floor=self.cfg.floor)
            if ended_at_once(data, self.cfg.backend):  # nothing generated, so nothing to read: no option
                return None
            # No logprobs in a 200: a glitch if the server gave them before or gives them on a retry;
            # unsupported if one request keeps getting none and no request ever got any.
            if self.cfg.answer_mode == "auto" and not self._seen_logprobs and missing >= 3:
                raise _LogprobsUnsupported("the endpoint returns no logprobs")
            ans.retries += 1
        raise RequestFailed("responses carried no logprobs")

    async def _ask_sampled(self, prompt: Prompt, ans: Answer, reask: bool) -> Distribution | None:
        texts: list[str] = []
        while len(texts) < self.cfg.samples:  # some servers ignore n: ask again until we have enough
            body = request_body(
                self.cfg,
                prompt,
                reask=reask,
                max_tokens=self.cfg.answer_tokens,
                temperature=self.cfg.sample_temperature,
                n=self.cfg.samples - len(texts),
            )
            texts += choice_texts(await self._post(body, ans), self.cfg.backend)
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
    async def _post(self, body: dict[str, Any], ans: Answer) -> dict[str, Any]:
        path = "/chat/completions" if self.cfg.backend == "chat" else "/completions"
        last, attempt = "no attempt", 0
        while True:  # attempts 0..max_retries; waiting for a listener to start counts none of them
            ans.requests += 1
            try:
                data = await self._post_once(path, body)
                usage = data.get("usage") or {}
                ans.prompt_tokens += int(usage.get("prompt_tokens") or 0)
                ans.completion_tokens += int(usage.get("completion_tokens") or 0)
                return data
            except Retryable as exc:
                last = str(exc)
                if exc.refused and not self._reached:
                    await self._wait_for_listener()
                    continue
                if attempt == self.cfg.max_retries:
                    break
                ans.retries += 1
                await asyncio.sleep(self._wait(attempt, exc.wait))
                attempt += 1
        raise RequestFailed(f"{last} (after {self.cfg.max_retries} retries)")

    async def _wait_for_listener(self) -> None:
        """A refused connection before the endpoint ever answered: wait half a second, up to
        REFUSED_WAIT_S in all (shared by every request of this backend), then one line naming the URL."""
        now = time.monotonic()
        self._refused_since = self._refused_since or now
        if now - self._refused_since >= REFUSED_WAIT_S or self.cfg.max_retries == 0:
            url = getattr(self.channel, "base_url", None) or self.cfg.resolved_base_url()
            raise nothing_listens(url, now - self._refused_since)
        await asyncio.sleep(0.5)

    def _wait(self, attempt: int, server_wait: float | None) -> float:
        if server_wait is not None:
            return min(server_wait, self.cfg.max_backoff)
        return min(self.cfg.backoff * 2**attempt * (0.5 + self._rng.random()), self.cfg.max_backoff)

    async def _post_once(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = await self.channel.post(path, body)
        self._reached = True
        if reply.status >= 400:
            raise self._classify(reply)
        try:
            data = json.loads(reply.content)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Retryable("malformed JSON in the response") from None
        try:
            return check_completion(data, self.cfg.backend)  # type: ignore[return-value]
        except BadResponse as exc:  # a counted, retried failure with its reason, never a crash
            raise Retryable(str(exc)) from None

    def _classify(self, reply: Reply) -> Exception:
        status, message = reply.status, mask_secrets(error_message(reply.content), self._key)
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


def request_body(
    cfg: JudgeConfig,
    prompt: Prompt,
    *,
    reask: bool,
    max_tokens: int,
    temperature: float,
    logprobs: bool = False,
    n: int | None = None,
) -> dict[str, Any]:
    """The JSON body of one request for `prompt` (chat or legacy completions), as the online judge sends it
    and as batch files carry it (rubric/judge/batch/lines.py)."""
    body: dict[str, Any] = {
        **cfg.extra_body,
        "model": cfg.model,
        "max_tokens": max_tokens,
        "temperature": temperature,
    }
    extra = REASK.format(codes=", ".join(prompt.codes)) if reask else None
    if cfg.backend == "chat":
        msgs = _messages(prompt, system_role=cfg.system_role)
        body["messages"] = msgs + ([{"role": "user", "content": extra}] if extra else [])
        if logprobs:
            body.update(logprobs=True, top_logprobs=cfg.top_logprobs)
    else:
        body["prompt"] = prompt.text if not extra else prompt.text[: -len("Answer:")] + extra + "\nAnswer:"
        if logprobs:
            body["logprobs"] = cfg.top_logprobs
    if n is not None and n > 1:
        body["n"] = n
    return body


@contextlib.contextmanager
def _charged_on_failure(ans: Answer) -> Iterator[None]:
    """Attach what a failing pair spent to its RequestFailed."""
    try:
        yield
    except RequestFailed as exc:
        ans.error = str(exc)
        exc.spent = ans
        raise


def _messages(prompt: Prompt, *, system_role: bool) -> list[dict[str, str]]:
    """The chat messages; without a system role the instructions open the (first) user message."""
    msgs = [dict(m) for m in prompt.messages]
    if system_role or msgs[0]["role"] != "system":
        return msgs
    system, user = msgs[0], msgs[1]
    return [{"role": "user", "content": f"{system['content']}\n\n{user['content']}"}, *msgs[2:]]
