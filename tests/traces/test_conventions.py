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


def test_the_responses_api_items_read_as_messages():
    """The Responses API's spellings an instrumentation keeps whole: input as text or items (parts of type
    input_text), instructions as text or message items, reasoning items left out, two function calls in a row
    one assistant step, a function call's id its call_id, a Response logged as text only."""
    from rubric.traces.llm_call import Message, ToolCall, openai_exchange

    request = {
        "instructions": [{"role": "developer", "content": "You are Sam."}],
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Where are PX-1 and PX-2?"}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "track", "arguments": '{"q": 1}'},
            {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "track", "arguments": '{"q": 2}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "out for delivery"},
            {"type": "function_call_output", "call_id": "call_2", "output": "delivered"},
        ],
        "previous_response_id": "resp_0",
    }
    response = {
        "id": "resp_1",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "One is out."}]},
        ],
    }
    call = openai_exchange(request, response, "mlflow")
    assert call.system == "You are Sam."
    assert call.input == (
        Message("user", "Where are PX-1 and PX-2?"),
        Message("assistant", "", (ToolCall("call_1", "track", '{"q": 1}'), ToolCall("call_2", "track", '{"q": 2}'))),
        Message("tool", "out for delivery", (), "call_1"),
        Message("tool", "delivered", (), "call_2"),
    )
    assert call.output == (Message("assistant", "One is out."),)
    assert (call.response_id, call.previous_response_id) == ("resp_1", "resp_0")
    plain = openai_exchange({"input": "Hi", "instructions": "You are Sam."}, "Hello!", "mlflow")
    assert (plain.system, plain.input, plain.output) == (
        "You are Sam.",
        (Message("user", "Hi"),),
        (Message("assistant", "Hello!"),),
    )
