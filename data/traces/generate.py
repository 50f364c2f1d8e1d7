"""Bundled OTLP trace exports: twelve conversations of the role-adherence benchmark (data/role_adherence/), three
per role, as three chatbots instrumented three ways would have exported them through an OpenTelemetry
Collector's file exporter (one `ExportTraceServiceRequest` per line, OTLP JSON, ids in hex).

    python data/traces/generate.py            # rewrites data/traces/*.jsonl (deterministic, byte for byte)
    python data/traces/generate.py --out DIR  # writes elsewhere

- `genai.jsonl`: opentelemetry-instrumentation-openai-v2 on the current GenAI conventions (content on the
  span): a `chat` span per model call with `gen_ai.input.messages` / `gen_ai.output.messages`, the child of
  the application's `invoke_agent` span carrying `gen_ai.conversation.id`.
- `openinference.jsonl`: openinference-instrumentation-openai: a `ChatCompletion` span per call with
  `llm.input_messages.N.message.*`, `llm.output_messages.N.message.*`, `input.value` / `output.value` and
  `session.id` (from `using_session`).
- `openllmetry.jsonl`: OpenLLMetry's older shape (opentelemetry-instrumentation-openai before the GenAI
  message attributes, still deployed): `gen_ai.prompt.N.role|content`, `gen_ai.completion.N.*`, and the
  Traceloop SDK's association property `traceloop.association.properties.session_id`.

Each user message is one model call carrying the whole history, the role as the system message; each file
holds one conversation of each of the four roles, every role its own `service.name`. Ids come from a hash of
the conversation and turn, times from a fixed clock, so the files never change unless this script does
(tests/traces/test_bundled.py checks the committed files against a fresh run).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rubric.traces.otlp_values import encode_attributes

HERE = Path(__file__).resolve().parent
BENCHMARK = HERE.parent / "role_adherence" / "conversations.jsonl"

ROLES = ("fintech_support", "maths_tutor", "telehealth_intake", "airline_booking")
PER_ROLE = 3  # conversations of each role: one in each file
MAX_TURNS = 5  # the shorter conversations keep the files small (every call repeats the history)
MODEL = "gpt-4o-mini"
START_NS = 1_793_610_000_000_000_000  # 2026-11-02T09:00:00Z: the first conversation's first span
CONVERSATION_GAP_NS = 37 * 60 * 10**9  # the next conversation starts 37 minutes later
TURN_GAP_NS = 52 * 10**9  # a user's next message 52 seconds after the last
SDK = {"telemetry.sdk.language": "python", "telemetry.sdk.name": "opentelemetry", "telemetry.sdk.version": "1.45.2"}


# the conversations ----------------------------------------------------------------------------------------
def pick(path: Path = BENCHMARK) -> list[dict[str, Any]]:
    """The first PER_ROLE conversations of each role with at most MAX_TURNS turns, in file order, as
    [role0 #1, role1 #1, ..., role0 #2, ...]: file k of the three gets conversations k*4 .. k*4+3, one per role."""
    by_role: dict[str, list[dict[str, Any]]] = {r: [] for r in ROLES}
    for line in path.read_text(encoding="utf-8").splitlines():
        conv = json.loads(line)
        if len(by_role[conv["role"]]) < PER_ROLE and len(conv["turns"]) <= MAX_TURNS:
            by_role[conv["role"]].append(conv)
    return [by_role[role][i] for i in range(PER_ROLE) for role in ROLES]


def _id(*parts: Any, length: int) -> str:
    return hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:length]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def calls(conv: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The model calls of a conversation: per user message the history sent (role first) and the reply, with
    its ids and times (the call lasts longer for a longer reply)."""
    history: list[dict[str, str]] = [{"role": "system", "content": conv["chatbot_role"]}]
    out = []
    for turn_no, turn in enumerate(conv["turns"]):
        history.append({"role": "user", "content": turn["user"]})
        start = START_NS + index * CONVERSATION_GAP_NS + turn_no * TURN_GAP_NS
        cid = conv["conversation_id"]
        out.append(
            {
                "trace_id": _id("trace", cid, turn_no, length=32),
                "span_id": _id("llm", cid, turn_no, length=16),
                "parent_id": _id("agent", cid, turn_no, length=16),
                "start": start,
                "end": start + 600_000_000 + 4_000_000 * len(turn["assistant"]),
                "messages": list(history),
                "reply": turn["assistant"],
                "response_id": "chatcmpl-" + _id("response", cid, turn_no, length=24),
            }
        )
        history.append({"role": "assistant", "content": turn["assistant"]})
    return out


# OTLP JSON, as the collector writes it ---------------------------------------------------------------------
def _span(
    call: dict[str, Any], name: str, kind: int, attributes: dict[str, Any], *, parent: bool, status: dict[str, Any]
) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": call["trace_id"], "spanId": call["span_id"]}
    if parent:
        span["parentSpanId"] = call["parent_id"]
    span.update(
        name=name,
        kind=kind,
        startTimeUnixNano=str(call["start"]),
        endTimeUnixNano=str(call["end"]),
        attributes=encode_attributes(attributes),
        status=status,
        flags=256,
    )
    return span


def _request(service: str, scopes: list[tuple[dict[str, str], list[dict[str, Any]]]]) -> dict[str, Any]:
    resource = {"attributes": encode_attributes({**SDK, "service.name": service})}
    return {
        "resourceSpans": [
            {"resource": resource, "scopeSpans": [{"scope": s, "spans": spans} for s, spans in scopes if spans]}
        ]
    }


# the three instrumentations --------------------------------------------------------------------------------
def _usage(call: dict[str, Any]) -> tuple[int, int]:
    return sum(_tokens(m["content"]) for m in call["messages"]), _tokens(call["reply"])


def genai(conv: dict[str, Any], index: int) -> dict[str, Any]:
    """opentelemetry-instrumentation-openai-v2, current GenAI conventions, content on the span."""
    chats, agents = [], []
    for call in calls(conv, index):
        inputs, outputs = _usage(call)
        messages = [{"role": m["role"], "parts": [{"content": m["content"], "type": "text"}]} for m in call["messages"]]
        output = [{"role": "assistant", "parts": [{"content": call["reply"], "type": "text"}], "finish_reason": "stop"}]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": MODEL,
            "gen_ai.provider.name": "openai",
            "gen_ai.response.finish_reasons": ["stop"],
            "gen_ai.response.model": MODEL,
            "gen_ai.response.id": call["response_id"],
            "gen_ai.usage.input_tokens": inputs,
            "gen_ai.usage.output_tokens": outputs,
            "gen_ai.input.messages": json.dumps(messages, separators=(",", ":"), ensure_ascii=False),
            "gen_ai.output.messages": json.dumps(output, separators=(",", ":"), ensure_ascii=False),
        }
        chat = {**call, "start": call["start"] + 2_000_000}  # inside the agent's span, which starts the trace
        chats.append(_span(chat, f"chat {MODEL}", 3, attributes, parent=True, status={}))
        agent = {**call, "span_id": call["parent_id"], "end": call["end"] + 1_000_000}
        agent_attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": conv["role"],
            "gen_ai.conversation.id": conv["conversation_id"],
        }
        agents.append(_span(agent, f"invoke_agent {conv['role']}", 1, agent_attributes, parent=False, status={}))
    scopes = [
        ({"name": "opentelemetry.util.genai.handler", "version": "0.4b0"}, chats),
        ({"name": conv["role"]}, agents),
    ]
    return _request(conv["role"], scopes)


def openinference(conv: dict[str, Any], index: int) -> dict[str, Any]:
    """openinference-instrumentation-openai, the conversation id from using_session()."""
    spans = []
    for call in calls(conv, index):
        inputs, outputs = _usage(call)
        request = {"model": MODEL, "messages": call["messages"], "temperature": 0.2}
        response = {
            "id": call["response_id"],
            "choices": [
                {"finish_reason": "stop", "index": 0, "message": {"content": call["reply"], "role": "assistant"}}
            ],
            "model": MODEL,
            "object": "chat.completion",
            "usage": {"completion_tokens": outputs, "prompt_tokens": inputs, "total_tokens": inputs + outputs},
        }
        attributes: dict[str, Any] = {
            "llm.system": "openai",
            "input.value": json.dumps(request, ensure_ascii=False),
            "input.mime_type": "application/json",
            "output.value": json.dumps(response, separators=(",", ":"), ensure_ascii=False),
            "output.mime_type": "application/json",
            "session.id": conv["conversation_id"],
            "llm.invocation_parameters": json.dumps({"model": MODEL, "temperature": 0.2}),
        }
        for n, m in enumerate(call["messages"]):
            attributes[f"llm.input_messages.{n}.message.role"] = m["role"]
            attributes[f"llm.input_messages.{n}.message.content"] = m["content"]
        attributes.update(
            {
                "llm.model_name": MODEL,
                "llm.token_count.total": inputs + outputs,
                "llm.token_count.prompt": inputs,
                "llm.token_count.completion": outputs,
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": call["reply"],
                "openinference.span.kind": "LLM",
            }
        )
        spans.append(_span(call, "ChatCompletion", 1, attributes, parent=False, status={"code": 1}))
    return _request(conv["role"], [({"name": "openinference.instrumentation.openai", "version": "0.1.66"}, spans)])


def openllmetry(conv: dict[str, Any], index: int) -> dict[str, Any]:
    """OpenLLMetry's older flattened prompt and completion attributes, with a Traceloop association property."""
    spans = []
    for call in calls(conv, index):
        inputs, outputs = _usage(call)
        attributes: dict[str, Any] = {
            "llm.request.type": "chat",
            "traceloop.association.properties.session_id": conv["conversation_id"],
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": MODEL,
            "gen_ai.request.temperature": 0.2,
            "llm.is_streaming": False,
            "gen_ai.openai.api_base": "https://api.openai.com/v1/",
        }
        for n, m in enumerate(call["messages"]):
            attributes[f"gen_ai.prompt.{n}.role"] = m["role"]
            attributes[f"gen_ai.prompt.{n}.content"] = m["content"]
        attributes.update(
            {
                "gen_ai.response.model": MODEL,
                "gen_ai.response.id": call["response_id"],
                "llm.usage.total_tokens": inputs + outputs,
                "gen_ai.usage.completion_tokens": outputs,
                "gen_ai.usage.prompt_tokens": inputs,
                "gen_ai.completion.0.finish_reason": "stop",
                "gen_ai.completion.0.role": "assistant",
                "gen_ai.completion.0.content": call["reply"],
            }
        )
        spans.append(_span(call, "openai.chat", 3, attributes, parent=False, status={}))
    return _request(conv["role"], [({"name": "opentelemetry.instrumentation.openai.v1"}, spans)])


SHAPES: dict[str, Callable[[dict[str, Any], int], dict[str, Any]]] = {
    "genai.jsonl": genai,
    "openinference.jsonl": openinference,
    "openllmetry.jsonl": openllmetry,
}


def generate(out: Path = HERE) -> list[Path]:
    """Write the three exports into `out`; return their paths. A line per conversation (one request each)."""
    conversations = pick()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for k, (name, shape) in enumerate(SHAPES.items()):
        mine = conversations[k * len(ROLES) : (k + 1) * len(ROLES)]
        # conversations are numbered across the files so that no two start at the same time
        lines = [shape(conv, k * len(ROLES) + i) for i, conv in enumerate(mine)]
        path = out / name
        text = "".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines)
        path.write_text(text, encoding="utf-8", newline="\n")
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="the folder to write (default: beside this script)")
    args = parser.parse_args()
    for path in generate(args.out):
        print(f"wrote {path} ({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
