"""Gathering through the OpenAI batch file format (`role-rubric gather mode=batch`): the OpenAI Batch API,
or vLLM's offline runner (`python -m vllm.entrypoints.openai.run_batch -i IN -o OUT --model M`).

The requests not already in the cache are written as batch files under OUT/batch/ (`input-000.jsonl`, ...,
split at `batch.max_requests` lines and `batch.max_mb` megabytes), one line per (item, question):
`{"custom_id", "method": "POST", "url", "body"}`, the body exactly what the online judge sends first. The
custom id names the item, the question, the prompt hash (llm.csv's prompt_hash) and the cache key's first
12 hex digits, so results from another rubric, prompt or judge setting match nothing and are refused.

Results (downloaded from the Batch API, or `results=FILE`) are read like online responses
(rubric/judge/responses.py, rubric/judge/response_reading.py, rubric/judge/extraction.py) into the same SQLite cache under
the same keys, so llm.csv comes out byte-identical to an online gather's and a rerun, online or batch,
reads them. Answers that named no option are re-asked in a follow-up round (`reask1-000.jsonl`, up to
judge.reasks rounds), then a flagged fallback, as online. Lines that failed go to failures.csv.

The job that plans the files and reads the results into the cache, with its record OUT/batch/state.json,
is rubric/judge/batch/job.py; the stage that drives it, rubric/judge/batch/run.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric.errors import InputError
from rubric.judge.backends import request_body
from rubric.judge.extraction import (
    Distribution,
    first_word,
    from_answer_steps,
    from_samples,
    one_hot,
    option_of,
)
from rubric.judge.http import error_message
from rubric.judge.prompts import Prompt
from rubric.judge.response_reading import answer_steps, choice_texts, ended_at_once
from rubric.judge.responses import BadResponse, check_completion
from rubric.judge.settings import JudgeConfig

STATE = "state.json"
OWN_FILE = re.compile(r"^(job\d+-)?(input|reask\d+)-\d{3}(\.output|\.errors)?\.jsonl$")  # what a job writes
ID_SUFFIX = re.compile(r"(\|[jr]\d+)+$")  # a later job's |jN and a re-ask round's |rN
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchSettings:
    """gather's `batch` block (its defaults are these), with submit= and results=."""

    submit: bool = True
    results: str | None = None
    max_requests: int = 50_000
    max_mb: float = 200.0
    poll_s: float = 30.0
    price_factor: float = 0.5


class LineFailed(Exception):
    """A result line that gives no answer (an error, a bad body): its pair goes to failures.csv."""


# requests -------------------------------------------------------------------------------------------------
def endpoint(cfg: JudgeConfig) -> str:
    return "/v1/chat/completions" if cfg.backend == "chat" else "/v1/completions"


def judge_hash(cfg: JudgeConfig) -> str:
    """12 hex digits naming the judge's settings in custom ids: what changes an answer (the cache key's
    identity) except the address, so results written for one `judge.base_url` are read under another (the
    same model served elsewhere answers the same; rubric/judge/identity.py compares judges the same way)."""
    import hashlib

    from rubric.judge.cache import identity_json

    return hashlib.sha256(identity_json({**cfg.identity(), "base_url": None}).encode()).hexdigest()[:12]


def custom_id(prompt: Prompt, judge12: str, round_: int = 0) -> str:
    """`conversation|turn|question|prompt_hash|judge12` (+ `|jN` for the Nth job in the folder, `|rN` for
    the Nth re-ask)."""
    turn = "" if prompt.item.turn is None else str(prompt.item.turn)
    question = prompt.question.id if prompt.question is not None else "(reason)"
    cid = f"{prompt.item.conversation.conversation_id}|{turn}|{question}|{prompt.prompt_hash}|{judge12[:12]}"
    return cid + (f"|r{round_}" if round_ else "")


def batch_body(cfg: JudgeConfig, prompt: Prompt, *, reask: bool) -> dict[str, Any]:
    """The body the online judge sends first for `prompt` (rubric/judge/backends.py)."""
    if prompt.question is None:
        return request_body(cfg, prompt, reask=False, max_tokens=cfg.reason_max_tokens, temperature=0.0)
    if cfg.output_mode == "binary":
        return request_body(cfg, prompt, reask=reask, max_tokens=cfg.answer_tokens, temperature=0.0)
    if cfg.answer_mode == "sampled":
        return request_body(
            cfg,
            prompt,
            reask=reask,
            max_tokens=cfg.answer_tokens,
            temperature=cfg.sample_temperature,
            n=cfg.samples,
        )
    return request_body(
        cfg, prompt, reask=reask, max_tokens=cfg.answer_tokens, temperature=cfg.temperature, logprobs=True
    )


def batch_lines(
    cfg: JudgeConfig,
    pending: Iterable[tuple[str, Prompt]],
    round_: int,
    ids: dict[str, str] | None = None,
    suffix: str | None = None,
) -> Iterator[bytes]:
    """One JSONL line per request, made as they are written (half a million lines are gigabytes).
    ids: key -> custom_id(prompt, judge12), where the caller has them already; suffix: what the job adds
    to them (|jN|rN; by default |rN for a re-ask round)."""
    url = endpoint(cfg)
    suffix = (f"|r{round_}" if round_ else "") if suffix is None else suffix
    judge12 = judge_hash(cfg) if ids is None else ""
    for k, p in pending:
        cid = ids[k] + suffix if ids is not None else custom_id(p, judge12) + suffix
        line: dict[str, Any] = {"custom_id": cid, "method": "POST", "url": url}
        line["body"] = batch_body(cfg, p, reask=round_ > 0)
        yield json.dumps(line, ensure_ascii=False).encode() + b"\n"


def split_lines(lines: Iterable[bytes], max_requests: int, max_bytes: int) -> Iterator[list[bytes]]:
    """Consecutive runs of lines, each at most `max_requests` lines and `max_bytes` bytes, one at a time."""
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise InputError(
                f"one batch request is {len(line):,} bytes, more than batch.max_mb allows.",
                fix="raise batch.max_mb (the provider's limit per file permitting).",
            )
        if chunk and (len(chunk) >= max_requests or size + len(line) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


# results --------------------------------------------------------------------------------------------------
def read_results(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The lines of a results file (Batch API output or error file, or vLLM's run_batch output) with their
    1-based line numbers, one at a time (a 50,000-line file of full responses is hundreds of megabytes)."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                cut = not raw.endswith(b"\n")
                raise InputError(
                    "this line is not JSON" + (" (the file ends in the middle of it: truncated)." if cut else "."),
                    path=path,
                    row=n,
                    fix="pass the complete results file the batch produced (nothing was read from this one).",
                ) from None
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                raise InputError(
                    "this line has no custom_id: it is not a batch result.",
                    path=path,
                    row=n,
                    fix="pass the output file of the batch (lines with custom_id, response, error).",
                )
            if "response" not in line and "error" not in line and "body" in line:
                raise InputError(
                    "this is a batch request (input) line, not a result.",
                    path=path,
                    row=n,
                    fix="pass the file the batch wrote (run_batch's -o, or the Batch API's output file).",
                )
            yield n, line


def line_body(line: dict[str, Any], backend: str) -> dict[str, Any]:
    """The completion a result line carries, or LineFailed with why there is none."""
    error, response = line.get("error"), line.get("response")
    if error:
        if isinstance(error, dict):
            raise LineFailed(f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip())
        raise LineFailed(str(error)[:200])
    if not isinstance(response, dict):
        raise LineFailed("the result line has neither a response nor an error")
    status, body = response.get("status_code"), response.get("body")
    if status != 200:
        raise LineFailed(f"HTTP {status}: {error_message(json.dumps(body).encode())}")
    try:
        return check_completion(body, backend)  # type: ignore[return-value]
    except BadResponse as exc:
        raise LineFailed(str(exc)) from None


def distribution_of(data: dict[str, Any], prompt: Prompt, cfg: JudgeConfig) -> Distribution | None:
    """What the online judge reads from its first response (rubric/judge/backends.py `_ask`); None: the answer
    named no option (re-ask, then fallback)."""
    if cfg.output_mode == "binary":
        idx = option_of(first_word(choice_texts(data, cfg.backend)[0]), prompt.codes)
        return None if idx is None else one_hot(idx, len(prompt.codes), floor=cfg.floor)
    if cfg.answer_mode == "sampled":
        texts = choice_texts(data, cfg.backend)
        if len(texts) < cfg.samples:
            raise LineFailed(
                f"{len(texts)} of the {cfg.samples} samples asked for (the endpoint ignores n); gather online"
            )
        return from_samples(texts[: cfg.samples], prompt.codes, floor=cfg.floor)
    steps = answer_steps(data, cfg.backend)
    if steps is not None:
        return from_answer_steps(steps, prompt.codes, floor=cfg.floor)
    if ended_at_once(data, cfg.backend):
        return None
    raise LineFailed("the response carried no logprobs; set judge.answer_mode=sampled for this endpoint")
