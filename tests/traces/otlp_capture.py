"""Run the test chatbot (chatbot.py) under one real OpenAI instrumentor and write its spans as an OpenTelemetry
Collector's file exporter does: one OTLP `ExportTraceServiceRequest` per line, in OTLP JSON.

    python -m tests.traces.otlp_capture INSTRUMENTOR OUT.jsonl [--api responses] [--no-session]

INSTRUMENTOR is one of:
- `genai`: opentelemetry-instrumentation-openai-v2 on the current GenAI conventions
  (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, content on the span: span_only): messages in
  `gen_ai.input.messages` / `gen_ai.output.messages`; each user message is handled inside the
  application's agent span (`invoke_agent`) carrying `gen_ai.conversation.id`, the chat spans its children.
- `genai-events`: the same instrumentor on its default, older conventions (capture content `true`): the
  messages are log records (`gen_ai.user.message`, `gen_ai.choice`, ...) tied to the chat spans, written
  to the same file as `ExportLogsServiceRequest` lines (a collector's file exporter in both pipelines);
  the conversation id as for `genai`.
- `openinference`: openinference-instrumentation-openai, the conversation id from `using_session()`
  (`session.id`).
- `openllmetry`: opentelemetry-instrumentation-openai (OpenLLMetry), the conversation id as the Traceloop
  SDK sets an association property: `traceloop.association.properties.session_id` on every span started
  while it is set.

--api responses: the chatbot on the OpenAI Responses API (chatbot.py chat_responses) instead of Chat Completions.
--no-session: no conversation id is set (the instrumentor's spans only).

Beside OUT it writes OUT.expected.json: the conversations the chatbot had, as an import must give them back.
Instrumentors patch the `openai` module for the whole process, so each capture runs in its own process.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INSTRUMENTORS = ("genai", "genai-events", "openinference", "openllmetry")

ENVIRONMENT = {  # set before the instrumentor is imported: they read it at import or instrument time
    "genai": {
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
    },
    "genai-events": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "openinference": {},
    "openllmetry": {"TRACELOOP_TRACE_CONTENT": "true"},
}

_HEX_KEYS = {"traceId", "spanId", "parentSpanId"}  # bytes in the protobuf, hex in OTLP JSON (base64 in protobuf's)


def collector_json(message: Any) -> str:
    """One OTLP request as a line of OTLP JSON, the collector's spelling: protobuf's JSON mapping (camelCase,
    64-bit integers as strings), enums as integers and ids in hex, as the OTLP/JSON specification asks."""
    from google.protobuf.json_format import MessageToDict

    return json.dumps(_hex_ids(MessageToDict(message, use_integers_for_enums=True)), separators=(",", ":"))


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: base64.b64decode(v).hex() if k in _HEX_KEYS else _hex_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def capture(instrumentor: str, out: Path, api: str = "chat", *, session: bool = True) -> None:
    """Have the chatbot's conversations under `instrumentor` (on `api`: chat or responses); write the spans
    (and log records) to `out`."""
    os.environ.update(ENVIRONMENT[instrumentor])
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.traces.chatbot import chat_with_fake_server, no_scope

    resource = Resource.create({"service.name": "support-bot"})
    spans = InMemorySpanExporter()
    provider = TracerProvider(resource=resource)
    if instrumentor == "openllmetry":
        provider.add_span_processor(AssociationProperties())
    provider.add_span_processor(SimpleSpanProcessor(spans))
    logs, logger_provider = _log_capture(resource) if instrumentor == "genai-events" else (None, None)
    scope = _instrument(instrumentor, provider, logger_provider)
    scope = scope if session else no_scope

    conversations = chat_with_fake_server(api, scope=scope)
    provider.force_flush()

    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    lines = [collector_json(encode_spans(spans.get_finished_spans()))]
    if logs is not None:
        from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

        logger_provider.force_flush()
        lines.append(collector_json(encode_logs(logs.get_finished_logs())))
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    expected = out.with_name(out.name + ".expected.json")
    expected.write_text(json.dumps(conversations, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(spans.get_finished_spans())} spans to {out} and the conversations to {expected}")


def _log_capture(resource: Any) -> tuple[Any, Any]:
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    logs = InMemoryLogRecordExporter()
    provider = LoggerProvider(resource=resource)
    provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    return logs, provider


def _instrument(instrumentor: str, provider: Any, logger_provider: Any) -> Any:
    """Instrument `openai`; return the scope each user message is handled in (where the conversation id is set)."""
    if instrumentor == "genai":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
        return _agent_turn(provider)
    if instrumentor == "genai-events":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider, logger_provider=logger_provider)
        return _agent_turn(provider)
    if instrumentor == "openinference":
        from openinference.instrumentation import using_session
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
        return using_session
    if instrumentor == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
        return association_properties
    raise ValueError(f"unknown instrumentor {instrumentor!r}: one of {', '.join(INSTRUMENTORS)}")


def _agent_turn(provider: Any) -> Any:
    """Each user message handled inside the application's agent span (GenAI conventions: `invoke_agent`,
    carrying `gen_ai.conversation.id`); the instrumentor's chat spans are its children."""
    tracer = provider.get_tracer("support-bot")

    def scope(conversation_id: str) -> Any:
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "support-bot",
            "gen_ai.conversation.id": conversation_id,
        }
        return tracer.start_as_current_span("invoke_agent support-bot", attributes=attributes)

    return scope


# OpenLLMetry's association properties, as the Traceloop SDK (not installed here) sets them: a value on the
# context, copied onto every span started under it by a span processor.
_ASSOCIATION = "traceloop.association.properties"


@contextlib.contextmanager
def association_properties(conversation_id: str) -> Iterator[None]:
    from opentelemetry import context

    token = context.attach(context.set_value(_ASSOCIATION, {"session_id": conversation_id}))
    try:
        yield
    finally:
        context.detach(token)


class AssociationProperties:
    """The Traceloop SDK's span processor, reduced to the association properties."""

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        from opentelemetry import context

        for key, value in (context.get_value(_ASSOCIATION, parent_context) or {}).items():
            span.set_attribute(f"{_ASSOCIATION}.{key}", value)

    def on_end(self, span: Any) -> None:
        pass

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instrumentor", choices=INSTRUMENTORS)
    parser.add_argument("out", type=Path)
    parser.add_argument("--api", choices=("chat", "responses"), default="chat", help="the OpenAI API the chatbot uses")
    parser.add_argument("--no-session", action="store_true", help="set no conversation id")
    args = parser.parse_args(argv)
    capture(args.instrumentor, args.out, args.api, session=not args.no_session)


if __name__ == "__main__":
    sys.exit(main())
