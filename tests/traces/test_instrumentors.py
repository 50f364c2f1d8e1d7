"""Round trip through the real OpenAI instrumentors: the test chatbot (chatbot.py) talks to the project's own
OpenAI-protocol server under each instrumentor in turn, its spans are written as a collector's file exporter
writes them (otlp_capture.py, a process per instrumentor: they patch `openai` globally), and
`role-rubric import source=otel` must give back exactly the conversations the chatbot had.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from calibration.cli import main

ROOT = Path(__file__).resolve().parents[2]

NEEDS = {
    "genai": "opentelemetry.instrumentation.openai_v2",
    "genai-events": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
    "openllmetry": "opentelemetry.instrumentation.openai",
}

PINS = dict.fromkeys(
    ("genai", "genai-events"),
    "opentelemetry-instrumentation-openai-v2 2.4b0 imports with opentelemetry-util-genai 0.4b0 (1.2b0 on lack "
    "the module it imports; 1.0b0 and 1.1b0 have no older-conventions mode)",
)

CASES = ["genai", "genai-events", "openinference", "openllmetry"]


def capture(instrumentor: str, folder: Path, api: str = "chat", *flags: str) -> tuple[Path, list[dict[str, Any]]]:
    """Run the chatbot under `instrumentor` in its own process, on the OpenAI `api` (chat: Chat Completions,
    responses: the Responses API): the OTLP file and the conversations it had."""
    try:
        importlib.import_module(NEEDS[instrumentor])  # importing patches nothing: instrument() does
    except ImportError as exc:
        pytest.skip(f"{NEEDS[instrumentor]} does not import here ({exc}): {PINS.get(instrumentor, 'install it')}")
    out = folder / f"{instrumentor}-{api}.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "tests.traces.otlp_capture", instrumentor, str(out), "--api", api, *flags],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected = json.loads(out.with_name(out.name + ".expected.json").read_text(encoding="utf-8"))
    return out, expected


def spans_of(path: Path) -> dict[str, dict[str, Any]]:
    """span id -> the span as written (with its trace id) and `said`: its attributes and log records (the
    older GenAI events) as one text, quotes and escapes removed, from an OTLP JSON lines file."""
    spans: dict[str, dict[str, Any]] = {}
    logs: dict[str, list[Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        request = json.loads(line)
        for resource in request.get("resourceSpans", []):
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    spans[span["spanId"]] = span
        for resource in request.get("resourceLogs", []):
            for scope in resource["scopeLogs"]:
                for record in scope["logRecords"]:
                    logs.setdefault(record.get("spanId", ""), []).append(record)
    for span_id, span in spans.items():
        span["said"] = _plain(json.dumps([span["attributes"], logs.get(span_id, [])]))
    return spans


def _plain(text: str) -> str:
    return text.replace("\\", "").replace('"', "")


def imported(files: Path, out: Path) -> list[dict[str, Any]]:
    """`role-rubric import source=otel`: each instrumentation's own conversation id is read by default."""
    assert main(["import", "source=otel", f"files={files}", f"out={out}"]) == 0
    lines = (out / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("instrumentor", CASES)
def test_the_import_gives_back_the_conversations_the_chatbot_had(tmp_path, instrumentor):
    files, expected = capture(instrumentor, tmp_path)
    records, spans = assert_comes_back(files, expected, tmp_path / "imported")
    for got in records.values():
        first_reply = int(spans[got["turns"][0]["span_id"]]["startTimeUnixNano"])
        started = datetime.fromisoformat(got["started_at"].replace("Z", "+00:00")).timestamp()
        assert first_reply / 1e9 - 60 < started <= first_reply / 1e9 + 1e-6


def assert_comes_back(
    files: Path, expected: list[dict[str, Any]], out: Path, *, call_ids: bool = True
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The import of the captured `files` gives back the conversations the chatbot had: its roles, one turn per
    user message, in order, the text as said (an agent's two calls are one turn), the tools kept with their turn
    and ids naming the call that wrote the reply. Returns the imported records by conversation id, and the spans."""
    records = {r["conversation_id"]: r for r in imported(files, out)}
    assert sorted(records) == sorted(c["conversation_id"] for c in expected)
    spans = spans_of(files)
    for want in expected:
        got = records[want["conversation_id"]]
        assert got["chatbot_role"] == want["chatbot_role"]
        assert [(t["user"], t["assistant"]) for t in got["turns"]] == [
            (t["user"], t["assistant"]) for t in want["turns"]
        ]
        for got_turn, want_turn in zip(got["turns"], want["turns"], strict=True):
            assert_tools_kept(got_turn, want_turn, call_ids=call_ids)
            assert_ids_name_the_reply(got_turn, spans)
    return records, spans


def assert_tools_kept(got: dict[str, Any], want: dict[str, Any], *, call_ids: bool = True) -> None:
    """The tool call and its result stay with the turn (context for the judge), in order, not as turns.
    call_ids=False: the instrumentor records another id on the call than the one its result names."""
    if "tools" not in want:
        assert not got.get("tools"), got
        return
    assert [m["role"] for m in got["tools"]] == [m["role"] for m in want["tools"]]
    call, result = got["tools"]
    assert [c["name"] for c in call["tool_calls"]] == ["track_parcel"]
    assert json.loads(call["tool_calls"][0]["arguments"]) == {"query": got["user"]}
    assert result["content"] == want["tools"][1]["content"]
    assert result.get("tool_call_id") == want["tools"][0]["tool_calls"][0]["id"]
    if call_ids:
        assert call["tool_calls"][0]["id"] == result["tool_call_id"]


def assert_ids_name_the_reply(turn: dict[str, Any], spans: dict[str, dict[str, Any]]) -> None:
    """trace_id/span_id are those of the captured LLM call that wrote the reply (the agent's second call:
    the first holds the tool call only)."""
    span = spans[turn["span_id"]]
    assert span["traceId"] == turn["trace_id"]
    assert _plain(turn["assistant"]) in span["said"], span["name"]


# -- the OpenAI Responses API ----------------------------------------------------------------------------------

RESPONSES_CASES = ["openinference", "openllmetry"]
"""The instrumentors that record the Responses API (docs/how-to/traces.md says which do not)."""

ITEM_IDS = {"openllmetry"}
"""Instrumentors that record a function call under its item id (fc_...) instead of its call_id, the id its
output names: the call and its result are still one tool step, in order."""


@pytest.mark.parametrize("instrumentor", RESPONSES_CASES)
def test_a_responses_api_chatbot_comes_back_exactly(tmp_path, instrumentor):
    """The chatbot on the Responses API (instructions, and only the new input items after previous_response_id)
    under each instrumentor that records it: roles from `instructions`, turns from input items and output
    text, function calls and their outputs as tool steps, ids naming the call that wrote the reply."""
    files, expected = capture(instrumentor, tmp_path, "responses")
    assert_comes_back(files, expected, tmp_path / "imported", call_ids=instrumentor not in ITEM_IDS)


def test_responses_chained_by_previous_response_id_are_one_conversation_without_a_session(tmp_path):
    """No conversation id set: OpenInference keeps the request and the Response whole (input.value,
    output.value), so each previous_response_id chain is one conversation, named by its first response."""
    files, expected = capture("openinference", tmp_path, "responses", "--no-session")
    records = {r["conversation_id"]: r for r in imported(files, tmp_path / "imported")}
    assert sorted(records) == sorted(c["first_response_id"] for c in expected)
    for want in expected:
        got = records[want["first_response_id"]]
        assert got["chatbot_role"] == want["chatbot_role"]
        assert [t["user"] for t in got["turns"]] == [t["user"] for t in want["turns"]]
        assert [t["assistant"] for t in got["turns"]] == [t["assistant"] for t in want["turns"]]


def test_the_genai_instrumentor_records_no_responses_api_call(tmp_path, capsys):
    """opentelemetry-instrumentation-openai-v2 (2.4b0) patches Chat Completions and embeddings only: a
    Responses API chatbot leaves the application's own spans and no LLM call, and the import says so in one
    line (docs/how-to/traces.md names the instrumentors that record it). Fails once it records them: then
    move it to RESPONSES_CASES."""
    files, _ = capture("genai", tmp_path, "responses")
    assert {s["name"] for s in spans_of(files).values()} == {"invoke_agent support-bot"}
    assert main(["import", "source=otel", f"files={files}", f"out={tmp_path / 'imported'}"]) == 2
    assert "no LLM call in OTLP files" in capsys.readouterr().err
