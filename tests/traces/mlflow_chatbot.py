"""Run the test chatbot (chatbot.py) traced by MLflow Tracing into a real MLflow server, as an application
traced with MLflow does:

    python -m tests.traces.mlflow_chatbot TRACKING_URI EXPERIMENT OUT.json [--api responses]

`mlflow.openai.autolog()` records each OpenAI call as a CHAT_MODEL span (the request in mlflow.spanInputs,
the chat completion in mlflow.spanOutputs). Each user message is handled in one trace, opened by the
application's `chat_turn` span, whose session is the conversation id (`mlflow.update_current_trace(session_id=
...)`, which MLflow keeps as the metadata `mlflow.trace.session`); the agent's tool call and its answer are two calls in that one trace.
OUT.json gets what an import must give back: the conversations the chatbot had, each turn with the MLflow
trace id it was handled in (`mlflow_trace_id`). Autologging patches the `openai` module for the whole
process, so this runs in a process of its own.

--api responses: the chatbot on the OpenAI Responses API (chatbot.py chat_responses), recorded by autolog as
CHAT_MODEL spans too (the request's `instructions` and `input` in, the Response out).

--no-session: the traces name no session (a Responses API chatbot's calls are then one conversation per
`previous_response_id` chain).

--spans-as-artifacts: the client does not send spans as they end (MLflow's span logging, which a server may
refuse, e.g. with authentication on) and uploads each trace's spans as an artifact when the trace ends, as
MLflow's client then does: the traces' spans are read back from the artifact store.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path


def feed(
    tracking_uri: str,
    experiment: str,
    out: Path,
    *,
    spans_as_artifacts: bool = False,
    api: str = "chat",
    session: bool = True,
) -> None:
    import mlflow

    from tests.traces.chatbot import chat_with_fake_server

    if spans_as_artifacts:
        from mlflow.tracing.export.mlflow_v3 import MlflowV3SpanExporter

        MlflowV3SpanExporter._export_spans_incrementally = lambda self, spans: None
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_experiment(experiment)
    mlflow.openai.autolog()
    trace_ids: list[str] = []

    @contextlib.contextmanager
    def traced_turn(conversation_id: str) -> Iterator[None]:
        with mlflow.start_span(name="chat_turn", span_type="CHAIN") as span:
            if session:
                mlflow.update_current_trace(session_id=conversation_id)
            trace_ids.append(span.trace_id)
            yield

    conversations = chat_with_fake_server(api, scope=traced_turn)
    mlflow.flush_trace_async_logging()
    turns = [turn for conversation in conversations for turn in conversation["turns"]]
    for turn, trace_id in zip(turns, trace_ids, strict=True):
        turn["mlflow_trace_id"] = trace_id
    out.write_text(json.dumps(conversations, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"traced {len(trace_ids)} turns into {tracking_uri} (experiment {experiment}); conversations in {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tracking_uri")
    parser.add_argument("experiment")
    parser.add_argument("out", type=Path)
    parser.add_argument("--spans-as-artifacts", action="store_true", help="each trace's spans as an artifact")
    parser.add_argument("--api", choices=("chat", "responses"), default="chat", help="the OpenAI API the chatbot uses")
    parser.add_argument("--no-session", action="store_true", help="traces without a session (no conversation id)")
    args = parser.parse_args(argv)
    feed(
        args.tracking_uri,
        args.experiment,
        args.out,
        spans_as_artifacts=args.spans_as_artifacts,
        api=args.api,
        session=not args.no_session,
    )


if __name__ == "__main__":
    sys.exit(main())
