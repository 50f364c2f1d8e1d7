"""Very long turns: found before any request, then warned about (with their count and what asking about
them costs) or refused with the fix; never sent silently.

A turn's size is the estimated tokens of its user message and reply: characters / 4, the usual ratio of
English text to BPE tokens (no tokenizer of the judge's model is at hand before the first request). Every
question about a turn repeats the conversation so far, so one pasted log can cost more than the rest of
a gather together; the estimate counts the whole prompts of the items with a long turn.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from rubric.conversations import Item
from rubric.errors import InputError
from rubric.judge.prompts import render_context, render_prompt
from rubric.judge.settings import JudgeConfig
from rubric.schema import Rubric

log = logging.getLogger(__name__)  # warnings about the run (stderr); calibration/cli.py prints them (rubric/notices.py)

CHARS_PER_TOKEN = 4
LONG_TURN_TOKENS = 4000
"""The default limit: ~16,000 characters in one exchange, twenty times the bundled benchmark's longest
turn (194 estimated tokens)."""
MODES = ("warn", "refuse")


def estimated_tokens(text: str) -> int:
    return -(-len(text) // CHARS_PER_TOKEN)


def _turn_tokens(item: Item) -> int:
    turns = item.conversation.turns if item.turn is None else [item.conversation.turns[item.turn]]
    return max(estimated_tokens(t.user) + estimated_tokens(t.assistant) for t in turns)


def _prompt_tokens(item: Item, rubric: Rubric, include_reason: bool) -> int:
    context = render_context(item)
    per_question = [
        sum(estimated_tokens(m["content"]) for m in render_prompt(item, q, context).messages) for q in rubric.questions
    ]
    return sum(per_question) + (max(per_question) if include_reason else 0)


def check_long_turns(
    items: Sequence[Item],
    rubric: Rubric,
    judge: JudgeConfig,
    *,
    limit: int | None,
    mode: str = "warn",
    include_reason: bool = False,
    where: str | Path = "conversations",
) -> None:
    """Warn on stderr about the items whose turn is above `limit` estimated tokens (mode="warn"), or raise
    InputError naming the longest (mode="refuse"). `limit` None: no check."""
    if mode not in MODES:
        raise InputError(f"long_turns={mode!r} is not valid.", fix="set long_turns to warn or refuse.")
    if limit is None:
        return
    long = [(size, item) for item in items if (size := _turn_tokens(item)) > limit]
    if not long:
        return
    size, worst = max(long, key=lambda pair: pair[0])
    turn = "the whole conversation" if worst.turn is None else f"turn {worst.turn}"
    what = (
        f"{len(long)} of {len(items)} turns are longer than long_turn_tokens={limit} estimated tokens "
        f"(characters / {CHARS_PER_TOKEN}; the longest: conversation {worst.conversation.conversation_id!r}, "
        f"{turn}, ~{size} tokens)"
    )
    if mode == "refuse":
        raise InputError(
            f"{what}.",
            path=where,
            fix="shorten or split those turns, raise long_turn_tokens=N, or pass long_turns=warn to send them anyway.",
        )
    tokens = sum(_prompt_tokens(item, rubric, include_reason) for _, item in long)
    log.warning(
        f"warning: {what}; asking about them sends ~{tokens} prompt tokens{_cost(tokens, judge)} if none is "
        "cached. Fix: shorten or split them, or pass long_turns=refuse to stop before any request."
    )


def _cost(tokens: int, judge: JudgeConfig) -> str:
    from rubric.judge.outputs import (
        is_loopback,  # here: rubric.judge.outputs loads pandas, the schemas read LONG_TURN_TOKENS
    )

    if judge.backend == "embedding" or is_loopback(judge.resolved_base_url()):
        return " (a local judge: no per-token price)"
    if judge.price_input_per_mtok is None:
        return " (no judge.price_input_per_mtok to price them)"
    return f" (~${tokens * judge.price_input_per_mtok / 1e6:.4f} at judge.price_input_per_mtok={judge.price_input_per_mtok})"
