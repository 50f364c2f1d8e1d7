"""One conversation rebuilt from its LLM calls: the transcript (each call's input matched against the history
so far, only what is new kept), its turns (user message -> last assistant text, the tool steps in between kept
as the turn's tools), its one role, and where each call's span and trace went (for reviewers' annotations).

The calls come from rubric/traces/assemble.py's reading pass, grouped by conversation and in time order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rubric.errors import InputError
from rubric.traces.llm_call import LlmCall, Message


@dataclass(slots=True)
class KeptCall:
    """One LLM call as kept: its ids, time and messages (interned), nothing else of the span."""

    trace_id: str
    span_id: str
    start_ns: int
    where: str
    key: str | None
    role: str | None
    call: LlmCall
    source_ids: Mapping[str, str]


def conversation_record(
    cid: str, calls: list[KeptCall], *, role: str | None, role_from: str | None, skipped: Counter[str]
) -> dict[str, Any]:
    """One conversation's record, from its calls in time order. role: the role given for every conversation
    (None: the calls' own); role_from: the attribute the calls' roles were read from (None: their system text)."""
    role = role or _role(cid, calls, role_from)
    transcript = _transcript(calls)
    turns = _turns(cid, transcript, skipped)
    return {"conversation_id": cid, "chatbot_role": role, "turns": turns}


def _role(cid: str, calls: list[KeptCall], role_from: str | None) -> str:
    """The one role the conversation's calls were given (role_from= or the system text)."""
    roles: dict[str, KeptCall] = {}
    for call in calls:
        text = call.role if role_from else call.call.system
        if text and text.strip() and text.strip() not in roles:
            roles[text.strip()] = call
    if not roles:
        where = f"attribute {role_from}" if role_from else "system message or instructions"
        raise InputError(
            f"conversation {cid!r} has no {where} (first call: span {calls[0].span_id} at {calls[0].where}).",
            fix="pass role= the chatbot's role, or role_from= the span or resource attribute that holds it.",
        )
    if len(roles) > 1:
        (one, a), (two, b) = list(roles.items())[:2]
        raise InputError(
            f"conversation {cid!r} has two different system roles: {_short(one)!r} (span {a.span_id} at {a.where}) "
            f"and {_short(two)!r} (span {b.span_id} at {b.where}).",
            fix="pass role= the chatbot's role for all, role_from= an attribute that holds it, or "
            "conversation_key= an attribute that keeps the two chats apart.",
        )
    return next(iter(roles))


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _transcript(calls: list[KeptCall]) -> list[tuple[Message, KeptCall]]:
    """The conversation's messages once each, in order, with the call that first held each one.

    A call's input is matched against the transcript in order (each message found at or after the previous
    one's place): what is found is history, from the first message not found on it is new. This holds when
    calls repeat the whole history, when they send a window of it, and when later calls leave out the tool
    steps of earlier ones."""
    transcript: list[tuple[Message, KeptCall]] = []
    keys: list[tuple[str, str, tuple[str, ...]]] = []
    for call in calls:
        new = call.call.input
        at = 0  # the transcript position after the last message matched
        for n, msg in enumerate(new):
            found = _find(keys, _match_key(msg), at)
            if found is None:
                for rest in new[n:]:
                    transcript.append((rest, call))
                    keys.append(_match_key(rest))
                break
            at = found + 1
        for msg in call.call.output:
            transcript.append((msg, call))
            keys.append(_match_key(msg))
    return transcript


def _match_key(msg: Message) -> tuple[str, str, tuple[str, ...]]:
    """What identifies a message across calls: role, text and the tools it calls (ids and the spelling of
    arguments differ between a call's output and the next call's copy of it)."""
    return (msg.role, msg.content, tuple(t.name for t in msg.tool_calls))


def _find(keys: list[tuple[str, str, tuple[str, ...]]], key: tuple[str, str, tuple[str, ...]], at: int) -> int | None:
    if at < len(keys) and keys[at] == key:  # the usual case: the history, in order
        return at
    try:
        return keys.index(key, at)
    except ValueError:
        return None


def _turns(cid: str, transcript: list[tuple[Message, KeptCall]], skipped: Counter[str]) -> list[dict[str, Any]]:
    """User message -> last assistant text before the next user message; steps between it and the reply
    (assistant tool calls and text, tool results) kept as the turn's tools."""
    turns: list[dict[str, Any]] = []
    users: list[str] = []
    steps: list[tuple[Message, KeptCall]] = []

    def close() -> None:
        reply_at = max((i for i, (m, _) in enumerate(steps) if m.role == "assistant" and m.content), default=None)
        if reply_at is None:
            skipped["user messages without a reply"] += 1
            return
        reply, call = steps[reply_at]
        turn: dict[str, Any] = {"user": "\n\n".join(users), "assistant": reply.content}
        turn["trace_id"], turn["span_id"] = call.trace_id, call.span_id
        turn.update(call.source_ids)
        tools = [_tool_step(m) for m, _ in steps[:reply_at]]
        if reply.tool_calls:
            tools.append({"role": "assistant", "content": "", "tool_calls": [t.to_record() for t in reply.tool_calls]})
        if tools:
            turn["tools"] = tools
        turns.append(turn)

    for msg, call in transcript:
        if msg.role == "user":
            if steps:
                close()
                users, steps = [], []
            if msg.content:
                users.append(msg.content)
        elif msg.role in ("assistant", "tool"):
            if users:
                steps.append((msg, call))
            else:
                skipped["assistant messages before the first user message"] += 1
    if users:
        if steps:
            close()
        else:
            skipped["user messages without a reply"] += 1
    if not turns:
        raise InputError(
            f"conversation {cid!r} has no assistant text (its {len({c.span_id for _, c in transcript})} LLM calls "
            f"hold no reply with text; first at {transcript[0][1].where if transcript else '?'}).",
            fix="export the calls' outputs (content capture on for outputs too), or leave this conversation out "
            "with since= and until=, or service=.",
        )
    return turns


def _tool_step(msg: Message) -> dict[str, Any]:
    step: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.tool_calls:
        step["tool_calls"] = [t.to_record() for t in msg.tool_calls]
    if msg.tool_call_id:
        step["tool_call_id"] = msg.tool_call_id
    return step


def index_turns(
    turn_of_span: dict[str, tuple[str, int]],
    turns_of_trace: dict[str, tuple[tuple[str, int], ...]],
    cid: str,
    calls: list[KeptCall],
    record: dict[str, Any],
) -> None:
    """Where each call's span and trace went (filled into turn_of_span and turns_of_trace, TraceImport's): the
    turn whose reply it wrote, else the turn it served (a tool step), for reviewers' annotations."""
    by_reply = {(t["trace_id"], t["span_id"]): i for i, t in enumerate(record["turns"])}
    pending: list[KeptCall] = []  # calls before a reply (tool steps) serve that reply's turn
    for call in sorted(calls, key=lambda c: (c.start_ns, c.span_id)):
        pending.append(call)
        i = by_reply.get((call.trace_id, call.span_id))
        if i is not None:
            for p in pending:
                turn_of_span[p.span_id] = (cid, i)
            pending = []
    for p in pending:  # calls after the last reply (a last message left unanswered)
        turn_of_span[p.span_id] = (cid, len(record["turns"]) - 1)
    for call in calls:
        turn, known = turn_of_span[call.span_id], turns_of_trace.get(call.trace_id, ())
        if turn not in known:
            turns_of_trace[call.trace_id] = (*known, turn)
