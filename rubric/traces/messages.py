"""The messages of one LLM call, read from a `Span` in whichever convention its instrumentation wrote.

`read_call(span)` gives the call's system text, input messages and output messages, or None for a span that
is no LLM call (an HTTP request, an agent or tool span, a retrieval). The conventions read, each checked
against the instrumentation packages that write them:

- OTel GenAI, current (opentelemetry-util-genai, opentelemetry-instrumentation-openai-v2, OpenLLMetry 0.4x+):
  `gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`, messages with `parts`
  ({type: text, content}, {type: tool_call, id, name, arguments}, {type: tool_call_response, id, response}),
  as span attributes (JSON text) or on a `gen_ai.client.inference.operation.details` event (structured);
- OTel GenAI, older: one event per message, `gen_ai.system.message`, `gen_ai.user.message`,
  `gen_ai.assistant.message`, `gen_ai.tool.message` and `gen_ai.choice`, their body in a `body` attribute
  (structured or JSON text) or spread over the event's attributes; and the first drafts' events
  `gen_ai.content.prompt` / `gen_ai.content.completion` holding OpenAI-style JSON;
- OpenLLMetry, older: `gen_ai.prompt.N.role|content|tool_call_id`, `gen_ai.completion.N.role|content`,
  `gen_ai.{prompt,completion}.N.tool_calls.M.id|name|arguments`;
- OpenInference: `llm.input_messages.N.message.role|content|tool_call_id`,
  `...message.contents.M.message_content.text`, `...message.tool_calls.M.tool_call.id|function.name|
  function.arguments`, `llm.output_messages.N...`; without those, `input.value` / `output.value` when their
  mime type is JSON and they hold an OpenAI request (`messages`) and a chat completion (`choices`);
- MLflow: `mlflow.spanInputs` (an OpenAI request: `messages`) and `mlflow.spanOutputs` (a chat completion,
  or plain text), on spans of type LLM or CHAT_MODEL.

A call with no messages at all (`LlmCall.empty`) is an LLM call recorded without content: assemble.py says
which setting turns capture on (`CAPTURE_SETTING`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from rubric.traces.spans import Span

# Operations that are model calls; agent invocations, tool executions and embeddings are not judged replies.
CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion", "responses"})
MLFLOW_CALL_TYPES = frozenset({"LLM", "CHAT_MODEL"})
SYSTEM_ROLES = frozenset({"system", "developer"})

CAPTURE_SETTING = {
    "otel-genai": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (opentelemetry-instrumentation-*-v2; "
    "span_only or span_and_event with opentelemetry-util-genai)",
    "otel-genai-events": "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true",
    "openllmetry": "TRACELOOP_TRACE_CONTENT=true (OpenLLMetry / Traceloop)",
    "openinference": "OPENINFERENCE_HIDE_INPUTS=false, OPENINFERENCE_HIDE_OUTPUTS=false, "
    "OPENINFERENCE_HIDE_INPUT_MESSAGES=false and OPENINFERENCE_HIDE_OUTPUT_MESSAGES=false (OpenInference)",
    "mlflow": "MLflow Tracing's span inputs and outputs (mlflow.openai.autolog() logs them)",
}
"""For each convention, the setting that makes its instrumentation record message content."""

_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_OPENLLMETRY_KEY = re.compile(r"gen_ai\.(prompt|completion)\.(\d+)\.(.+)")
_OPENINFERENCE_KEY = re.compile(r"llm\.(input|output)_messages\.(\d+)\.message\.(.+)")
_NUMBERED = re.compile(r"(tool_calls|contents)\.(\d+)\.(.+)")


class ToolCall(NamedTuple):
    """A tool the model asked for: `arguments` as JSON text with sorted keys, so that the same call read from
    an output (parsed arguments) and from the next call's input (text) compares equal. (Named tuples, not
    dataclasses, here: a frozen dataclass costs a microsecond to make, and an import makes millions.)"""

    id: str
    name: str
    arguments: str

    def to_record(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


class Message(NamedTuple):
    """One message of a call, normalised: `role` system|user|assistant|tool, `content` its text parts joined
    by newlines ("" for none), the tool calls it makes (assistant) or the call it answers (tool)."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""


class LlmCall(NamedTuple):
    """What one LLM call span holds: its system text (None: none), input and output messages, and the
    convention they were read in (a key of CAPTURE_SETTING)."""

    system: str | None
    input: tuple[Message, ...]
    output: tuple[Message, ...]
    convention: str

    @property
    def empty(self) -> bool:
        return not self.input and not self.output and self.system is None


CALL_MARKERS = frozenset(
    {
        "gen_ai.operation.name",
        "openinference.span.kind",
        "mlflow.spanType",
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "llm.request.type",
        "gen_ai.system",
        "gen_ai.provider.name",
    }
)
"""The attributes `is_llm_call` looks at: a span with none of them (and no events) is no LLM call."""


def is_llm_call(attributes: Mapping[str, Any]) -> bool:
    """Whether a span's attributes mark a model call (a cheap test on a few keys: most spans of an export
    are not calls, and are dropped here before anything else is read)."""
    operation = attributes.get("gen_ai.operation.name")
    if operation is not None:
        return operation in CALL_OPERATIONS
    kind = attributes.get("openinference.span.kind")
    if kind is not None:
        return kind == "LLM"
    span_type = attributes.get("mlflow.spanType")
    if span_type is not None:
        return _unquoted(span_type) in MLFLOW_CALL_TYPES
    return (
        "gen_ai.input.messages" in attributes
        or "gen_ai.output.messages" in attributes
        or "llm.request.type" in attributes  # OpenLLMetry before gen_ai.operation.name
        or "gen_ai.system" in attributes
        or "gen_ai.provider.name" in attributes
    )


def read_call(span: Span) -> LlmCall | None:
    """The messages of `span`'s LLM call, or None when the span is no LLM call."""
    attrs = span.attributes
    if not is_llm_call(attrs) and not any(e.name in _EVENT_ROLES or e.name == "gen_ai.choice" for e in span.events):
        return None
    readers = _OPENINFERENCE_FIRST if "openinference.span.kind" in attrs else _READERS
    for reader in readers:
        call = reader(span)
        if call is not None:
            return call
    return LlmCall(None, (), (), _guess_convention(attrs))


def surely_a_call(attrs: Mapping[str, Any]) -> bool:
    """Whether a span without content is a model call all the same (content capture was off), by a marker
    only model calls carry; gen_ai.system or gen_ai.provider.name alone may be a framework's span."""
    return (
        attrs.get("gen_ai.operation.name") in CALL_OPERATIONS
        or attrs.get("openinference.span.kind") == "LLM"
        or _unquoted(attrs.get("mlflow.spanType")) in MLFLOW_CALL_TYPES
        or "llm.request.type" in attrs
    )


def _guess_convention(attrs: Mapping[str, Any]) -> str:
    """The convention of a call recorded without content, for the error's hint."""
    if "openinference.span.kind" in attrs or "llm.provider" in attrs or "llm.system" in attrs:
        return "openinference"
    if "mlflow.spanType" in attrs:
        return "mlflow"
    if "llm.request.type" in attrs or any(k.startswith("traceloop.") for k in attrs):
        return "openllmetry"
    return "otel-genai"


# OTel GenAI, current: messages with parts ------------------------------------------------------------------


def _genai_attributes(span: Span) -> LlmCall | None:
    return _from_parts_messages(span.attributes, "otel-genai")


def _genai_details_event(span: Span) -> LlmCall | None:
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
    system = _parts_text(_json(raw_system)) if raw_system is not None else None
    inputs: list[Message] = []
    for msg in _list(_json(raw_in)):
        inputs.extend(_parts_message(msg))
    outputs: list[Message] = []
    for msg in _list(_json(raw_out)):
        outputs.extend(_parts_message(msg, default_role="assistant"))
    return _with_system(system, inputs, outputs, convention)


def _parts_message(msg: Any, default_role: str = "user") -> list[Message]:
    """One message with parts -> Messages (a tool message answering several calls gives one per call)."""
    if not isinstance(msg, dict):
        return []
    role = str(msg.get("role") or default_role)
    parts = _list(msg.get("parts"))
    if len(parts) == 1 and isinstance(parts[0], dict) and parts[0].get("type") == "text":  # most messages
        text = parts[0].get("content")
        return [Message(role, text.strip() if isinstance(text, str) else "")]
    responses = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"]
    if responses:
        return [Message("tool", _text_value(p.get("response")), (), str(p.get("id") or "")) for p in responses]
    calls = tuple(
        _tool_call(p.get("id"), p.get("name"), p.get("arguments"))
        for p in parts
        if isinstance(p, dict) and p.get("type") == "tool_call"
    )
    return [Message(role, _parts_text(parts), calls)]


def _parts_text(parts: Any) -> str:
    """The text parts of a parts list (or of OpenAI-style content blocks), joined by newlines."""
    if isinstance(parts, str):
        return parts.strip()
    texts = []
    for part in _list(parts):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text"):
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts).strip()


# OTel GenAI, older: one event per message ----------------------------------------------------------------


def _genai_events(span: Span) -> LlmCall | None:
    inputs: list[Message] = []
    outputs: list[Message] = []
    found = False
    for event in span.events:
        if event.name == "gen_ai.content.prompt":  # the first drafts: OpenAI-style JSON in one attribute
            found = True
            inputs.extend(_openai_messages(_json(event.attributes.get("gen_ai.prompt"))))
        elif event.name == "gen_ai.content.completion":
            found = True
            outputs.extend(_openai_messages(_json(event.attributes.get("gen_ai.completion")), "assistant"))
        elif event.name in _EVENT_ROLES or event.name == "gen_ai.choice":
            found = True
            body = _event_body(event.attributes)
            if event.name == "gen_ai.choice":
                message = body.get("message") if isinstance(body.get("message"), dict) else body
                calls = message.get("tool_calls") or body.get("tool_calls")
                outputs.append(_openai_message({**message, "role": "assistant", "tool_calls": calls}))
            else:
                role = _EVENT_ROLES[event.name]
                tool_id = body.get("id", body.get("tool_call_id")) if role == "tool" else None
                inputs.append(_openai_message({**body, "role": role, "tool_call_id": tool_id}))
    if not found:
        return None
    return _with_system(None, inputs, outputs, "otel-genai-events")


def _event_body(attrs: Mapping[str, Any]) -> Mapping[str, Any]:
    """An event's message: its `body` attribute (structured or JSON text), else the attributes themselves."""
    body = _json(attrs.get("body"))
    if isinstance(body, dict):
        return body
    if isinstance(body, str):
        return {"content": body}
    message = _json(attrs.get("message"))
    if isinstance(message, dict):
        return {**attrs, "message": message}
    return attrs


# OpenLLMetry, older: flattened gen_ai.prompt.N.* / gen_ai.completion.N.* -----------------------------------


def _openllmetry(span: Span) -> LlmCall | None:
    tree = _flattened(span.attributes, _OPENLLMETRY_KEY, "gen_ai.prompt.", "gen_ai.completion.")
    if tree is None:
        return None
    inputs = [_flat_message(m, "user") for _, m in sorted(tree.get("prompt", {}).items())]
    outputs = [_flat_message(m, "assistant") for _, m in sorted(tree.get("completion", {}).items())]
    return _with_system(None, inputs, outputs, "openllmetry")


# OpenInference: llm.input_messages.N.message.* -------------------------------------------------------------


def _openinference(span: Span) -> LlmCall | None:
    attrs = span.attributes
    tree = _flattened(attrs, _OPENINFERENCE_KEY, "llm.input_messages.", "llm.output_messages.")
    if tree is not None:
        inputs = [_flat_message(m, "user") for _, m in sorted(tree.get("input", {}).items())]
        outputs = [_flat_message(m, "assistant") for _, m in sorted(tree.get("output", {}).items())]
        return _with_system(None, inputs, outputs, "openinference")
    if attrs.get("openinference.span.kind") != "LLM":
        return None
    request = _json_value(attrs, "input.value", "input.mime_type")
    response = _json_value(attrs, "output.value", "output.mime_type")
    if request is None and response is None:
        return None
    return _openai_exchange(request, response, "openinference")


def _json_value(attrs: Mapping[str, Any], key: str, mime_key: str) -> Any:
    value = attrs.get(key)
    if value is None or "json" not in str(attrs.get(mime_key, "application/json")):
        return None
    return _json(value)


def _flattened(attrs: Mapping[str, Any], pattern: re.Pattern[str], *prefixes: str) -> dict[str, Any] | None:
    """Flattened message attributes as {side: {N: {field: value, "tool_calls": {M: {...}}, ...}}}, or None
    when the span has none. Only keys under `prefixes` are matched (a cheap test first)."""
    tree: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefixes):
            continue
        match = pattern.fullmatch(key)
        if match is None:
            continue
        side, index, field = match.group(1), int(match.group(2)), match.group(3)
        message = tree.setdefault(side, {}).setdefault(index, {})
        numbered = _NUMBERED.fullmatch(field) if field.startswith(("tool_calls.", "contents.")) else None
        if numbered is None:
            message[field] = value
        else:
            group, n, rest = numbered.groups()
            message.setdefault(group, {}).setdefault(int(n), {})[rest] = value
    return tree or None


def _flat_message(fields: Mapping[str, Any], default_role: str) -> Message:
    """A message spelled as flattened fields (OpenLLMetry's or OpenInference's)."""
    content = fields.get("content")
    contents = fields.get("contents")
    if contents:  # OpenInference: message.contents.M.message_content.text
        content = [
            {"type": "text", "text": c.get("message_content.text")}
            for _, c in sorted(contents.items())
            if c.get("message_content.type", "text") == "text"
        ]
    calls = tuple(
        _tool_call(
            c.get("tool_call.id", c.get("id")),
            c.get("tool_call.function.name", c.get("name")),
            c.get("tool_call.function.arguments", c.get("arguments")),
        )
        for _, c in sorted((fields.get("tool_calls") or {}).items())
    )
    role = str(fields.get("role") or default_role)
    text = _content_text(content)
    return Message(role, text, calls, str(fields.get("tool_call_id") or "") if role == "tool" else "")


# MLflow and OpenAI-style JSON ------------------------------------------------------------------------------


def _mlflow(span: Span) -> LlmCall | None:
    attrs = span.attributes
    if "mlflow.spanInputs" not in attrs and "mlflow.spanOutputs" not in attrs:
        return None
    return _openai_exchange(_json(attrs.get("mlflow.spanInputs")), _json(attrs.get("mlflow.spanOutputs")), "mlflow")


def _openai_exchange(request: Any, response: Any, convention: str) -> LlmCall | None:
    """An OpenAI chat request ({"messages": [...]}, or the list itself) and its response (a chat completion,
    {"choices": [{"message": ...}]}, a bare message, or text)."""
    messages = request.get("messages") if isinstance(request, dict) else request
    inputs = _openai_messages(messages) if isinstance(messages, list) else []
    outputs: list[Message] = []
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        choices = [c for c in response["choices"] if isinstance(c, dict)]
        if choices:  # the first choice is the reply the application used
            message = choices[0].get("message") or {"content": choices[0].get("text")}
            outputs.append(_openai_message({**message, "role": "assistant"}))
    elif isinstance(response, dict) and ("content" in response or "tool_calls" in response):
        outputs.append(_openai_message({**response, "role": "assistant"}))
    elif isinstance(response, str) and response.strip():
        outputs.append(Message("assistant", response.strip()))
    if not inputs and not outputs:
        return None
    return _with_system(None, inputs, outputs, convention)


def _openai_messages(raw: Any, default_role: str = "user") -> list[Message]:
    return [_openai_message(m, default_role) for m in _list(raw) if isinstance(m, dict)]


def _openai_message(msg: Mapping[str, Any], default_role: str = "user") -> Message:
    role = str(msg.get("role") or default_role)
    calls = []
    for call in _list(_json(msg.get("tool_calls"))):
        if isinstance(call, dict):
            function = call.get("function") if isinstance(call.get("function"), dict) else call
            calls.append(_tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    tool_id = str(msg.get("tool_call_id") or "") if role == "tool" else ""
    return Message(role, _content_text(msg.get("content")), tuple(calls), tool_id)


# Shared helpers --------------------------------------------------------------------------------------------


def _with_system(system: str | None, inputs: list[Message], outputs: list[Message], convention: str) -> LlmCall:
    """The call, its system text taken from leading system messages of the input where no instructions
    attribute gave it (system messages elsewhere are dropped: the role is the chatbot's, not a turn)."""
    texts = [m.content for m in inputs if m.role in SYSTEM_ROLES and m.content]
    if system is None and texts:
        system = "\n\n".join(texts)
    kept = tuple(m for m in inputs if m.role not in SYSTEM_ROLES)
    return LlmCall(system or None, kept, tuple(outputs), convention)


def _content_text(content: Any) -> str:
    """Message content as text: a string (JSON text of content blocks is unpacked), or a list of blocks."""
    if isinstance(content, str):
        if content.startswith("[{"):
            blocks = _json(content)
            if isinstance(blocks, list):
                return _parts_text(blocks)
        return content.strip()
    return _parts_text(content) if content is not None else ""


def _tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    return ToolCall(str(call_id or ""), str(name or ""), _arguments_text(arguments))


def _arguments_text(arguments: Any) -> str:
    value = _json(arguments)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text_value(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def _json(value: Any) -> Any:
    """JSON text parsed (text that is not JSON is returned as it is); anything else unchanged."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _unquoted(value: Any) -> str:
    """MLflow stores some attributes as JSON text ('"LLM"')."""
    text = str(value)
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


_READERS = (_genai_attributes, _genai_details_event, _genai_events, _openllmetry, _openinference, _mlflow)
_OPENINFERENCE_FIRST = (_genai_attributes, _openinference, _genai_details_event, _genai_events, _openllmetry, _mlflow)
"""The conventions in the order they are tried; an OpenInference span (it says so) skips OpenLLMetry's scan of
every attribute name."""
