"""Every convention read (messages.py), spelled by hand in OTLP JSON (otlp_json.py), gives back the chatbot's
conversation: its role, each user message and reply in order, the tool call and its result kept with the
turn, each turn pointing at the span that wrote its reply."""

from __future__ import annotations

import json

import pytest

from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from tests.traces.otlp_json import (
    CONVENTIONS,
    EXCHANGES,
    SYSTEM,
    TOOL,
    as_log_records,
    conversation_spans,
    jsonl,
    request,
)


def imported(path, **selection):
    source = OtlpFiles(path)
    return assemble(
        source.spans(), TraceSelection(**selection), source={"kind": "otel", "files": str(path)}, description="test"
    )


def check_conversation(record, conversation_id="c1"):
    assert record["conversation_id"] == conversation_id
    assert record["chatbot_role"] == SYSTEM
    assert [(t["user"], t["assistant"]) for t in record["turns"]] == EXCHANGES
    tools = [t.get("tools") for t in record["turns"]]
    assert tools[0] is None and tools[2] is None
    asks, answer = tools[1]
    assert asks["role"] == "assistant" and asks["tool_calls"][0]["name"] == TOOL["name"]
    assert json.loads(asks["tool_calls"][0]["arguments"]) == TOOL["arguments"]
    assert answer == {"role": "tool", "content": TOOL["result"], "tool_call_id": TOOL["id"]}
    for turn in record["turns"]:
        assert len(turn["trace_id"]) == 32 and len(turn["span_id"]) == 16


@pytest.mark.parametrize("convention", CONVENTIONS)
@pytest.mark.parametrize("tool_steps_in_history", [True, False])
def test_each_convention_gives_the_conversation_back(tmp_path, convention, tool_steps_in_history):
    spans = conversation_spans(convention, 1, "c1", tool_steps_in_history=tool_steps_in_history)
    path = tmp_path / "export.jsonl"
    path.write_text(jsonl([request(spans)]))
    result = imported(path)
    assert len(result.records) == 1
    record = result.records[0]
    check_conversation(record)
    # the reply of the tool turn was written by the second call of trace 2 (span ids: 100 + call number)
    assert record["turns"][1]["span_id"] == f"{103:016x}" and record["turns"][2]["span_id"] == f"{104:016x}"
    assert record["started_at"] == "2026-11-18T11:06:40.000000Z"
    assert record["source"] == {"kind": "otel", "files": str(path)}
    assert result.counts == {"spans": 7, "llm_calls": 4, "conversations": 1, "turns": 3}
    assert result.turn_of_span[f"{102:016x}"] == ("c1", 1)  # the tool-calling call serves the same turn


def test_messages_logged_as_log_records_beside_the_spans_are_read(tmp_path):
    spans, logs = as_log_records(conversation_spans("genai-events", 1, "c1"))
    path = tmp_path / "export.jsonl"
    path.write_text(jsonl([logs, request(spans)]))  # the log lines may come before their spans
    check_conversation(imported(path).records[0])


def test_a_pretty_printed_document_and_base64_ids_read_as_lines_do(tmp_path):
    import base64

    spans = conversation_spans("genai", 1, "c1")
    for s in spans:  # protobuf's own MessageToJson writes ids as base64
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in s:
                s[key] = base64.b64encode(bytes.fromhex(s[key])).decode()
    path = tmp_path / "export.json"
    path.write_text(json.dumps(request(spans), indent=2))
    record = imported(path).records[0]
    check_conversation(record)
    assert record["turns"][0]["span_id"] == f"{101:016x}"


def test_spans_that_only_name_a_model_system_are_no_calls(tmp_path):
    """A framework's workflow span with gen_ai.system and no content is left alone; an agent span is no call."""
    from tests.traces.otlp_json import span

    extra = [
        span(1, 900, 0, {"gen_ai.system": "openai", "gen_ai.conversation.id": "c1"}, name="workflow"),
        span(1, 901, 0, {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c1"}, name="agent"),
    ]
    path = tmp_path / "export.jsonl"
    path.write_text(jsonl([request(conversation_spans("genai", 1, "c1") + extra)]))
    result = imported(path)
    check_conversation(result.records[0])
    assert result.counts["llm_calls"] == 4
