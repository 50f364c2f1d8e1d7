"""Each bad input of a trace import is one line naming the file and line (or the span) and the fix, raised
before anything is written (the command writes only after `assemble` returns)."""

from __future__ import annotations

import json

import pytest

from calibration.connectors.trace_import import selection_of
from calibration.schema.source_keys import OtelKeys
from rubric.errors import InputError
from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from rubric.traces.selection import parse_time
from tests.traces.otlp_json import SYSTEM, conversation_spans, jsonl, request, span


def run(path, **selection):
    source = OtlpFiles(path)
    return assemble(
        source.spans(), TraceSelection(**selection), source={"kind": "otel"}, description=source.description
    )


def write(tmp_path, text: str | bytes, name="export.jsonl"):
    path = tmp_path / name
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


def strip(spans, *keys):
    """The spans without the attributes `keys`."""
    for s in spans:
        s["attributes"] = [a for a in s["attributes"] if a["key"] not in keys]
    return spans


def without(convention, *prefixes):
    """A conversation's export in `convention` without the attributes whose keys start with one of `prefixes`."""
    spans = conversation_spans(convention, 1, "c1")
    return jsonl(
        [request(strip(spans, *[a["key"] for s in spans for a in s["attributes"] if a["key"].startswith(prefixes)]))]
    )


def good_lines(n=1):
    return jsonl([request(conversation_spans("genai", 1 + 10 * i, f"c{i}")) for i in range(n)])


CASES = {
    "truncated line": (
        lambda: good_lines(2)[:-40] + "\n",
        r"export\.jsonl, row 2: not a JSON line .*cut short",
    ),
    "not UTF-8": (
        lambda: good_lines(1).encode() + b'{"resourceSpans": [], "x": "\xff\xfe"}\n',
        r"export\.jsonl, row 2: not UTF-8 text \(byte 0xff\)",
    ),
    "not OTLP": (lambda: '{"hello": 1}\n', r"row 1: not an OTLP ExportTraceServiceRequest"),
    "a conversations.jsonl": (
        lambda: '{"conversation_id": "c1", "chatbot_role": "r", "turns": [{"user": "hi", "assistant": "hello"}]}\n',
        r"row 1: a conversation \(conversation_id, turns\), not OTLP traces.*Fix: pass it to gather",
    ),
    "duplicate span ids, different content": (
        lambda: good_lines(1) + jsonl([request(conversation_spans("genai", 1, "another"))]),
        r"span id 0000000000000065 appears twice \(.*export\.jsonl line 1 and .*export\.jsonl line 2\), with "
        r"different content",
    ),
    "no content": (
        lambda: jsonl(
            [
                request(
                    strip(
                        conversation_spans("genai", 1, "c1"),
                        "gen_ai.input.messages",
                        "gen_ai.output.messages",
                        "gen_ai.system_instructions",
                    )
                )
            ]
        ),
        r"4 LLM call spans hold no message content \(first: span 0000000000000065 at .*export\.jsonl line 1\)"
        r".*OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true",
    ),
    "no content, OpenInference": (
        lambda: without("openinference", "llm."),
        r"hold no message content.*OPENINFERENCE_HIDE_INPUTS=false",
    ),
    "no content, OpenLLMetry": (
        lambda: without("openllmetry", "gen_ai.prompt", "gen_ai.completion"),
        r"hold no message content.*TRACELOOP_TRACE_CONTENT=true",
    ),
    "no conversation id": (
        lambda: jsonl([request(strip(conversation_spans("genai", 1, "c1"), "gen_ai.conversation.id"))]),
        r"no LLM call in .* names its conversation \(gen_ai\.conversation\.id, session\.id.*"
        r"Fix: set gen_ai\.conversation\.id .* or pass conversation_key=",
    ),
    "no assistant text": (
        lambda: jsonl([request(strip(conversation_spans("genai", 1, "c1")[:1], "gen_ai.output.messages"))]),
        r"conversation 'c1' has no assistant text",
    ),
    "two system roles": (
        lambda: jsonl(
            [
                request(conversation_spans("genai", 1, "c1")),
                request(_other_role(conversation_spans("openinference", 5, "c1", start=100))),
            ]
        ),
        r"conversation 'c1' has two different system roles: 'You are the help desk.*' \(span .*\) and 'You are a pirate.*'",
    ),
    "an all-zero trace id": (
        lambda: jsonl([request(_with(conversation_spans("genai", 1, "c1"), 0, traceId="0" * 32))]),
        r"export\.jsonl, row 1: a span \('chat gpt-4o-mini'\) with an all-zero traceId",
    ),
    "an all-zero span id, in base64": (
        lambda: jsonl([request(_with(conversation_spans("genai", 1, "c1"), 1, spanId="AAAAAAAAAAA="))]),
        r"export\.jsonl, row 1: a span .* with an all-zero spanId",
    ),
    "a time written as a date": (
        lambda: (
            good_lines(1)
            + jsonl(
                [request(_with(conversation_spans("genai", 11, "c2"), 0, startTimeUnixNano="2026-11-02T09:00:00Z"))]
            )
        ),
        r"export\.jsonl, row 2: a span or resource is not OTLP JSON \(invalid literal .*'2026-11-02T09:00:00Z'\)"
        r".*Fix: .*times are nanoseconds since the epoch",
    ),
    "spans an object, not a list": (
        lambda: jsonl([{"resourceSpans": [{"scopeSpans": [{"spans": {"traceId": "a" * 32}}]}]}]),
        r"row 1: a span or resource is not OTLP JSON",
    ),
    "resourceSpans of strings": (
        lambda: jsonl([{"resourceSpans": ["chatbot"]}]),
        r"row 1: a span or resource is not OTLP JSON",
    ),
    "attributes an object": (
        lambda: jsonl([request([span(1, 1, 0, {}) | {"attributes": {"gen_ai.system": "openai"}}])]),
        r"row 1: a span or resource is not OTLP JSON",
    ),
    "log records of strings": (
        lambda: jsonl([{"resourceLogs": [{"scopeLogs": [{"logRecords": ["hello"]}]}]}]),
        r"row 1: a span or resource is not OTLP JSON",
    ),
    "no LLM call": (
        lambda: jsonl([request([span(1, 1, 0, {"http.route": "/"}, name="GET /")])]),
        r"no LLM call in OTLP files .* \(1 spans read\)",
    ),
}


def _with(spans, index, **fields):
    """The spans, span `index` with `fields` replaced."""
    spans[index] = spans[index] | fields
    return spans


def _other_role(spans):
    for s in spans:
        for a in s["attributes"]:
            if a["key"] == "llm.input_messages.0.message.content":
                a["value"] = {"stringValue": "You are a pirate. Speak like one."}
    return spans


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_one_line_naming_where_and_the_fix(tmp_path, case):
    make, message = CASES[case]
    path = write(tmp_path, make())
    with pytest.raises(InputError, match=message) as caught:
        run(path)
    assert "\n" not in str(caught.value) and "Fix: " in str(caught.value)


def test_no_conversation_id_names_attributes_that_look_like_one(tmp_path):
    spans = strip(conversation_spans("genai", 1, "c1"), "gen_ai.conversation.id")
    for s in spans:
        s["attributes"].append({"key": "app.chat_session", "value": {"stringValue": "c1"}})
    path = write(tmp_path, jsonl([request(spans)]))
    with pytest.raises(InputError, match=r"these spans have app\.chat_session"):
        run(path)
    assert run(path, conversation_key="app.chat_session").records[0]["conversation_id"] == "c1"


def test_missing_files_and_empty_folders_and_bad_times_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"no such file, folder or matching files"):
        OtlpFiles(tmp_path / "nothing*.jsonl")
    with pytest.raises(InputError, match=r"no \*\.json, \*\.jsonl, \*\.pb, .* file in this folder\. Fix"):
        OtlpFiles(tmp_path)
    with pytest.raises(InputError, match=r"since='last week' is not an ISO 8601 time"):
        parse_time("last week", "since")


def test_an_empty_export_and_a_reversed_window_are_one_line(tmp_path):
    write(tmp_path, "", "a.jsonl")
    with pytest.raises(InputError, match=r"a\.jsonl: the file is empty: no spans exported yet\. Fix: "):
        OtlpFiles(tmp_path / "a.jsonl")
    write(tmp_path, "", "b.jsonl")
    with pytest.raises(InputError, match=r"all 2 files are empty"):
        OtlpFiles(tmp_path)
    write(tmp_path, good_lines(1), "c.jsonl")  # an empty file beside others: a collector that exported nothing yet
    assert len(run(tmp_path).records) == 1
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"no \*\.json, \*\.jsonl, .* file in this folder \(it has notes\.txt\)"):
        OtlpFiles(tmp_path / "sub")
    with pytest.raises(InputError, match=r"since=2026-11-03 is not before until=2026-11-01.*Fix: swap them"):
        selection_of(OtelKeys(files="x", since="2026-11-03", until="2026-11-01"))
    with pytest.raises(InputError, match=r"since=2026-11-01T10:00 is not before until=2026-11-01T10:00"):
        selection_of(OtelKeys(files="x", since="2026-11-01T10:00", until="2026-11-01T10:00"))


def test_a_service_that_is_not_in_the_export_lists_those_that_are(tmp_path):
    path = write(tmp_path, jsonl([request(conversation_spans("genai", 1, "c1"), service="maths_tutor")]))
    with pytest.raises(InputError, match=r"none of service 'maths-tutor'\); the export's services: maths_tutor\. Fix"):
        run(path, service="maths-tutor")


def test_a_truncated_pretty_printed_document_names_its_line(tmp_path):
    text = json.dumps(request(conversation_spans("genai", 1, "c1")), indent=1)
    path = write(tmp_path, text[: len(text) // 2], "export.json")
    with pytest.raises(InputError, match=r"export\.json, row \d+: not a JSON document"):
        run(path)


def test_system_role_differs_only_where_it_really_does(tmp_path):
    """The same role from two conventions (spaces aside) is one role."""
    path = write(
        tmp_path,
        jsonl([request(conversation_spans("genai", 1, "c1")), request(conversation_spans("openinference", 5, "c2"))]),
    )
    assert [r["chatbot_role"] for r in run(path).records] == [SYSTEM, SYSTEM]


def test_identical_repeated_spans_are_taken_once_and_counted(tmp_path):
    """A collector that retries an export writes the same spans twice: the same calls, read once."""
    once = run(write(tmp_path, good_lines(2), "once.jsonl"))
    twice = run(write(tmp_path, good_lines(2) + good_lines(1), "twice.jsonl"))
    assert twice.records == once.records
    assert twice.skipped["repeated identical spans (a collector's retry), taken once"] == 4


@pytest.mark.parametrize("link", ["loop", "dangling"])
def test_a_link_that_cannot_be_followed_is_named_not_skipped(tmp_path, link):
    folder = tmp_path / "exports"
    folder.mkdir()
    write(folder, good_lines(1), "part-0.jsonl")
    bad = folder / "part-1.jsonl"
    if link == "loop":
        (folder / "part-2.jsonl").symlink_to(bad)
        bad.symlink_to(folder / "part-2.jsonl")
    else:
        bad.symlink_to(tmp_path / "gone.jsonl")
    said = "loops back on itself" if link == "loop" else "leads to nothing"
    for files in (folder, f"{folder}/*.jsonl", bad):
        with pytest.raises(InputError, match=rf"part-[12]\.jsonl: this is a symbolic link that {said}"):
            run(files)


@pytest.mark.parametrize("one_per_line", [False, True], ids=["pretty-printed", "one-per-line"])
def test_the_console_exporters_output_is_named_with_how_to_export_otlp(tmp_path, one_per_line):
    """Spans written by the SDK's own ConsoleSpanExporter (to a file, as a user debugging would), pretty-printed
    as it does by default or one per line with a formatter: named for what they are, not a cut-off line."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    path = tmp_path / "console.json"
    with path.open("w", encoding="utf-8") as out:
        formatter = (lambda s: s.to_json(indent=None) + "\n") if one_per_line else (lambda s: s.to_json() + "\n")
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=out, formatter=formatter)))
        tracer = provider.get_tracer("bot")
        for n in range(2):
            with tracer.start_as_current_span("chat", attributes={"gen_ai.operation.name": "chat", "n": n}):
                pass
        provider.shutdown()
    with pytest.raises(InputError, match="ConsoleSpanExporter prints them") as caught:
        run(path)
    assert "\n" not in str(caught.value) and "OTLPSpanExporter to an OpenTelemetry Collector" in str(caught.value)
    assert "cut short" not in str(caught.value)
