"""Run the test chatbot (chatbot.py) under openinference-instrumentation-openai and send its spans to a Phoenix
server over OTLP/HTTP (protobuf), as an application traced into Phoenix does:

    python -m tests.traces.phoenix_feed OTLP_ENDPOINT PROJECT OUT.json [--api responses]

The project is chosen by the resource attribute `openinference.project.name`, each conversation is a session
(`using_session`, giving `session.id`); PHOENIX_API_KEY, where set, is sent with them. OUT.json gets what an import must give back: the conversations the
chatbot had, and the (trace id, span id) of every LLM call with the reply it wrote. The instrumentor patches
the `openai` module for the whole process, so this runs in a process of its own. --api responses: the chatbot
on the OpenAI Responses API (chatbot.py chat_responses).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def feed(endpoint: str, project: str, out: Path, api: str = "chat") -> None:
    from openinference.instrumentation import using_session
    from openinference.instrumentation.openai import OpenAIInstrumentor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.traces.chatbot import chat_with_fake_server

    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-bot", "openinference.project.name": project})
    )
    key = os.environ.get("PHOENIX_API_KEY")  # a Phoenix with authentication on takes spans with a key only
    headers = {"authorization": f"Bearer {key}"} if key else None
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=30)))
    sent = InMemorySpanExporter()  # what was sent, for the ids the import must give back
    provider.add_span_processor(SimpleSpanProcessor(sent))
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    conversations = chat_with_fake_server(api, scope=using_session)
    provider.force_flush()
    calls = [
        {
            "trace_id": format(span.context.trace_id, "032x"),
            "span_id": format(span.context.span_id, "016x"),
            "session_id": span.attributes.get("session.id"),
            "reply": span.attributes.get("llm.output_messages.0.message.content")  # Chat Completions
            or span.attributes.get("llm.output_messages.0.message.contents.0.message_content.text"),  # Responses
        }
        for span in sent.get_finished_spans()
        if span.attributes.get("openinference.span.kind") == "LLM"
    ]
    provider.shutdown()
    out.write_text(json.dumps({"conversations": conversations, "calls": calls}, indent=1, ensure_ascii=False))
    print(f"sent {len(sent.get_finished_spans())} spans to {endpoint} (project {project}); wrote {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("endpoint")
    parser.add_argument("project")
    parser.add_argument("out", type=Path)
    parser.add_argument("--api", choices=("chat", "responses"), default="chat", help="the OpenAI API the chatbot uses")
    args = parser.parse_args(argv)
    feed(args.endpoint, args.project, args.out, args.api)


if __name__ == "__main__":
    sys.exit(main())
