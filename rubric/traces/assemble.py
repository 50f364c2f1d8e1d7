"""Spans -> conversation records: each conversation rebuilt once, in time order, from its LLM calls.

Every LLM call of a chat repeats the history so far in its input; reading each call's messages and keeping
them all would repeat every turn once per later call. Instead the calls of a conversation are taken in time
order and each one's input extends the transcript only by what it does not already hold (its overlap with
the transcript's end is found and skipped), then its output is appended. A turn is a user message and the
last assistant text before the next user message; the assistant's tool calls and the tools' results in
between stay with the turn (`tools`), shown to the judge as context and not judged. Several calls for one
user message (an agent calling tools) therefore give one turn, whose trace_id/span_id are those of the call
that wrote the reply.

Memory: only LLM calls are kept, as interned message tuples (a message repeated in every later call is one
object), and one start time per trace; other spans are read and dropped. `assemble` is the one entry point
the sources (OTLP files, MLflow, Phoenix) share.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rubric.errors import InputError
from rubric.ids import clean_id
from rubric.traces.messages import CALL_MARKERS, CAPTURE_SETTING, LlmCall, Message, read_call, surely_a_call
from rubric.traces.spans import EVENTS_ONLY, Span

log = logging.getLogger(__name__)  # progress lines; calibration/cli.py prints them (rubric/notices.py)

CONVERSATION_KEYS = (
    "gen_ai.conversation.id",
    "session.id",
    "mlflow.trace.session",
    "traceloop.association.properties.session_id",
    "langfuse.session.id",
)
"""The attributes that name a conversation, in the order they are tried: OTel GenAI's, OpenInference's (and
Phoenix's), MLflow's session metadata, the session association property of Traceloop's SDK (OpenLLMetry),
Langfuse's."""

PROGRESS_EVERY = 250_000
"""Spans between two progress lines of a long import."""


@dataclass(frozen=True)
class TraceSelection:
    """What to import and how to name it: the `import` keys shared by every trace source."""

    conversation_key: str | None = None
    """The span or resource attribute naming a conversation; None: CONVERSATION_KEYS."""
    role: str | None = None
    """The chatbot's role for every conversation; None: its system message or instructions."""
    role_from: str | None = None
    """A span or resource attribute holding the role (instead of the system message)."""
    since: datetime | None = None
    """Only conversations whose first span started at or after this (UTC)."""
    until: datetime | None = None
    """Only conversations whose first span started before this (UTC)."""
    service: str | None = None
    """Only spans whose resource has this service.name."""
    sample: int | None = None
    """A random sample of this many conversations."""
    seed: int = 0

    def read_keys(self) -> frozenset[str]:
        """The span attributes an import reads (OtlpFiles(only=) decodes no others' spans)."""
        keys = {self.conversation_key} if self.conversation_key else set(CONVERSATION_KEYS)
        return frozenset(CALL_MARKERS | keys | ({self.role_from} if self.role_from else set()))

    @classmethod
    def from_config(cls, cfg: Any) -> TraceSelection:
        """The selection an `import` asks for, from the command's typed object (its attributes read one by one)."""

        def value(name: str) -> Any:
            got = getattr(cfg, name, None)
            return None if got in (None, "", "???") else got

        return cls(
            conversation_key=value("conversation_key"),
            role=value("role"),
            role_from=value("role_from"),
            since=parse_time(value("since"), "since"),
            until=parse_time(value("until"), "until"),
            service=value("service"),
            sample=int(value("sample")) if value("sample") is not None else None,
            seed=int(value("seed") or 0),
        )


@dataclass
class TraceImport:
    """What `assemble` gives back: the conversation records (conversations.jsonl's lines, in order of start),
    the counts for import_summary.json, and where each turn came from (for reviewers' labels)."""

    records: list[dict[str, Any]]
    counts: dict[str, Any]
    skipped: dict[str, int] = field(default_factory=dict)
    """What was left out and why: {reason: count}."""
    turn_of_span: dict[str, tuple[str, int]] = field(default_factory=dict)
    """span_id of every kept LLM call -> (conversation_id, turn index) of the turn it belongs to."""
    turns_of_trace: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)
    """trace_id -> the turns its LLM calls belong to (most traces: one)."""


@dataclass(slots=True)
class _Call:
    """One LLM call as kept: its ids, time and messages (interned), nothing else of the span."""

    trace_id: str
    span_id: str
    start_ns: int
    where: str
    key: str | None
    role: str | None
    call: LlmCall
    source_ids: Mapping[str, str]


def parse_time(value: Any, key: str) -> datetime | None:
    """since=/until= as an aware UTC datetime (a date or a time without zone is taken as UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{key}={value!r} is not an ISO 8601 time.",
                fix=f"write {key}= as 2026-11-01 or 2026-11-01T09:30:00Z.",
            ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def iso_time(ns: int) -> str:
    """Nanoseconds since the epoch -> '2026-11-29T02:13:23.123456Z'."""
    return datetime.fromtimestamp(ns // 1000 / 1e6, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def assemble(
    spans: Iterable[Span],
    selection: TraceSelection,
    *,
    source: Mapping[str, Any],
    description: str,
    progress: bool = False,
) -> TraceImport:
    """The conversations the spans hold, selected, each rebuilt once in time order.

    source: the record's "source" field ({"kind": "otel", "files": ...}); description: where the spans come
    from, for messages ("OTLP files traces/*.jsonl"). Bad input (calls without content, no conversation id,
    two roles in one conversation, a conversation without assistant text, a span id seen twice) is one
    InputError naming the span's place and the fix."""
    reader = _Reader(selection, progress)
    for span in spans:
        reader.add(span)
    calls = reader.finish(description)
    return _build(calls, reader, selection, source, description)


class _Reader:
    """The streaming pass: LLM calls kept (messages interned), one start time per trace, the rest dropped."""

    def __init__(self, selection: TraceSelection, progress: bool):
        self.selection, self.progress = selection, progress
        self.keys = (selection.conversation_key,) if selection.conversation_key else CONVERSATION_KEYS
        self.spans = 0
        self.skipped: Counter[str] = Counter()
        self.trace_start: dict[str, int] = {}
        self.trace_key: dict[str, str] = {}  # a conversation key on any span of the trace (an agent's root, say)
        self.trace_role: dict[str, str] = {}
        self.calls: dict[str, _Call] = {}
        self.empty: dict[str, Span] = {}  # calls without content so far: their messages may come as log records
        self.log_events: dict[str, list[Any]] = {}
        self.key_like: Counter[str] = Counter()  # attribute names that look like a conversation id, for the error
        self._interned: dict[Any, Any] = {}

    def add(self, span: Span) -> None:
        self.spans += 1
        if self.progress and self.spans % PROGRESS_EVERY == 0:
            log.info(f"import: {self.spans:,} spans read, {len(self.calls):,} LLM calls")
        selection = self.selection
        if selection.service is not None and span.resource.get("service.name") != selection.service:
            self.skipped["spans of other services"] += 1
            return
        if span.name == EVENTS_ONLY:
            self.log_events.setdefault(span.span_id, []).extend(span.events)
            return
        trace = span.trace_id
        start = self.trace_start.get(trace)
        if start is None or span.start_ns < start:
            self.trace_start[trace] = span.start_ns
        if not span.attributes and not span.events:
            return  # nothing else to read (OtlpFiles(only=) leaves the other spans' attributes undecoded)
        key = self._value(span, self.keys)
        if key is not None and trace not in self.trace_key:
            self.trace_key[trace] = key
        role = self._value(span, (selection.role_from,)) if selection.role_from else None
        if role is not None and trace not in self.trace_role:
            self.trace_role[trace] = role
        call = read_call(span)
        if call is None:
            return
        if call.empty:
            self.empty[span.span_id] = span
            return
        self._keep(span, call, key, role)

    def _keep(self, span: Span, call: LlmCall, key: str | None, role: str | None) -> None:
        kept = _Call(
            span.trace_id, span.span_id, span.start_ns, span.where, key, role, self._intern(call), span.source_ids
        )
        earlier = self.calls.get(span.span_id)
        if earlier is not None:
            raise InputError(
                f"span id {span.span_id} appears twice ({earlier.where or 'first'} and "
                f"{span.where or 'again'}): the same spans exported twice?",
                fix="import each span once: drop the repeated file or lines (files= matching a file twice?).",
            )
        self.calls[span.span_id] = kept
        if key is None:
            self.key_like.update(k for k in span.attributes if _looks_like_key(k))
            self.key_like.update(k for k in span.resource if _looks_like_key(k))

    def _value(self, span: Span, keys: Iterable[str | None]) -> str | None:
        for key in keys:
            value = span.attributes.get(key)
            if value is None:
                value = span.resource.get(key)
            if value is not None and clean_id(value):
                return clean_id(str(value).strip().strip('"'))  # MLflow keeps some attributes as JSON text
        return None

    def _intern(self, call: LlmCall) -> LlmCall:
        """The call with every message (and the system text) one shared object across calls."""
        intern = self._interned.setdefault
        return LlmCall(
            intern(call.system, call.system),
            tuple(map(intern, call.input, call.input)),
            tuple(map(intern, call.output, call.output)),
            call.convention,
        )

    def finish(self, description: str) -> list[_Call]:
        """The kept calls with their conversation key; the errors that concern the export as a whole."""
        empty = self._with_log_events()
        if not self.calls and not empty:
            raise InputError(
                f"no LLM call in {description} ({self.spans:,} spans read"
                + (f", none of service {self.selection.service!r}" if self.selection.service else "")
                + ").",
                fix="export the spans of the chatbot's model calls (OTel GenAI, OpenInference or OpenLLMetry "
                "instrumentation), or check service=.",
            )
        if empty:
            first, call = empty[0]
            raise InputError(
                f"{len(empty):,} LLM call spans hold no message content (first: span {first.span_id} at "
                f"{first.where or description}).",
                fix=f"turn content capture on: {CAPTURE_SETTING[call.convention]}; then export again.",
            )
        calls = list(self.calls.values())
        for call in calls:
            if call.key is None:
                call.key = self.trace_key.get(call.trace_id)
            if call.role is None and self.selection.role_from:
                call.role = self.trace_role.get(call.trace_id)
        keyed = [c for c in calls if c.key is not None]
        if not keyed:
            raise InputError(
                f"no LLM call in {description} names its conversation ({', '.join(self.keys)} not set on them or "
                "their traces).",
                fix=self._key_fix(),
            )
        if len(keyed) < len(calls):
            self.skipped["LLM calls without a conversation id"] += len(calls) - len(keyed)
        return keyed

    def _with_log_events(self) -> list[tuple[Span, LlmCall]]:
        """The calls that had no content, read again with the log records of their span (older GenAI
        instrumentations log messages apart from the span); those still without any, for the error."""
        still = []
        for span_id, span in self.empty.items():
            events = self.log_events.pop(span_id, None)
            call = read_call(dataclasses.replace(span, events=span.events + tuple(events))) if events else None
            if call is None or call.empty:
                if surely_a_call(span.attributes):  # else a framework's span that named its model: no call
                    still.append((span, call or read_call(span)))
                continue
            key = self._value(span, self.keys)
            role = self._value(span, (self.selection.role_from,)) if self.selection.role_from else None
            self._keep(span, call, key, role)
        self.empty.clear()
        self.log_events.clear()
        return still

    def release(self) -> None:
        """Drop what only reading needed (the calls by id, the interned messages, the traces' keys and starts)."""
        self.calls, self._interned, self.trace_key, self.trace_role, self.trace_start = {}, {}, {}, {}, {}

    def _key_fix(self) -> str:
        fix = (
            "set gen_ai.conversation.id (OTel GenAI) or session.id (OpenInference: using_session) on the chatbot's "
            "spans, or pass conversation_key= the attribute that names a conversation"
        )
        if self.key_like:
            fix += " (these spans have " + ", ".join(k for k, _ in self.key_like.most_common(3)) + ")"
        return fix + "."


def _looks_like_key(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in ("conversation", "session", "thread", "chat_id", "dialog")) and not low.startswith(
        ("gen_ai.input", "gen_ai.output", "llm.input", "llm.output")
    )


def _build(
    calls: list[_Call], reader: _Reader, selection: TraceSelection, source: Mapping[str, Any], description: str
) -> TraceImport:
    """Group, select and rebuild the conversations."""
    groups: dict[str, list[_Call]] = defaultdict(list)
    for call in calls:
        groups[call.key].append(call)  # type: ignore[index]
    skipped = reader.skipped
    starts = {cid: min(reader.trace_start[c.trace_id] for c in group) for cid, group in groups.items()}
    chosen = sorted(groups)
    if selection.since is not None or selection.until is not None:
        since = _ns(selection.since) if selection.since is not None else None
        until = _ns(selection.until) if selection.until is not None else None
        inside = [c for c in chosen if (since is None or starts[c] >= since) and (until is None or starts[c] < until)]
        skipped["conversations outside since=/until="] += len(chosen) - len(inside)
        chosen = inside
    if selection.sample is not None and selection.sample < len(chosen):
        skipped["conversations not drawn by sample="] += len(chosen) - selection.sample
        chosen = random.Random(selection.seed).sample(chosen, selection.sample)
    if not chosen:
        raise InputError(
            f"no conversation of {description} is left after since=/until= "
            f"({len(groups):,} conversations, the first started {iso_time(min(starts.values()))}).",
            fix="widen since= / until=.",
        )
    chosen.sort(key=lambda cid: (starts[cid], cid))
    result = TraceImport(records=[], counts={}, skipped={})
    result.counts = {"spans": reader.spans, "llm_calls": len(reader.calls)}
    reader.release()  # from here on the calls live in `groups` only, each freed once its record is made
    source = dict(source)
    for cid in chosen:
        calls = sorted(groups.pop(cid), key=lambda c: (c.start_ns, c.span_id))
        record = _conversation(cid, calls, selection, skipped)
        record["started_at"] = iso_time(starts[cid])
        record["source"] = source
        result.records.append(record)
        _index(result, cid, calls, record)
    result.skipped = {k: v for k, v in skipped.items() if v}
    result.counts.update(conversations=len(result.records), turns=sum(len(r["turns"]) for r in result.records))
    return result


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000) * 1000


def _conversation(cid: str, calls: list[_Call], selection: TraceSelection, skipped: Counter[str]) -> dict[str, Any]:
    """One conversation's record, from its calls in time order."""
    role = selection.role or _role(cid, calls, selection)
    transcript = _transcript(calls)
    turns = _turns(cid, transcript, skipped)
    return {"conversation_id": cid, "chatbot_role": role, "turns": turns}


def _role(cid: str, calls: list[_Call], selection: TraceSelection) -> str:
    """The one role the conversation's calls were given (role_from= or the system text)."""
    roles: dict[str, _Call] = {}
    for call in calls:
        text = call.role if selection.role_from else call.call.system
        if text and text.strip() and text.strip() not in roles:
            roles[text.strip()] = call
    if not roles:
        where = f"attribute {selection.role_from}" if selection.role_from else "system message or instructions"
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


def _transcript(calls: list[_Call]) -> list[tuple[Message, _Call]]:
    """The conversation's messages once each, in order, with the call that first held each one.

    A call's input is matched against the transcript in order (each message found at or after the previous
    one's place): what is found is history, from the first message not found on it is new. This holds when
    calls repeat the whole history, when they send a window of it, and when later calls leave out the tool
    steps of earlier ones."""
    transcript: list[tuple[Message, _Call]] = []
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


def _turns(cid: str, transcript: list[tuple[Message, _Call]], skipped: Counter[str]) -> list[dict[str, Any]]:
    """User message -> last assistant text before the next user message; steps between it and the reply
    (assistant tool calls and text, tool results) kept as the turn's tools."""
    turns: list[dict[str, Any]] = []
    users: list[str] = []
    steps: list[tuple[Message, _Call]] = []

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
            "with since=/until= or service=.",
        )
    return turns


def _tool_step(msg: Message) -> dict[str, Any]:
    step: dict[str, Any] = {"role": msg.role, "content": msg.content}
    if msg.tool_calls:
        step["tool_calls"] = [t.to_record() for t in msg.tool_calls]
    if msg.tool_call_id:
        step["tool_call_id"] = msg.tool_call_id
    return step


def _index(result: TraceImport, cid: str, calls: list[_Call], record: dict[str, Any]) -> None:
    """Where each call's span and trace went: the turn whose reply it wrote, else the turn it served (a tool
    step), for reviewers' annotations."""
    by_reply = {(t["trace_id"], t["span_id"]): i for i, t in enumerate(record["turns"])}
    pending: list[_Call] = []  # calls before a reply (tool steps) serve that reply's turn
    for call in sorted(calls, key=lambda c: (c.start_ns, c.span_id)):
        pending.append(call)
        i = by_reply.get((call.trace_id, call.span_id))
        if i is not None:
            for p in pending:
                result.turn_of_span[p.span_id] = (cid, i)
            pending = []
    for p in pending:  # calls after the last reply (a last message left unanswered)
        result.turn_of_span[p.span_id] = (cid, len(record["turns"]) - 1)
    for call in calls:
        turn, known = result.turn_of_span[call.span_id], result.turns_of_trace.get(call.trace_id, ())
        if turn not in known:
            result.turns_of_trace[call.trace_id] = (*known, turn)
