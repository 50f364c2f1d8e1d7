"""Reading a checked completion (rubric/judge/responses.py): the texts of its choices and, per generated
token, the token and its top alternatives' log-probabilities.

Separate from the backend (rubric/judge/backends.py) because these are pure functions of a response body that
hide how the chat and the legacy completions endpoints lay it out; the backend decides what to do with what
they read (retry, re-ask, switch to sampling).
"""

from __future__ import annotations

import math
from typing import Any

from rubric.judge.extraction import AnswerStep, TokenLogprob


def answer_steps(data: dict[str, Any], backend: str) -> list[AnswerStep] | None:
    """Each generated position's token and alternatives, or None when the response carries no logprobs."""
    choice = data["choices"][0]
    lp = choice.get("logprobs")
    if not lp:
        return None
    steps = []
    if backend == "chat":
        for pos in lp.get("content") or []:
            sampled = TokenLogprob(str(pos.get("token", "")), _float(pos.get("logprob")))
            alts = pos.get("top_logprobs") or [{"token": sampled.token, "logprob": sampled.logprob}]
            top = [TokenLogprob(str(a.get("token", "")), _float(a.get("logprob"))) for a in alts]
            steps.append(AnswerStep(sampled, top))
    else:
        tokens = lp.get("tokens") or []
        chosen = lp.get("token_logprobs") or []
        for i, alts in enumerate(lp.get("top_logprobs") or []):
            if not alts:
                break
            token = str(tokens[i]) if i < len(tokens) else ""
            sampled = TokenLogprob(token, _float(chosen[i] if i < len(chosen) else None))
            steps.append(AnswerStep(sampled, [TokenLogprob(str(t), _float(v)) for t, v in alts.items()]))
    return steps or None


def ended_at_once(data: dict[str, Any], backend: str) -> bool:
    """The model generated nothing and stopped (it sampled end-of-text first): an empty reply, which
    llama.cpp's server sends without logprobs."""
    return data["choices"][0].get("finish_reason") == "stop" and not choice_texts(data, backend)[0]


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return -math.inf


def choice_texts(data: dict[str, Any], backend: str) -> list[str]:
    """The text of every choice, "" where a server sent none (the answer then names no option)."""
    if backend == "chat":
        return [str((c.get("message") or {}).get("content") or "") for c in data["choices"]]
    return [str(c.get("text") or "") for c in data["choices"]]
