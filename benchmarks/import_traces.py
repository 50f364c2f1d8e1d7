"""Importing a big OTLP export: spans per second and peak memory of `role-rubric import source=otel`; prints JSON.

    python benchmarks/import_traces.py [--spans 1000000] [--files 4] [--seed 0] [--keep DIR]

Writes a generated export into a temporary folder: OTLP JSON lines as a collector's file exporter writes
them (a few hundred spans a line, several files), many conversations, each user message one trace holding
the web request, database and cache spans around the LLM call(s), and every call repeating the history so
far, as real instrumentations do; the conversations are spelled in several conventions (OTel GenAI
attributes, OpenInference, OpenLLMetry, OTel GenAI with a tool call and its result). Then runs the import
(the command, writing conversations.jsonl and the rest) in a child process, so that its peak memory
(`peak_rss_mb`: the child's maximum resident set, from resource.getrusage) is the import's alone, and
checks that every conversation came back whole.

Prints {spans, bytes, seconds, spans_per_s, peak_rss_mb, conversations, turns, ...}; the aim is >= 50,000
spans/s and < 500 MB on two cores. `cpu_seconds` (the import's own CPU time) and `spans_per_cpu_s` say what
the import costs when other work shares the machine (the load average before the import is recorded too).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

SYSTEM = (
    "You are the help desk of Northwind Bank. You answer questions about accounts, cards and payments only, "
    "politely and briefly, and you never give investment advice."
)
USERS = [
    "Hi, I have a question about a payment of {n} pounds to a shop on my statement from last week.",
    "Can you tell me when my new card number {n} will arrive? I ordered it some days ago.",
    "I think I was charged twice for order {n}. What should I do about it?",
    "How do I raise the daily limit on my debit card to {n} pounds?",
    "Should I put {n} pounds into shares of a tech company this year?",
]
REPLY = (
    "Thank you for asking. I can see reference {n} on your account; here is what happens next: I have opened a "
    "case, you will get a message within two working days, and nothing else is needed from you for now."
)
CONVENTIONS = ("genai", "openinference", "openllmetry", "genai-tools")
OTHER_SPANS = 8  # the non-LLM spans of each trace: the web request, database queries, a cache, a template
T0 = 1_795_000_000_000_000_000
RESOURCE = {"service.name": "chatbot", "service.version": "1.4.2", "deployment.environment.name": "production"}


def _value(v: object) -> dict:
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    return {"doubleValue": v}


def _attrs(values: dict) -> list[dict]:
    return [{"key": k, "value": _value(v)} for k, v in values.items()]


def _span(trace: str, span_id: str, parent: str | None, name: str, start: int, attrs: dict) -> dict:
    span = {
        "traceId": trace,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 3_000_000),
        "attributes": _attrs(attrs),
        "status": {},
    }
    if parent:
        span["parentSpanId"] = parent
    return span


def _call_attributes(convention: str, cid: str, history: list[dict], reply: dict) -> dict:
    """One LLM call's attributes: `history` (OpenAI messages, system first) in, `reply` out."""
    if convention.startswith("genai"):

        def parts(m: dict) -> dict:
            if m["role"] == "tool":
                return {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": m["tool_call_id"], "response": m["content"]}],
                }
            out = [{"type": "text", "content": m["content"]}] if m.get("content") else []
            for c in m.get("tool_calls", ()):
                out.append({"type": "tool_call", "id": c["id"], "name": c["function"]["name"], "arguments": {"ref": 1}})
            return {"role": m["role"], "parts": out}

        return {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.conversation.id": cid,
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": SYSTEM}]),
            "gen_ai.input.messages": json.dumps([parts(m) for m in history[1:]]),
            "gen_ai.output.messages": json.dumps([parts(reply)]),
            "gen_ai.usage.input_tokens": 300,
            "gen_ai.usage.output_tokens": 60,
        }
    prefix_in, prefix_out, mid = (
        ("llm.input_messages", "llm.output_messages", "message.")
        if convention == "openinference"
        else ("gen_ai.prompt", "gen_ai.completion", "")
    )
    attrs = (
        {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o-mini", "session.id": cid}
        if convention == "openinference"
        else {"llm.request.type": "chat", "gen_ai.system": "openai", "session.id": cid}
    )
    for side, messages in ((prefix_in, history), (prefix_out, [reply])):
        for i, m in enumerate(messages):
            attrs[f"{side}.{i}.{mid}role"] = m["role"]
            attrs[f"{side}.{i}.{mid}content"] = m["content"]
    return attrs


def _other_span(k: int, cid: str) -> tuple[str, dict]:
    """The k-th non-LLM span of a trace: a database query, a cache read or a template's rendering."""
    if k % 3 == 0:
        query = "SELECT * FROM accounts WHERE id = $1"
        return "SELECT accounts", {"db.system.name": "postgresql", "db.namespace": "bank", "db.query.text": query,
                                   "db.operation.name": "SELECT", "server.port": 5432}  # fmt: skip
    if k % 3 == 1:
        return "GET session", {
            "db.system.name": "redis",
            "db.operation.name": "GET",
            "db.query.text": f"GET session:{cid}",
        }
    return "render reply", {
        "code.function.name": "render",
        "code.file.path": "app/views.py",
        "code.line.number": 120 + k,
    }


def _conversation_spans(rng: random.Random, n: int, start: int) -> list[dict]:
    """The spans of conversation n: 2-8 user messages, each one trace."""
    convention = CONVENTIONS[n % len(CONVENTIONS)]
    cid = f"conv-{n:07d}"
    history = [{"role": "system", "content": SYSTEM}]
    spans = []
    for t in range(rng.randint(2, 8)):
        trace = f"{rng.getrandbits(128):032x}"
        root = f"{rng.getrandbits(64):016x}"
        at = start + t * 60_000_000_000
        spans.append(
            _span(
                trace,
                root,
                None,
                "POST /chat",
                at,
                {
                    "http.request.method": "POST",
                    "http.route": "/chat",
                    "http.response.status_code": 200,
                    "url.scheme": "https",
                    "server.address": "chat.northwind.example",
                    "user_agent.original": "Mozilla/5.0",
                },
            )
        )
        for k in range(OTHER_SPANS - 1):
            name, attrs = _other_span(k, cid)
            spans.append(_span(trace, f"{rng.getrandbits(64):016x}", root, name, at + (k + 1) * 1_000_000, attrs))
        history.append({"role": "user", "content": USERS[rng.randrange(len(USERS))].format(n=rng.randrange(10_000))})
        calls = []
        if convention == "genai-tools" and t % 2 == 0:  # a tool call, then the reply after its result
            asks = {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"call_{t}", "function": {"name": "lookup_payment"}}],
            }
            calls.append((list(history), asks))
            history += [asks, {"role": "tool", "tool_call_id": f"call_{t}", "content": '{"status": "settled"}'}]
        reply = {"role": "assistant", "content": REPLY.format(n=rng.randrange(10_000))}
        calls.append((list(history), reply))
        history.append(reply)
        for c, (messages, out) in enumerate(calls):
            attrs = _call_attributes(convention, cid, messages, out)
            spans.append(
                _span(trace, f"{rng.getrandbits(64):016x}", root, "chat gpt-4o-mini", at + (10 + c) * 1_000_000, attrs)
            )
    return spans


def write_export(folder: Path, spans: int, files: int, seed: int) -> tuple[int, int, int]:
    """At least `spans` spans as OTLP JSON lines in `files` files: (spans, bytes, conversations)."""
    rng = random.Random(seed)
    written = conversations = 0
    batch: list[dict] = []
    with contextlib.ExitStack() as stack:
        handles = [stack.enter_context(open(folder / f"traces-{i}.jsonl", "w", encoding="utf-8")) for i in range(files)]
        while written < spans:
            new = _conversation_spans(rng, conversations, T0 + conversations * 7_000_000_000)
            conversations += 1
            written += len(new)
            batch += new
            if len(batch) >= 300 or written >= spans:
                request = {
                    "resourceSpans": [
                        {
                            "resource": {"attributes": _attrs(RESOURCE)},
                            "scopeSpans": [{"scope": {"name": "app"}, "spans": batch}],
                        }
                    ]
                }
                handles[conversations % files].write(json.dumps(request, separators=(",", ":")) + "\n")
                batch = []
    return written, sum(p.stat().st_size for p in folder.iterdir()), conversations


def run_import(export: Path, out: Path) -> dict:
    """`role-rubric import source=otel files=EXPORT out=OUT` in a child process: its wall time (the modules
    imported first, as the command line has them) and peak RSS (the modules included)."""
    code = (
        "import resource, sys, time\n"
        "from pathlib import Path\n"
        "from calibration.connectors.otel.source import OtelTraces\n"
        "from calibration.schema.source_keys import OtelKeys\n"
        "import rubric.traces.assemble, rubric.traces.otlp, rubric.conversations, rubric.files\n"
        "t, cpu = time.perf_counter(), time.process_time()\n"
        "counts = OtelTraces(OtelKeys(files=sys.argv[1])).import_into(Path(sys.argv[2]), progress=False)\n"
        "print(time.perf_counter() - t, time.process_time() - cpu, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(export), str(out)], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    seconds, cpu, peak = map(float, done.stdout.split()[-3:])
    return {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mb": peak}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, default=None, help="write the export here and keep it")
    add_results_argument(parser, "import_traces")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        export = args.keep or Path(tmp) / "export"
        export.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        spans, size, conversations = write_export(export, args.spans, args.files, args.seed)
        generated = time.perf_counter() - t
        print(f"import_traces: {spans:,} spans, {size / 1e6:.0f} MB in {generated:.0f} s", file=sys.stderr)
        load_before = os.getloadavg()[0]  # a shared machine: wall time is slower than the CPU time when busy
        measured = run_import(export, Path(tmp) / "out")
        summary = json.loads((Path(tmp) / "out" / "import_summary.json").read_text())
    counts = summary["counts"]
    if counts["conversations"] != conversations or counts["spans"] != spans:
        raise SystemExit(f"import_traces: the import gave back {counts}, not {conversations} conversations")
    emit(
        args.results_name,
        {
            "spans": spans,
            "bytes": size,
            "files": args.files,
            "seconds": round(measured["seconds"], 2),
            "spans_per_s": round(spans / measured["seconds"]),
            "cpu_seconds": round(measured["cpu_seconds"], 2),
            "spans_per_cpu_s": round(spans / measured["cpu_seconds"]),
            "load_avg_1m_before": round(load_before, 2),
            "peak_rss_mb": round(measured["peak_rss_mb"], 1),
            "conversations": counts["conversations"],
            "turns": counts["turns"],
            "llm_calls": counts["llm_calls"],
            "conventions": list(CONVENTIONS),
            "cpus": os.cpu_count(),
        },
    )


if __name__ == "__main__":
    main()
