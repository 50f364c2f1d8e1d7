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
  or plain text), on spans of type LLM or CHAT_MODEL;
- the OpenAI Responses API, wherever the request and the Response are kept whole (MLflow's span inputs and
  outputs, OpenInference's input.value / output.value): `instructions`, `input` items and `output` items
  (llm_call.py responses_exchange), with the response's id and `previous_response_id`.

A call with no messages at all (`LlmCall.empty`) is an LLM call recorded without content: assemble.py says
which setting turns capture on (`CAPTURE_SETTING`). Here: which spans are calls and which reader is tried when;
the readers are conventions_genai.py's and conventions_openinference.py's, the message types llm_call.py's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rubric.traces.conventions_genai import (
    EVENT_ROLES,
    read_genai_attributes,
    read_genai_details_event,
    read_genai_events,
    read_openllmetry,
)
from rubric.traces.conventions_openinference import read_mlflow, read_openinference
from rubric.traces.llm_call import LlmCall
from rubric.traces.spans import Span

# Operations that are model calls; agent invocations, tool executions and embeddings are not judged replies.
CALL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion", "responses"})
MLFLOW_CALL_TYPES = frozenset({"LLM", "CHAT_MODEL"})

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
    if not is_llm_call(attrs) and not any(e.name in EVENT_ROLES or e.name == "gen_ai.choice" for e in span.events):
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


def _unquoted(value: Any) -> str:
    """MLflow stores some attributes as JSON text ('"LLM"')."""
    text = str(value)
    return text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text


_READERS = (
    read_genai_attributes,
    read_genai_details_event,
    read_genai_events,
    read_openllmetry,
    read_openinference,
    read_mlflow,
)
_OPENINFERENCE_FIRST = (
    read_genai_attributes,
    read_openinference,
    read_genai_details_event,
    read_genai_events,
    read_openllmetry,
    read_mlflow,
)
"""The conventions in the order they are tried; an OpenInference span (it says so) skips OpenLLMetry's scan of
every attribute name."""
