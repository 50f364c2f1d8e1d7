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
the sources (OTLP files, MLflow, Phoenix) share. Here: the reading pass and the entry; one conversation's
rebuilding is conversation.py's, the since=/until=/sample= choice selection.py's.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rubric.errors import InputError
from rubric.ids import clean_id
from rubric.traces.conversation import KeptCall, conversation_record, index_turns
from rubric.traces.llm_call import LlmCall
from rubric.traces.messages import CALL_MARKERS, CAPTURE_SETTING, read_call, surely_a_call
from rubric.traces.selection import iso_time, select_conversations
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
    reader = _Reader(selection, progress, kind=str(source.get("kind") or ""))
    for span in spans:
        reader.add(span)
    calls = reader.finish(description)
    return _build(calls, reader, selection, source, description)


class _Reader:
    """The streaming pass: LLM calls kept (messages interned), one start time per trace, the rest dropped."""

    def __init__(self, selection: TraceSelection, progress: bool, kind: str = ""):
        self.selection, self.progress, self.kind = selection, progress, kind  # kind: the source's (otel, mlflow)
        self.keys = (selection.conversation_key,) if selection.conversation_key else CONVERSATION_KEYS
        self.spans = 0
        self.skipped: Counter[str] = Counter()
        self.trace_start: dict[str, int] = {}
        self.trace_key: dict[str, str] = {}  # a conversation key on any span of the trace (an agent's root, say)
        self.trace_role: dict[str, str] = {}
        self.calls: dict[str, KeptCall] = {}
        self.empty: dict[str, Span] = {}  # calls without content so far: their messages may come as log records
        self.log_events: dict[str, list[Any]] = {}
        self.key_like: Counter[str] = Counter()  # attribute names that look like a conversation id, for the error
        self.other_services: Counter[Any] = Counter()  # the service.name of spans service= left out, for the error
        self._interned: dict[Any, Any] = {}

    def add(self, span: Span) -> None:
        self.spans += 1
        if self.progress and self.spans % PROGRESS_EVERY == 0:
            log.info(f"import: {self.spans:,} spans read, {len(self.calls):,} LLM calls")
        selection = self.selection
        if selection.service is not None and span.resource.get("service.name") != selection.service:
            self.skipped["spans of other services"] += 1
            self.other_services[span.resource.get("service.name")] += 1
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
        kept = KeptCall(
            span.trace_id, span.span_id, span.start_ns, span.where, key, role, self._intern(call), span.source_ids
        )
        earlier = self.calls.get(span.span_id)
        if earlier is not None and dataclasses.replace(kept, where=earlier.where) == earlier:
            self.skipped["repeated identical spans (a collector's retry), taken once"] += 1
            return
        if earlier is not None:
            raise InputError(
                f"span id {span.span_id} appears twice ({earlier.where or 'first'} and "
                f"{span.where or 'again'}), with different content: which one is the call cannot be told.",
                fix="import each span once: drop the repeated file or lines (an edited copy of an export?).",
            )
        self.calls[span.span_id] = kept
        if key is None:
            self.key_like.update(k for k in span.attributes if _looks_like_key(k))
            self.key_like.update(k for k in span.resource if _looks_like_key(k))

    def _value(self, span: Span, keys: Iterable[str | None]) -> str | None:
        for key in keys:
            if key is None:
                continue
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
            call.response_id,
            call.previous_response_id,
        )

    def finish(self, description: str) -> list[KeptCall]:
        """The kept calls with their conversation key; the errors that concern the export as a whole."""
        empty = self._with_log_events()
        if not self.calls and not empty:
            raise InputError(
                f"no LLM call in {description} ({self.spans:,} spans read"
                + (f", none of service {self.selection.service!r}" if self.selection.service else "")
                + ")"
                + (
                    f"; the export's services: {', '.join(sorted(map(str, self.other_services))[:8])}."
                    if self.other_services
                    else "."
                ),
                fix="export the spans of the chatbot's model calls (OTel GenAI, OpenInference or OpenLLMetry "
                "instrumentation), or check service=.",
            )
        if empty:
            first, call = empty[0]
            assert call is not None, "a span surely_a_call reads as a call"
            raise InputError(
                f"{len(empty):,} LLM call spans hold no message content (first: span {first.span_id} at "
                f"{first.where or description}).",
                fix=f"turn content capture on: {CAPTURE_SETTING[call.convention]}; then export again.",
            )
        kept = list(self.calls.values())
        for one in kept:
            if one.key is None:
                one.key = self.trace_key.get(one.trace_id)
            if one.role is None and self.selection.role_from:
                one.role = self.trace_role.get(one.trace_id)
        join_response_chains(kept)
        keyed = [c for c in kept if c.key is not None]
        if not keyed:
            raise InputError(
                f"no LLM call in {description} names its conversation ({', '.join(self.keys)} not set on them or "
                "their traces).",
                fix=self._key_fix(),
            )
        if len(keyed) < len(kept):
            self.skipped["LLM calls without a conversation id"] += len(kept) - len(keyed)
        return keyed

    def _with_log_events(self) -> list[tuple[Span, LlmCall | None]]:
        """The calls that had no content, read again with the log records of their span (older GenAI
        instrumentations log messages apart from the span); those still without any, for the error."""
        still: list[tuple[Span, LlmCall | None]] = []
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
        if self.kind == "mlflow" or any(c.call.convention == "mlflow" for c in self.calls.values()):
            fix = (
                "name each conversation's session in the traced code with MLflow's "
                "mlflow.update_current_trace(session_id=CONVERSATION_ID) (inside @mlflow.trace or "
                "mlflow.start_span), or pass conversation_key= a tag or metadata key of the traces that names it"
            )
            return fix + (
                " (these traces have " + ", ".join(k for k, _ in self.key_like.most_common(3)) + ")."
                if self.key_like
                else "."
            )
        fix = (
            "set gen_ai.conversation.id (OTel GenAI) or session.id (OpenInference: using_session) on the chatbot's "
            "spans, or pass conversation_key= the attribute that names a conversation"
        )
        if self.key_like:
            fix += " (these spans have " + ", ".join(k for k, _ in self.key_like.most_common(3)) + ")"
        return fix + "."


def join_response_chains(calls: list[KeptCall]) -> None:
    """Calls of the Responses API chained by `previous_response_id` are one conversation: a call without a
    conversation id takes the one of the chain it continues, else the id of the chain's first response (a
    chatbot that lets OpenAI keep the history need not name its conversations)."""
    by_response = {c.call.response_id: c for c in calls if c.call.response_id}
    for call in calls:
        if call.key is not None or not call.call.response_id:
            continue
        chain, at = [call], call
        while at.key is None and at.call.previous_response_id in by_response and len(chain) <= len(by_response):
            at = by_response[at.call.previous_response_id]  # (bounded: a cycle of reused ids ends)
            chain.append(at)
        key = at.key or at.call.previous_response_id or at.call.response_id  # the head's id, or the one it names
        for link in chain:
            link.key = link.key or key


def _looks_like_key(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in ("conversation", "session", "thread", "chat_id", "dialog")) and not low.startswith(
        ("gen_ai.input", "gen_ai.output", "llm.input", "llm.output")
    )


def _build(
    calls: list[KeptCall], reader: _Reader, selection: TraceSelection, source: Mapping[str, Any], description: str
) -> TraceImport:
    """Group, select and rebuild the conversations."""
    groups: dict[str, list[KeptCall]] = defaultdict(list)
    for call in calls:
        groups[call.key].append(call)  # type: ignore[index]
    skipped = reader.skipped
    starts = {cid: min(reader.trace_start[c.trace_id] for c in group) for cid, group in groups.items()}
    chosen = select_conversations(
        starts,
        since=selection.since,
        until=selection.until,
        sample=selection.sample,
        seed=selection.seed,
        skipped=skipped,
        description=description,
    )
    result = TraceImport(records=[], counts={}, skipped={})
    result.counts = {"spans": reader.spans, "llm_calls": len(reader.calls)}
    reader.release()  # from here on the calls live in `groups` only, each freed once its record is made
    source = dict(source)
    for cid in chosen:
        calls = sorted(groups.pop(cid), key=lambda c: (c.start_ns, c.span_id))
        record = conversation_record(cid, calls, role=selection.role, role_from=selection.role_from, skipped=skipped)
        record["started_at"] = iso_time(starts[cid])
        record["source"] = source
        result.records.append(record)
        index_turns(result.turn_of_span, result.turns_of_trace, cid, calls, record)
    result.skipped = {k: v for k, v in skipped.items() if v}
    result.counts.update(conversations=len(result.records), turns=sum(len(r["turns"]) for r in result.records))
    return result
