"""OTLP JSON files -> `Span`s, streamed: what an OpenTelemetry Collector's file exporter writes.

The exporter writes one `ExportTraceServiceRequest` per line (JSON lines); a hand-saved export may be one
JSON document, pretty-printed. Both are read, in protobuf's JSON mapping: camelCase keys, nanosecond times as
text, attributes as [{key, value: {stringValue|intValue|doubleValue|boolValue|arrayValue|kvlistValue|
bytesValue}}], ids in hex (the collector's) or base64 (protobuf's own MessageToJson; decoded to hex).

A file of lines is read one line at a time and each span is handed on as it is read, so memory does not grow
with the export (a single pretty-printed document is read whole: such files are small). gzip files and the
file exporter's length-prefixed messages (`format: proto`) are read too (otlp_framing.py). A line that is not
JSON (cut short, not UTF-8), or a span that is not OTLP JSON (a time that is not a number, a zero id), is one
error naming the file and line.
"""

from __future__ import annotations

import base64
import binascii
import gc
import json
from collections.abc import Iterator, Mapping
from operator import itemgetter
from pathlib import Path
from types import MappingProxyType
from typing import Any

from rubric.errors import InputError
from rubric.traces.otlp_framing import (
    gzip_errors,
    is_length_prefixed,
    open_export,
    prefixed_messages,
)
from rubric.traces.otlp_paths import otlp_paths
from rubric.traces.otlp_values import any_value
from rubric.traces.spans import EVENTS_ONLY, Span, SpanEvent

ZERO_IDS = frozenset({"0" * 32, "0" * 16, "A" * 22 + "==", "A" * 11 + "="})
"""OTLP's invalid ids, in hex and in base64 (checked before decoding: a set lookup per span)."""
READ_BUFFER = 1 << 22  # a collector's lines are hundreds of kilobytes: read them in few calls
_key = itemgetter("key")


class OtlpFiles:
    """Spans of OTLP files: `files` is a file, a folder (every *.json, *.jsonl and *.pb in it, gzipped or not,
    sorted) or a glob pattern (its matches, sorted)."""

    def __init__(self, files: str | Path, *, only: frozenset[str] | None = None):
        """only: attribute keys the caller reads; a span with none of them (and no events) comes without its
        attributes (not decoded: most spans of an export are web requests and queries, and decoding their
        attributes would be most of the work). None: every span's attributes."""
        self.files = str(files)
        self.only = only
        self.paths = otlp_paths(self.files)
        self.description = f"OTLP files {self.files}"
        self.bytes = sum(p.stat().st_size for p in self.paths)
        if not self.bytes:
            raise InputError(
                f"{'the file is' if len(self.paths) == 1 else f'all {len(self.paths)} files are'} empty: no spans "
                "exported yet.",
                path=self.files,
                fix="pass files= an export that holds spans (a collector writes its file as spans arrive: check "
                "its pipeline's exporters lists the file exporter).",
            )

    def spans(self) -> Iterator[Span]:
        """Every file's spans, in order. Python's cycle collector is paused meanwhile (and while the caller
        handles each span): parsing JSON makes containers by the million, and each batch of them set off a
        collection walking every object the caller kept so far, a third of an import's time; parsed JSON
        holds no cycles, so reference counting frees it all."""
        was = gc.isenabled()
        gc.disable()
        try:
            for path in self.paths:
                yield from read_otlp_file(path, only=self.only)
        finally:
            if was:
                gc.enable()


def read_otlp_file(path: Path, *, only: frozenset[str] | None = None) -> Iterator[Span]:
    """The spans of one file, in file order, streamed line by line or message by message (or one document,
    read whole); gzip is decompressed as it is read."""
    try:
        with open_export(path, READ_BUFFER) as fh:
            yield from _read(fh, path, only)
    except gzip_errors() as exc:
        raise InputError(
            f"not a whole gzip file ({exc or type(exc).__name__}): cut short, or damaged.",
            path=path,
            fix="copy the export again (gzip -t FILE checks it), or pass the uncompressed file.",
        ) from None


def _read(fh: Any, path: Path, only: frozenset[str] | None) -> Iterator[Span]:
    first = fh.read(1)
    if is_length_prefixed(first):
        for number, request in prefixed_messages(fh, path, first):
            yield from _request_spans(request, path, number, only)
        return
    first += fh.readline() if first not in (b"\n", b"") else b""
    if not first:
        return  # an empty file: a collector that exported nothing yet
    one_document = _starts_a_document(first)
    if one_document:
        text = first + fh.read()
        if _console_exporter(text[:65536]):
            raise _console_error(path)
        yield from _request_spans(_parse(text, path, 1, whole=True), path, 1, only)
        return
    line_no = 1
    line = first
    while line:
        if line.strip():
            yield from _request_spans(_parse(line, path, line_no), path, line_no, only)
        line = fh.readline()
        line_no += 1


def _starts_a_document(first: bytes) -> bool:
    """A first line that does not hold a whole JSON object starts a pretty-printed document (`{` alone, or an
    opening line that parses to nothing); a cut-short JSON line is still reported as that line."""
    stripped = first.strip()
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:]
    return stripped in (b"{", b"[", b"") or (stripped.startswith(b"{") and not stripped.endswith(b"}"))


def _parse(data: bytes, path: Path, line_no: int, *, whole: bool = False) -> Any:
    try:
        return json.loads(data)
    except UnicodeDecodeError as exc:
        row = line_no + (data.count(b"\n", 0, exc.start) if whole else 0)
        raise InputError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x}).",
            path=path,
            row=row,
            fix="export the traces as OTLP JSON, UTF-8 (a binary file: the file exporter's format: proto output is "
            "read as it is written, each message after its 4-byte length; a bare protobuf message is not).",
        ) from None
    except json.JSONDecodeError as exc:
        row = line_no + exc.lineno - 1
        raise InputError(
            f"not a JSON {'document' if whole else 'line'} ({exc.msg} at column {exc.colno}): cut short, or not "
            "OTLP JSON.",
            path=path,
            row=row,
            fix="export whole lines (a collector stopped mid-write leaves its last line cut: delete that line), "
            "one ExportTraceServiceRequest per line.",
        ) from None


def _request_spans(request: Any, path: Path, line_no: int, only: frozenset[str] | None = None) -> list[Span]:
    """The spans of one ExportTraceServiceRequest (a list of them, for a document holding several): a list,
    not a generator, since a line's spans are in memory anyway and each generator level costs per span."""
    if isinstance(request, list):
        return [span for item in request for span in _request_spans(item, path, line_no, only)]
    if isinstance(request, dict) and "resourceLogs" in request:
        return list(_log_events(request, path, line_no))
    if isinstance(request, dict) and "resourceMetrics" in request:
        return []  # a collector writing its metrics pipeline to the same file
    if isinstance(request, dict) and "conversation_id" in request and ("turns" in request or "messages" in request):
        raise InputError(
            "a conversation (conversation_id, turns), not OTLP traces: this file is a conversations.jsonl already.",
            path=path,
            row=line_no,
            fix="pass it to gather (conversations=) or score as it is; import source=otel reads a collector's export.",
        )
    if isinstance(request, dict) and isinstance(request.get("context"), dict) and "trace_id" in request["context"]:
        raise _console_error(path, line_no)  # a span printed one per line by the console exporter
    if not isinstance(request, dict) or not isinstance(request.get("resourceSpans"), list):
        raise InputError(
            "not an OTLP ExportTraceServiceRequest (no resourceSpans list).",
            path=path,
            row=line_no,
            fix="pass files= OTLP JSON traces, as the collector's file exporter writes them.",
        )
    where = f"{path} line {line_no}"
    spans = []
    try:
        for resource_spans in request.get("resourceSpans", ()):
            resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
            scopes = resource_spans.get("scopeSpans") or resource_spans.get("instrumentationLibrarySpans") or ()
            for scope in scopes:
                spans += [_span(raw, resource, where, path, line_no, only) for raw in scope.get("spans") or ()]
    except InputError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _not_otlp(exc, path, line_no) from None
    return spans


def _console_exporter(head: bytes) -> bool:
    """Whether a file starts as OpenTelemetry's ConsoleSpanExporter writes spans (each span's `to_json()`,
    pretty-printed one after another: `"context": {"trace_id": "0x..."}`), a debugging aid, not OTLP."""
    compact = b"".join(head.split())
    return b'"context":{"trace_id":"0x' in compact


def _console_error(path: Path, line_no: int | None = None) -> InputError:
    return InputError(
        "spans as OpenTelemetry's ConsoleSpanExporter prints them (each span's to_json(): \"context\": "
        '{"trace_id": "0x..."}), not OTLP: that format is for reading by eye and is not read.',
        path=path,
        row=line_no,
        fix="export OTLP instead: the SDK's OTLPSpanExporter to an OpenTelemetry Collector whose file exporter "
        "writes the file (exporters: file: path: traces.jsonl), then import that file.",
    )


def _not_otlp(exc: Exception, path: Path, line_no: int) -> InputError:
    """A request whose parts are not where or what OTLP JSON puts them (a list where an object goes, a time
    written as a date): one error naming the line, with what Python found."""
    detail = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError):
        detail = f"no {detail} key"
    return InputError(
        f"a span or resource is not OTLP JSON ({detail}).",
        path=path,
        row=line_no,
        fix="export with an OpenTelemetry SDK or Collector: times are nanoseconds since the epoch (a number, or "
        "one as text), attributes a list of {key, value}, ids hex.",
    )


def _log_events(request: Mapping[str, Any], path: Path, line_no: int) -> Iterator[Span]:
    """An ExportLogsServiceRequest (a collector writing its logs pipeline to the same file): the log records
    tied to a span, as EVENTS_ONLY records of that span (one per span), each record an event named by its
    eventName (or event.name attribute) with its body as the `body` attribute."""
    try:
        yield from _log_records(request, path, line_no)
    except InputError:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _not_otlp(exc, path, line_no) from None


def _log_records(request: Mapping[str, Any], path: Path, line_no: int) -> Iterator[Span]:
    where = f"{path} line {line_no}"
    for resource_logs in request.get("resourceLogs") or ():
        resource = _attributes((resource_logs.get("resource") or {}).get("attributes"))
        by_span: dict[tuple[str, str], list[SpanEvent]] = {}
        for scope in resource_logs.get("scopeLogs") or ():
            for record in scope.get("logRecords") or ():
                trace_id, span_id = record.get("traceId"), record.get("spanId")
                if not trace_id or not span_id:
                    continue  # a log record of no span: nothing a conversation needs
                attributes = _attributes(record.get("attributes"))
                name = record.get("eventName") or attributes.get("event.name") or ""
                if record.get("body"):
                    attributes["body"] = any_value(record["body"])
                time_ns = int(record.get("timeUnixNano") or record.get("observedTimeUnixNano") or 0)
                key = (_hex_id(trace_id, 32, path, line_no), _hex_id(span_id, 16, path, line_no))
                by_span.setdefault(key, []).append(SpanEvent(name, time_ns, attributes))
        for (trace_id, span_id), events in by_span.items():
            start = min(e.time_ns for e in events)
            yield Span(trace_id, span_id, None, EVENTS_ONLY, start, start, {}, resource, tuple(events), where)


def _span(
    raw: Mapping[str, Any],
    resource: Mapping[str, Any],
    where: str,
    path: Path,
    line_no: int,
    only: frozenset[str] | None,
) -> Span:
    trace_id, span_id = raw.get("traceId"), raw.get("spanId")
    if not trace_id or not span_id:
        raise InputError(
            f"a span ({raw.get('name')!r}) without traceId or spanId.",
            path=path,
            row=line_no,
            fix="export complete spans (OTLP JSON gives every span its traceId and spanId).",
        )
    if trace_id in ZERO_IDS or span_id in ZERO_IDS:
        raise InputError(
            f"a span ({raw.get('name')!r}) with an all-zero {'traceId' if trace_id in ZERO_IDS else 'spanId'}, "
            "which OTLP calls invalid.",
            path=path,
            row=line_no,
            fix="export the spans as the SDK made them (a zero id is a span that was never sampled or was "
            "rewritten on its way).",
        )
    parent = raw.get("parentSpanId")
    events = raw.get("events")
    attributes = raw.get("attributes")
    if only is not None and not events and attributes and only.isdisjoint(map(_key, attributes)):
        attributes = None
    return _new_span(
        trace_id.lower() if len(trace_id) == 32 else _hex_id(trace_id, 32, path, line_no),
        span_id.lower() if len(span_id) == 16 else _hex_id(span_id, 16, path, line_no),
        (parent.lower() if len(parent) == 16 else _hex_id(parent, 16, path, line_no)) if parent else None,
        raw.get("name", ""),
        int(raw.get("startTimeUnixNano") or 0),
        int(raw.get("endTimeUnixNano") or 0),
        _attributes(attributes),
        resource,
        tuple(
            SpanEvent(e.get("name", ""), int(e.get("timeUnixNano") or 0), _attributes(e.get("attributes")))
            for e in events
        )
        if events
        else (),
        where,
    )


def _span_maker() -> Any:
    """Span(...) at half the cost: a frozen dataclass's __init__ sets each field through object.__setattr__,
    which is a third of the time of reading a million spans; the slots' own setters do the same work."""
    setters = [getattr(Span, name).__set__ for name in Span.__slots__]
    no_ids: Mapping[str, str] = MappingProxyType({})
    new = object.__new__
    (trace, span, parent, name, start, end, attrs, resource, events, where, source_ids) = setters

    def make(t, s, p, n, st, en, at, r, ev, w) -> Span:  # noqa: ANN001  (the Span fields, in order)
        obj = new(Span)
        trace(obj, t), span(obj, s), parent(obj, p), name(obj, n), start(obj, st), end(obj, en)
        attrs(obj, at), resource(obj, r), events(obj, ev), where(obj, w), source_ids(obj, no_ids)
        return obj

    assert Span.__slots__ == (
        "trace_id", "span_id", "parent_span_id", "name", "start_ns", "end_ns", "attributes", "resource", "events",
        "where", "source_ids",
    )  # fmt: skip
    return make


_new_span = _span_maker()


def _hex_id(value: str, length: int, path: Path, line_no: int) -> str:
    """An id as lower-case hex: the collector writes hex; protobuf's MessageToJson writes the bytes in base64
    (24 characters for a trace id, 12 for a span id)."""
    if len(value) == length:
        return value.lower()
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != length // 2:
        raise InputError(
            f"id {value!r} is neither {length} hex digits nor base64 of {length // 2} bytes.",
            path=path,
            row=line_no,
            fix="export ids as OTLP JSON writes them (hex).",
        )
    return raw.hex()


def _attributes(raw: Any) -> dict[str, Any]:
    """[{key, value: AnyValue}] -> {key: value} (an empty list or none gives {})."""
    if not raw:
        return {}
    out = {}
    for kv in raw:
        value = kv.get("value")
        if value:
            string = value.get("stringValue")
            out[kv["key"]] = string if string is not None else any_value(value)
        else:
            out[kv["key"]] = None
    return out
