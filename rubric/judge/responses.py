"""What an OpenAI-compatible endpoint may answer, checked before anything reads it.

`check_completion(data, backend)` takes the parsed JSON body of a 200 and returns it as a `Completion`
(typed records, below) or raises `BadResponse` with the first thing that is the wrong shape: the caller
(rubric/judge/backends.py) treats that as a retryable failure, so a server that answers `choices: ["x"]` or
`usage: {"prompt_tokens": "many"}` costs a counted, explained failure of that pair, never a crash.

The records are TypedDicts: the checked body is the parsed JSON itself, so reading it costs no copies
(about 20 µs per response with 20 alternatives).

Secrets in what a server sent back are masked with rubric/secrets.py before anything is shown or written.
"""

from __future__ import annotations

import math
import sys
from typing import Any, TypedDict

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:  # Python 3.10 (which pyproject.toml supports): typing_extensions comes with pydantic, a dependency
    from typing_extensions import NotRequired


class BadResponse(Exception):
    """The endpoint answered 200 with a body of the wrong shape; the message says what and where."""


class TopLogprob(TypedDict):
    token: str
    """A candidate token's text."""
    logprob: float
    """Its natural-log probability (a finite number or -inf)."""


class ChatTokenLogprobs(TypedDict):
    """One generated position of a chat response."""

    token: str
    logprob: float
    top_logprobs: NotRequired[list[TopLogprob] | None]
    """The alternatives at this position, most likely first (may be absent)."""


class ChatLogprobs(TypedDict):
    content: NotRequired[list[ChatTokenLogprobs] | None]


class CompletionLogprobs(TypedDict):
    """The legacy completions layout: parallel lists, one entry per generated position."""

    tokens: NotRequired[list[str] | None]
    token_logprobs: NotRequired[list[float | None] | None]
    top_logprobs: NotRequired[list[dict[str, float] | None] | None]


class Message(TypedDict):
    content: NotRequired[str | None]


class Choice(TypedDict):
    message: NotRequired[Message | None]
    """Chat endpoints."""
    text: NotRequired[str | None]
    """Completions endpoints."""
    logprobs: NotRequired[ChatLogprobs | CompletionLogprobs | None]
    finish_reason: NotRequired[str | None]


class Usage(TypedDict):
    prompt_tokens: NotRequired[int | None]
    completion_tokens: NotRequired[int | None]


class Completion(TypedDict):
    """A chat or completions response, as far as the judge reads it."""

    choices: list[Choice]
    """At least one."""
    usage: NotRequired[Usage | None]


def check_completion(data: Any, backend: str) -> Completion:
    """`data` if it is a well-formed response for `backend` ("chat" or "completions"), else BadResponse.

    >>> check_completion({"choices": [{"message": {"content": "3"}}]}, "chat")["choices"][0]["message"]
    {'content': '3'}
    >>> try:
    ...     check_completion({"choices": ["x"]}, "chat")
    ... except BadResponse as exc:
    ...     print(exc)
    response choices[0] is a str 'x', not an object
    """
    _need(isinstance(data, dict), "response body", data, "an object")
    choices = data.get("choices")
    _need(isinstance(choices, list) and bool(choices), "response choices", choices, "a non-empty list")
    for i, choice in enumerate(choices):
        _choice(choice, f"choices[{i}]", backend)
    usage = data.get("usage")
    if usage is not None:
        _need(isinstance(usage, dict), "response usage", usage, "an object")
        for name in ("prompt_tokens", "completion_tokens"):
            value = usage.get(name)
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)
            _need(ok, f"response usage.{name}", value, "a whole number")
    return data


def _choice(choice: Any, where: str, backend: str) -> None:
    _need(isinstance(choice, dict), f"response {where}", choice, "an object")
    _need(
        _opt_str(choice.get("finish_reason")),
        f"response {where}.finish_reason",
        choice.get("finish_reason"),
        "a text",
    )
    if backend == "chat":
        message = choice.get("message")
        if message is not None:
            _need(isinstance(message, dict), f"response {where}.message", message, "an object")
            _need(
                _opt_str(message.get("content")),
                f"response {where}.message.content",
                message.get("content"),
                "a text",
            )
    else:
        _need(_opt_str(choice.get("text")), f"response {where}.text", choice.get("text"), "a text")
    lp = choice.get("logprobs")
    if not lp:
        return
    _need(isinstance(lp, dict), f"response {where}.logprobs", lp, "an object")
    if backend == "chat":
        _chat_logprobs(lp, f"{where}.logprobs")
    else:
        _completion_logprobs(lp, f"{where}.logprobs")


def _chat_logprobs(lp: dict[str, Any], where: str) -> None:
    content = lp.get("content")
    if content is None:
        return
    _need(isinstance(content, list), f"response {where}.content", content, "a list")
    for i, pos in enumerate(content):
        at = f"{where}.content[{i}]"
        _need(isinstance(pos, dict), f"response {at}", pos, "an object")
        _token(pos, at)
        alts = pos.get("top_logprobs")
        if alts is None:
            continue
        _need(isinstance(alts, list), f"response {at}.top_logprobs", alts, "a list")
        for j, alt in enumerate(alts):
            _need(isinstance(alt, dict), f"response {at}.top_logprobs[{j}]", alt, "an object")
            _token(alt, f"{at}.top_logprobs[{j}]")


def _completion_logprobs(lp: dict[str, Any], where: str) -> None:
    tokens, chosen, tops = lp.get("tokens"), lp.get("token_logprobs"), lp.get("top_logprobs")
    if tokens is not None:
        ok = isinstance(tokens, list) and all(isinstance(t, str) for t in tokens)
        _need(ok, f"response {where}.tokens", tokens, "a list of texts")
    if chosen is not None:
        ok = isinstance(chosen, list) and all(v is None or _is_logprob(v) for v in chosen)
        _need(ok, f"response {where}.token_logprobs", chosen, "a list of numbers")
    if tops is not None:
        _need(isinstance(tops, list), f"response {where}.top_logprobs", tops, "a list")
        for i, alts in enumerate(tops):
            ok = alts is None or (
                isinstance(alts, dict) and all(isinstance(t, str) and _is_logprob(v) for t, v in alts.items())
            )
            _need(ok, f"response {where}.top_logprobs[{i}]", alts, "an object of token: logprob")


def _token(entry: dict[str, Any], where: str) -> None:
    _need(isinstance(entry.get("token"), str), f"response {where}.token", entry.get("token"), "a text")
    _need(_is_logprob(entry.get("logprob")), f"response {where}.logprob", entry.get("logprob"), "a number <= 0")


def _is_logprob(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) and v <= 1e-6


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _need(ok: bool, what: str, value: Any, want: str) -> None:
    if not ok:
        if isinstance(value, (dict, list)):
            shown = f"a {type(value).__name__}"
        elif isinstance(value, str):
            shown = f"a str {value[:20]!r}"
        else:
            shown = repr(value)[:20]
        raise BadResponse(f"{what} is {shown}, not {want}")
