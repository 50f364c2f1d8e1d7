"""OTLP JSON written by hand, as the collector's file exporter writes it (protobuf's JSON mapping), for the
trace-import tests and the import benchmark: one chatbot's calls spelled in each convention."""

from __future__ import annotations

import json
from typing import Any

from rubric.traces.otlp_values import encode_any_value, encode_attributes

SYSTEM = "You are the help desk of Acme Bank: accounts and cards only."
T0 = 1_795_000_000_000_000_000  # 2026-11-18T...Z in nanoseconds


def span(
    trace: int,
    span_id: int,
    start: int,
    attrs: dict[str, Any],
    *,
    name: str = "chat gpt-4o-mini",
    parent: int | None = None,
    events: list[tuple[str, dict[str, Any]]] = (),
) -> dict[str, Any]:
    """One span; ids from small integers (trace 32 hex digits, span 16), times in seconds after T0."""
    out = {
        "traceId": f"{trace:032x}",
        "spanId": f"{span_id:016x}",
        "name": name,
        "kind": 3,
        "startTimeUnixNano": str(T0 + start * 1_000_000_000),
        "endTimeUnixNano": str(T0 + start * 1_000_000_000 + 500_000_000),
        "attributes": encode_attributes(attrs),
        "status": {},
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent:016x}"
    if events:
        out["events"] = [
            {"timeUnixNano": str(T0 + start * 1_000_000_000), "name": n, "attributes": encode_attributes(a)}
            for n, a in events
        ]
    return out


def request(spans: list[dict[str, Any]], service: str = "chatbot", resource: dict[str, Any] | None = None) -> dict:
    """An ExportTraceServiceRequest holding `spans` of one service."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": encode_attributes({"service.name": service, **(resource or {})})},
                "scopeSpans": [{"scope": {"name": "tests"}, "spans": spans}],
            }
        ]
    }


def jsonl(requests: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in requests)


# The conversation each convention spells: (user, assistant) exchanges, the second one with a tool call.
EXCHANGES = [
    ("What is my card limit?", "Your limit is 2,000 EUR."),
    ("Block my card, please.", "Done: your card ending 4242 is blocked."),
    ("And the weather?", "I can only help with accounts and cards."),
]
TOOL = {"id": "call_1", "name": "block_card", "arguments": {"last4": "4242"}, "result": "blocked"}


def calls(*, tool_steps_in_history: bool = True) -> list[tuple[int, list[dict], list[dict]]]:
    """The chatbot's LLM calls for EXCHANGES as (exchange index, input, output) in OpenAI's message form
    (system first, history repeated); the second exchange takes two calls: a tool call, then the reply."""
    out = []
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    call = {
        "id": TOOL["id"],
        "type": "function",
        "function": {"name": TOOL["name"], "arguments": json.dumps(TOOL["arguments"])},
    }
    for i, (user, reply) in enumerate(EXCHANGES):
        history.append({"role": "user", "content": user})
        if i == 1:
            asks = {"role": "assistant", "content": None, "tool_calls": [call]}
            out.append((i, list(history), [asks]))
            steps = [asks, {"role": "tool", "tool_call_id": TOOL["id"], "content": TOOL["result"]}]
            out.append((i, [*history, *steps], [{"role": "assistant", "content": reply}]))
            if tool_steps_in_history:
                history.extend(steps)
        else:
            out.append((i, list(history), [{"role": "assistant", "content": reply}]))
        history.append({"role": "assistant", "content": reply})
    return out


def _parts(msg: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI message as an OTel GenAI message with parts."""
    if msg["role"] == "tool":
        return {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": msg["tool_call_id"], "response": msg["content"]}],
        }
    parts = [{"type": "text", "content": msg["content"]}] if msg.get("content") else []
    for c in msg.get("tool_calls") or ():
        parts.append(
            {
                "type": "tool_call",
                "id": c["id"],
                "name": c["function"]["name"],
                "arguments": json.loads(c["function"]["arguments"]),
            }
        )
    return {"role": msg["role"], "parts": parts}


def _flat(prefix: str, i: int, msg: dict[str, Any], style: str) -> dict[str, Any]:
    """An OpenAI message as OpenLLMetry's (style "llm") or OpenInference's (style "oi") flattened attributes."""
    base = f"{prefix}.{i}." + ("message." if style == "oi" else "")
    out: dict[str, Any] = {base + "role": msg["role"]}
    if msg.get("content"):
        if style == "oi" and msg["role"] == "user":  # OpenInference spells list content as contents.M
            out[base + "contents.0.message_content.type"] = "text"
            out[base + "contents.0.message_content.text"] = msg["content"]
        else:
            out[base + "content"] = msg["content"]
    if msg.get("tool_call_id"):
        out[base + "tool_call_id"] = msg["tool_call_id"]
    for m, c in enumerate(msg.get("tool_calls") or ()):
        tc = base + f"tool_calls.{m}." + ("tool_call." if style == "oi" else "")
        out[tc + "id"] = c["id"]
        fn = "function." if style == "oi" else ""
        out[tc + fn + "name"] = c["function"]["name"]
        out[tc + fn + "arguments"] = c["function"]["arguments"]
    return out


CONVENTIONS = ("genai", "genai-event", "genai-events", "openllmetry", "openinference", "openinference-value", "mlflow")


def call_attributes(convention: str, inputs: list[dict], outputs: list[dict], conversation: str):
    """(span attributes, span events) of one call in `convention`."""
    if convention in ("genai", "genai-event"):
        system = [m for m in inputs if m["role"] == "system"]
        content = {
            "gen_ai.input.messages": [_parts(m) for m in inputs if m["role"] != "system"],
            "gen_ai.output.messages": [_parts(m) for m in outputs],
            "gen_ai.system_instructions": [{"type": "text", "content": m["content"]} for m in system],
        }
        base = {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": conversation}
        if convention == "genai-event":
            return base, [("gen_ai.client.inference.operation.details", content)]
        return {**base, **{k: json.dumps(v) for k, v in content.items()}}, []
    if convention == "genai-events":
        events = []
        for m in inputs:
            body = {k: v for k, v in m.items() if k != "role" and v is not None}
            if m["role"] == "tool":
                body = {"content": m["content"], "id": m["tool_call_id"]}
            events.append((f"gen_ai.{m['role']}.message", {"body": json.dumps(body)}))
        for m in outputs:
            message = {k: v for k, v in m.items() if k != "role" and v is not None}
            events.append(("gen_ai.choice", {"body": {"index": 0, "finish_reason": "stop", "message": message}}))
        return {"gen_ai.system": "openai", "gen_ai.conversation.id": conversation}, events
    if convention == "openllmetry":
        attrs = {"llm.request.type": "chat", "gen_ai.system": "openai", "session.id": conversation}
        for n, m in enumerate(inputs):
            attrs.update(_flat("gen_ai.prompt", n, m, "llm"))
        for n, m in enumerate(outputs):
            attrs.update(_flat("gen_ai.completion", n, m, "llm"))
        return attrs, []
    if convention == "openinference":
        attrs = {"openinference.span.kind": "LLM", "llm.provider": "openai", "session.id": conversation}
        for n, m in enumerate(inputs):
            attrs.update(_flat("llm.input_messages", n, m, "oi"))
        for n, m in enumerate(outputs):
            attrs.update(_flat("llm.output_messages", n, m, "oi"))
        return attrs, []
    if convention == "openinference-value":
        completion = {"object": "chat.completion", "choices": [{"index": 0, "message": outputs[0]}]}
        return {
            "openinference.span.kind": "LLM",
            "session.id": conversation,
            "input.value": json.dumps({"model": "gpt-4o-mini", "messages": inputs}),
            "input.mime_type": "application/json",
            "output.value": json.dumps(completion),
            "output.mime_type": "application/json",
        }, []
    if convention == "mlflow":
        completion = {"object": "chat.completion", "choices": [{"index": 0, "message": outputs[0]}]}
        return {
            "mlflow.spanType": '"CHAT_MODEL"',
            "mlflow.trace.session": conversation,
            "mlflow.spanInputs": json.dumps({"model": "gpt-4o-mini", "messages": inputs}),
            "mlflow.spanOutputs": json.dumps(completion),
        }, []
    raise ValueError(convention)


def conversation_spans(
    convention: str, trace_base: int, conversation: str, *, tool_steps_in_history: bool = True, start: int = 0
) -> list[dict[str, Any]]:
    """EXCHANGES as `convention`'s spans: one trace per user message (an agent span around its LLM calls, as an
    instrumented app has), span ids from trace_base * 100."""
    spans = []
    sid = trace_base * 100
    for n, (i, inputs, outputs) in enumerate(calls(tool_steps_in_history=tool_steps_in_history)):
        trace = trace_base + i
        attrs, events = call_attributes(convention, inputs, outputs, conversation)
        sid += 1
        spans.append(span(trace, sid, start + 10 * i + n, attrs, events=events, parent=trace_base * 100 + 50 + i))
    for i in range(len(EXCHANGES)):
        spans.append(
            span(trace_base + i, trace_base * 100 + 50 + i, start + 10 * i, {"http.route": "/chat"}, name="POST /chat")
        )
    return spans


def as_log_records(spans: list[dict[str, Any]], service: str = "chatbot") -> tuple[list[dict], dict]:
    """The spans without their events, and an ExportLogsServiceRequest holding those events as log records
    tied to the spans (how older GenAI instrumentations log messages)."""
    records = []
    bare = []
    for s in spans:
        for e in s.get("events", ()):
            body = next((a["value"] for a in e["attributes"] if a["key"] == "body"), None)
            record = {
                "timeUnixNano": e["timeUnixNano"],
                "eventName": e["name"],
                "traceId": s["traceId"],
                "spanId": s["spanId"],
                "attributes": encode_attributes({"gen_ai.system": "openai"}),
            }
            if body is not None:
                record["body"] = body if "kvlistValue" in body else encode_any_value(json.loads(body["stringValue"]))
            records.append(record)
        bare.append({k: v for k, v in s.items() if k != "events"})
    logs = {
        "resourceLogs": [
            {
                "resource": {"attributes": encode_attributes({"service.name": service})},
                "scopeLogs": [{"scope": {"name": "tests"}, "logRecords": records}],
            }
        ]
    }
    return bare, logs
