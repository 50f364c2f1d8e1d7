"""The readers of the conventions that write `gen_ai.*` attributes: OTel GenAI's current messages with parts
(span attributes or the operation-details event), its older one-event-per-message spelling (and the first
drafts' prompt/completion events), and OpenLLMetry's older flattened `gen_ai.prompt.N.*` /
`gen_ai.completion.N.*`. messages.py says which is tried when.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rubric.traces.llm_call import (
    LlmCall,
    Message,
    as_list,
    flat_message,
    flattened,
    openai_message,
    openai_messages,
    parse_json,
    parts_text,
    text_value,
    tool_call,
    with_system,
)
from rubric.traces.spans import Span

EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
"""The older convention's message events, by the role of their message (the reply is a `gen_ai.choice` event)."""
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_OPENLLMETRY_KEY = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")


# OTel GenAI, current: messages with parts ------------------------------------------------------------------


def read_genai_attributes(span: Span) -> LlmCall | None:
    return _from_parts_messages(span.attributes, "otel-genai")


def read_genai_details_event(span: Span) -> LlmCall | None:
    for event in span.events:
        if event.name == _DETAILS_EVENT:
            call = _from_parts_messages(event.attributes, "otel-genai")
            if call is not None:
                return call
    return None


def _from_parts_messages(attrs: Mapping[str, Any], convention: str) -> LlmCall | None:
    raw_in, raw_out = attrs.get("gen_ai.input.messages"), attrs.get("gen_ai.output.messages")
    raw_system = attrs.get("gen_ai.system_instructions")
    if raw_in is None and raw_out is None and raw_system is None:
        return None
    system = parts_text(parse_json(raw_system)) if raw_system is not None else None
    inputs: list[Message] = []
    for msg in as_list(parse_json(raw_in)):
        inputs.extend(_parts_message(msg))
    outputs: list[Message] = []
    for msg in as_list(parse_json(raw_out)):
        outputs.extend(_parts_message(msg, default_role="assistant"))
    return with_system(system, inputs, outputs, convention)


def _parts_message(msg: Any, default_role: str = "user") -> list[Message]:
    """One message with parts -> Messages (a tool message answering several calls gives one per call)."""
    if not isinstance(msg, dict):
        return []
    role = str(msg.get("role") or default_role)
    parts = as_list(msg.get("parts"))
    if len(parts) == 1 and isinstance(parts[0], dict) and parts[0].get("type") == "text":  # most messages
        text = parts[0].get("content")
        return [Message(role, text.strip() if isinstance(text, str) else "")]
    responses = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"]
    if responses:
        return [Message("tool", text_value(p.get("response")), (), str(p.get("id") or "")) for p in responses]
    calls = tuple(
        tool_call(p.get("id"), p.get("name"), p.get("arguments"))
        for p in parts
        if isinstance(p, dict) and p.get("type") == "tool_call"
    )
    return [Message(role, parts_text(parts), calls)]


# OTel GenAI, older: one event per message ----------------------------------------------------------------


def read_genai_events(span: Span) -> LlmCall | None:
    inputs: list[Message] = []
    outputs: list[Message] = []
    found = False
    for event in span.events:
        if event.name == "gen_ai.content.prompt":  # the first drafts: OpenAI-style JSON in one attribute
            found = True
            inputs.extend(openai_messages(parse_json(event.attributes.get("gen_ai.prompt"))))
        elif event.name == "gen_ai.content.completion":
            found = True
            outputs.extend(openai_messages(parse_json(event.attributes.get("gen_ai.completion")), "assistant"))
        elif event.name in EVENT_ROLES or event.name == "gen_ai.choice":
            found = True
            body = _event_body(event.attributes)
            if event.name == "gen_ai.choice":
                message: Mapping[str, Any] = body["message"] if isinstance(body.get("message"), dict) else body
                calls = message.get("tool_calls") or body.get("tool_calls")
                outputs.append(openai_message({**message, "role": "assistant", "tool_calls": calls}))
            else:
                role = EVENT_ROLES[event.name]
                tool_id = body.get("id", body.get("tool_call_id")) if role == "tool" else None
                inputs.append(openai_message({**body, "role": role, "tool_call_id": tool_id}))
    if not found:
        return None
    return with_system(None, inputs, outputs, "otel-genai-events")


def _event_body(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's message: its `body` attribute (structured or JSON text), else the attributes themselves."""
    body = parse_json(attrs.get("body"))
    if isinstance(body, dict):
        return body
    if isinstance(body, str):
        return {"content": body}
    message = parse_json(attrs.get("message"))
    if isinstance(message, dict):
        return {**attrs, "message": message}
    return attrs


# OpenLLMetry, older: flattened gen_ai.prompt.N.* / gen_ai.completion.N.* -----------------------------------


def read_openllmetry(span: Span) -> LlmCall | None:
    tree = flattened(span.attributes, _OPENLLMETRY_KEY, "gen_ai.prompt.", "gen_ai.completion.")
    if tree is None:
        return None
    inputs = [flat_message(m, "user") for _, m in sorted(tree.get("prompt", {}).items())]
    outputs = [flat_message(m, "assistant") for _, m in sorted(tree.get("completion", {}).items())]
    return with_system(None, inputs, outputs, "openllmetry")
