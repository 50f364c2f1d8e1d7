"""Round trips through a real MLflow server (servers.py: `mlflow server`, SQLite, a free port, started once per
session): the test chatbot (chatbot.py) traced into it by MLflow Tracing (mlflow_chatbot.py, its own process),
and the same chatbot under a real OpenTelemetry instrumentor posted to its OTLP endpoint (OTLP JSON and
protobuf); reviewers' feedback logged on the traces as MLflow's users log it. The import must give back
exactly the conversations the chatbot had (roles, turn order, text, tool steps, the MLflow trace of each
turn) and the HUMAN feedback as labels, each reviewer apart; LLM_JUDGE feedback is no label.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from calibration.connectors.mlflow.source import MlflowSource
from rubric.errors import InputError
from rubric.servers.fake import FakeOpenAI
from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.spans import Annotation, Span
from tests.processes import ServerUnavailable, stop
from tests.traces.servers import OFFLINE_ENV, MlflowServer, mlflow_server

ROOT = Path(__file__).resolve().parents[2]
mlflow = pytest.importorskip("mlflow", reason="source=mlflow needs mlflow-skinny (the [mlflow] extra)")
pytestmark = pytest.mark.mlflow  # round trips through a real MLflow server (its own CI step: -m mlflow)


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**os.environ, **OFFLINE_ENV, "PYTHONPATH": path}


def _run(*args: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, *args], cwd=ROOT, env={**_env(), **(env or {})}, capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]


@dataclass
class Imported:
    """What the source gave: the conversation records (by id), every span (by span id), the annotations."""

    records: dict[str, dict[str, Any]]
    spans: dict[str, Span]
    annotations: list[Annotation] = field(default_factory=list)


def imported(server: MlflowServer, experiment: str) -> Imported:
    source = MlflowSource(server.url, experiment, timeout=30)
    spans: dict[str, Span] = {}

    def kept():
        for span in source.spans():
            spans[span.span_id] = span
            yield span

    result = assemble(
        kept(), TraceSelection(), source={"kind": "mlflow", **source.record}, description=source.description
    )
    for record in result.records:
        assert record["source"] == {
            "kind": "mlflow",
            "tracking_uri": server.url,
            "experiment": experiment,
            "experiment_id": source.experiment_id,
        }
    return Imported({r["conversation_id"]: r for r in result.records}, spans, list(source.annotations()))


def assert_same_conversations(got: dict[str, dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Roles, turn order and text as the chatbot had them; an agent's tool call and result with its turn."""
    assert sorted(got) == sorted(c["conversation_id"] for c in expected)
    for want in expected:
        record = got[want["conversation_id"]]
        assert record["chatbot_role"] == want["chatbot_role"]
        assert [(t["user"], t["assistant"]) for t in record["turns"]] == [
            (t["user"], t["assistant"]) for t in want["turns"]
        ]
        for turn, want_turn in zip(record["turns"], want["turns"], strict=True):
            if "tools" not in want_turn:
                assert "tools" not in turn, turn
                continue
            call, result = turn["tools"]
            asked = want_turn["tools"][0]["tool_calls"][0]
            assert (call["role"], result["role"]) == ("assistant", "tool")
            assert [(c["id"], c["name"]) for c in call["tool_calls"]] == [(asked["id"], "track_parcel")]
            assert json.loads(call["tool_calls"][0]["arguments"]) == json.loads(asked["function"]["arguments"])
            assert (result["content"], result["tool_call_id"]) == (want_turn["tools"][1]["content"], asked["id"])


def assert_ids_name_the_reply(got: Imported) -> None:
    """Each turn's trace_id/span_id name the LLM call span that wrote its reply, in MLflow's trace of that turn."""
    for record in got.records.values():
        for turn in record["turns"]:
            span = got.spans[turn["span_id"]]
            assert span.trace_id == turn["trace_id"] and len(turn["trace_id"]) == 32
            assert turn["mlflow_trace_id"] == "tr-" + turn["trace_id"] == span.source_ids["mlflow_trace_id"]
            said = json.dumps([span.attributes, [e.attributes for e in span.events]], ensure_ascii=False)
            assert json.dumps(turn["assistant"], ensure_ascii=False)[1:-1] in said


# -- MLflow Tracing -------------------------------------------------------------------------------------------

TRACED = "support-bot (MLflow Tracing)"


@dataclass
class Traced:
    expected: list[dict[str, Any]]
    human: list[tuple[str, str, Any, str, str | None, str | None]]
    """(reviewer, name, value, trace id, span id, session) of every HUMAN feedback that stands."""


@pytest.fixture(scope="module")
def traced(mlflow_tracking, tmp_path_factory) -> Traced:
    """The chatbot traced into experiment TRACED, then reviewers' feedback on its turns (two reviewers per turn,
    one of them on the LLM call's span too, one corrected later), and an LLM judge's."""
    from mlflow.entities import AssessmentSource

    out = tmp_path_factory.mktemp("mlflow_traced") / "conversations.json"
    _run("-m", "tests.traces.mlflow_chatbot", mlflow_tracking.url, TRACED, str(out))
    expected = json.loads(out.read_text(encoding="utf-8"))
    mlflow.set_tracking_uri(mlflow_tracking.url)
    client = mlflow.MlflowClient(mlflow_tracking.url)
    human = []

    def person(name: str) -> AssessmentSource:
        return AssessmentSource(source_type="HUMAN", source_id=name)

    for conversation in expected:
        for n, turn in enumerate(conversation["turns"]):
            trace_id = turn["mlflow_trace_id"]
            otlp_id = trace_id.removeprefix("tr-")
            for reviewer, value in (("reviewer-1", 4 - n % 2), ("reviewer-2", 3)):
                mlflow.log_feedback(trace_id=trace_id, name="overall", value=value, source=person(reviewer))
                human.append((reviewer, "overall", value, otlp_id, None, None))
            call = next(s for s in client.get_trace(trace_id).data.spans if s.span_type == "CHAT_MODEL")
            mlflow.log_feedback(
                trace_id=trace_id, name="scope", value=4, span_id=call.span_id, source=person("reviewer-1")
            )
            human.append(("reviewer-1", "scope", 4, otlp_id, call.span_id, None))
            judge = AssessmentSource(source_type="LLM_JUDGE", source_id="gpt-judge")
            mlflow.log_feedback(trace_id=trace_id, name="overall", value=1, source=judge)
    first = expected[0]["turns"][0]["mlflow_trace_id"]
    slip = mlflow.log_feedback(trace_id=first, name="tone", value=1, source=person("reviewer-3"))
    mlflow.override_feedback(trace_id=first, assessment_id=slip.assessment_id, value=2, source=person("reviewer-3"))
    human.append(("reviewer-3", "tone", 2, first.removeprefix("tr-"), None, None))
    return Traced(expected, human)


def test_mlflow_tracing_gives_back_the_conversations_the_chatbot_had(mlflow_tracking, traced):
    got = imported(mlflow_tracking, TRACED)
    assert_same_conversations(got.records, traced.expected)
    assert_ids_name_the_reply(got)
    for want in traced.expected:  # each turn names the MLflow trace the chatbot handled it in
        turns = got.records[want["conversation_id"]]["turns"]
        assert [t["mlflow_trace_id"] for t in turns] == [t["mlflow_trace_id"] for t in want["turns"]]


RESPONSES = "support-bot (MLflow Tracing, Responses API)"


@pytest.mark.parametrize("session", [True, False], ids=["session", "no-session"])
def test_a_responses_api_chatbot_traced_by_autolog_comes_back_exactly(mlflow_tracking, tmp_path, session):
    """The chatbot on the OpenAI Responses API (instructions + only the new input items after
    previous_response_id), recorded by mlflow.openai.autolog(): `instructions` is the role, input items and
    output text the turns, function calls and their outputs the tool steps. Without a session, each
    previous_response_id chain is one conversation, named by its first response's id."""
    experiment = f"{RESPONSES} {'with' if session else 'without'} sessions"
    out = tmp_path / "conversations.json"
    flags = ["--api", "responses"] + ([] if session else ["--no-session"])
    _run("-m", "tests.traces.mlflow_chatbot", mlflow_tracking.url, experiment, str(out), *flags)
    expected = json.loads(out.read_text(encoding="utf-8"))
    if not session:
        for conversation in expected:
            conversation["conversation_id"] = conversation["first_response_id"]
    got = imported(mlflow_tracking, experiment)
    assert_same_conversations(got.records, expected)
    assert_ids_name_the_reply(got)
    for want in expected:
        turns = got.records[want["conversation_id"]]["turns"]
        assert [t["mlflow_trace_id"] for t in turns] == [t["mlflow_trace_id"] for t in want["turns"]]


def test_traces_without_a_session_name_mlflows_own_way_to_set_one(mlflow_tracking, tmp_path):
    """A Chat Completions chatbot traced by autolog without update_current_trace(session_id=...): the import
    stops in one line naming MLflow's way, not OTel's or OpenInference's attributes."""
    experiment = "support-bot (MLflow Tracing, no session)"
    _run("-m", "tests.traces.mlflow_chatbot", mlflow_tracking.url, experiment, str(tmp_path / "c.json"), "--no-session")
    with pytest.raises(InputError, match="names its conversation") as caught:
        imported(mlflow_tracking, experiment)
    assert "mlflow.update_current_trace(session_id=CONVERSATION_ID)" in str(caught.value)
    assert "using_session" not in str(caught.value) and "\n" not in str(caught.value)


def test_traces_are_read_page_by_page_oldest_first(mlflow_tracking, traced, monkeypatch, caplog):
    """A small page gives the same spans, in the same order (pages follow one another, none read twice); a long
    read says how far it got."""
    whole = [(s.trace_id, s.span_id) for s in MlflowSource(mlflow_tracking.url, TRACED).spans()]
    paged = MlflowSource(mlflow_tracking.url, TRACED, page_size=2, progress=True)
    monkeypatch.setattr("calibration.connectors.mlflow.source.PROGRESS_EVERY_S", 0.0)  # a line after every page
    with caplog.at_level(logging.INFO, logger="calibration.connectors.mlflow.source"):
        assert [(s.trace_id, s.span_id) for s in paged.spans()] == whole
    said = [r.getMessage() for r in caplog.records if r.name == "calibration.connectors.mlflow.source"]
    assert said == [f"import: {n} traces read from {paged.description}" for n in (2, 4, 6, 7)]
    assert len({t for t, _ in whole}) == sum(len(c["turns"]) for c in traced.expected)  # a trace per turn
    firsts = [t["mlflow_trace_id"].removeprefix("tr-") for c in traced.expected for t in c["turns"]]
    assert list(dict.fromkeys(t for t, _ in whole)) == firsts  # oldest first: the order they were had


def test_reading_leaves_mlflows_own_settings_as_they_were(mlflow_tracking, traced, monkeypatch):
    """The source sets MLflow's timeout, retries and tracking URI for its own requests only: code of the same
    process (an application, the publish step) keeps its own."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://elsewhere.invalid:5000")
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    before = mlflow.get_tracking_uri()
    assert len(list(MlflowSource(mlflow_tracking.url, TRACED).spans())) > 0
    assert mlflow.get_tracking_uri() == before
    assert os.environ["MLFLOW_TRACKING_URI"] == "http://elsewhere.invalid:5000"
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ


def test_human_feedback_comes_back_per_reviewer_and_llm_judges_do_not(mlflow_tracking, traced):
    got = imported(mlflow_tracking, TRACED)
    found = sorted(
        ((a.reviewer, a.name, a.value, a.trace_id, a.span_id, a.session_id) for a in got.annotations), key=repr
    )
    assert found == sorted(traced.human, key=repr)  # the LLM judge's "overall" = 1 and the corrected 1 are absent
    assert all(a.where.startswith("MLflow trace tr-") for a in got.annotations)
    for a in got.annotations:  # a trace's annotation names a trace the import kept, its span one of its spans
        if a.trace_id is not None:
            assert a.trace_id in {s.trace_id for s in got.spans.values()}
        if a.span_id is not None:
            assert got.spans[a.span_id].trace_id == a.trace_id


def test_feedback_named_like_no_question_is_listed_on_screen_with_the_label_map_that_maps_it(
    mlflow_tracking, traced, tmp_path, capsys
):
    """With a rubric of one question (overall), the reviewers' `scope` and `tone` feedback maps to none: the
    import says so on screen, names and counts, with the label_map= key; mapped, tone's answer becomes a label."""
    from calibration.cli import main

    rubric = tmp_path / "rubric.yaml"
    rubric.write_text(
        "name: overall_only\ntarget: overall\nquestions:\n  - id: overall\n    text: Adheres?\n    options:\n"
        + "".join(f"      - {{value: {v}, label: o{v}}}\n" for v in (1, 2, 3, 4)),
        encoding="utf-8",
    )
    args = ["import", "source=mlflow", f"tracking_uri={mlflow_tracking.url}", f"experiment='{TRACED}'"]
    assert main([*args, f"out={tmp_path / 'a'}", f"rubric_file={rubric}"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "left out: their names" in line]
    scope = sum(1 for h in traced.human if h[1] == "scope")
    assert said == [
        f"import: note: {scope + 1} annotations left out: their names are no rubric question: scope ({scope}), "
        "tone (1). Map them with label_map=FILE.csv, rows name,question_id (e.g. scope,overall; the questions: "
        "overall)."
    ]
    labels = (tmp_path / "a" / "labels.csv").read_text(encoding="utf-8").splitlines()
    (tmp_path / "map.csv").write_text("name,question_id\ntone,overall\n", encoding="utf-8")
    assert main([*args, f"out={tmp_path / 'b'}", f"rubric_file={rubric}", f"label_map={tmp_path / 'map.csv'}"]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "left out: their names" in line]
    assert said and "tone" not in said[0] and f"scope ({scope})" in said[0]
    mapped = (tmp_path / "b" / "labels.csv").read_text(encoding="utf-8").splitlines()
    assert len(mapped) == len(labels) + 1 and any(",reviewer-3,overall,2" in row for row in mapped)


# -- OTLP posted to MLflow's endpoint -------------------------------------------------------------------------

_HEX_KEYS = ("traceId", "spanId", "parentSpanId")
INSTRUMENTORS = {
    "genai": "opentelemetry.instrumentation.openai_v2",
    "openinference": "openinference.instrumentation.openai",
}


def _to_protobuf(line: str) -> bytes:
    """A collector's OTLP JSON line (hex ids) as the OTLP/HTTP protobuf body an exporter posts."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    def b64(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode() if k in _HEX_KEYS else b64(v) for k, v in value.items()
            }
        if isinstance(value, list):
            return [b64(v) for v in value]
        return value

    return ParseDict(b64(json.loads(line)), ExportTraceServiceRequest()).SerializeToString()


def post_otlp(url: str, experiment_id: str, body: bytes, content_type: str) -> int:
    request = urllib.request.Request(
        url + "/v1/traces",
        data=body,
        method="POST",
        headers={"Content-Type": content_type, "x-mlflow-experiment-id": experiment_id},
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=60) as reply:
        return reply.status


@pytest.mark.parametrize(
    ("instrumentor", "encoding"), [("genai", "json"), ("openinference", "protobuf")], ids=["genai-json", "oi-protobuf"]
)
def test_spans_posted_over_otlp_give_back_the_conversations(mlflow_tracking, tmp_path, instrumentor, encoding):
    """The chatbot under a real instrumentor (otlp_capture.py), its spans posted to MLflow's /v1/traces as an
    OTLP exporter does: MLflow takes the session from gen_ai.conversation.id / session.id, and the import reads
    the instrumentation's own attributes back."""
    pytest.importorskip(INSTRUMENTORS[instrumentor], reason=f"the {instrumentor} instrumentor does not import here")
    capture = tmp_path / f"{instrumentor}.jsonl"
    _run("-m", "tests.traces.otlp_capture", instrumentor, str(capture))
    expected = json.loads(capture.with_name(capture.name + ".expected.json").read_text(encoding="utf-8"))
    experiment = f"support-bot (OTLP {instrumentor} {encoding})"
    experiment_id = mlflow.MlflowClient(mlflow_tracking.url).create_experiment(experiment)
    for line in capture.read_text(encoding="utf-8").splitlines():
        if '"resourceSpans"' not in line:
            continue
        if encoding == "json":
            assert post_otlp(mlflow_tracking.url, experiment_id, line.encode(), "application/json") == 200
        else:
            assert post_otlp(mlflow_tracking.url, experiment_id, _to_protobuf(line), "application/x-protobuf") == 200
    got = imported(mlflow_tracking, experiment)
    assert_same_conversations(got.records, expected)
    assert_ids_name_the_reply(got)
    sent = {
        (span["traceId"], span["spanId"])
        for line in capture.read_text(encoding="utf-8").splitlines()
        for resource in json.loads(line).get("resourceSpans", [])
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    }
    assert sent == {(s.trace_id, s.span_id) for s in got.spans.values()}  # every span, OTLP's ids as sent
    # the resource's service.name (a trace tag in MLflow) selects as in an OTLP file
    source = MlflowSource(mlflow_tracking.url, experiment)
    kept = assemble(source.spans(), TraceSelection(service="support-bot"), source={}, description="d")
    assert [r["turns"] for r in kept.records] == [got.records[r["conversation_id"]]["turns"] for r in kept.records]
    assert len(kept.records) == len(expected)
    with pytest.raises(InputError, match="none of service 'elsewhere'"):
        assemble(source.spans(), TraceSelection(service="elsewhere"), source={}, description="d")


# -- bad input: one line, within seconds, nothing secret shown ------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_server_is_one_line_within_seconds_with_its_password_masked():
    url = f"http://alice:pa55-w0rd-secret@127.0.0.1:{_closed_port()}"
    began = time.monotonic()
    with pytest.raises(InputError, match=r"cannot reach MLflow at http://alice:\*\*\*@127\.0\.0\.1:\d+ ") as caught:
        MlflowSource(url, "support-bot")
    assert time.monotonic() - began < 5
    assert "pa55-w0rd-secret" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_token_from_token_env_is_never_shown(monkeypatch):
    token = "mlflow-tok-0123456789abcdef"
    monkeypatch.setenv("TEAM_MLFLOW_TOKEN", token)
    with pytest.raises(InputError, match="cannot reach MLflow") as caught:
        MlflowSource(f"http://127.0.0.1:{_closed_port()}?token={token}", "x", token_env="TEAM_MLFLOW_TOKEN")
    assert token not in str(caught.value)
    with pytest.raises(InputError, match="not set"):
        MlflowSource("http://127.0.0.1:1", "x", token_env="UNSET_MLFLOW_TOKEN_VAR")


def test_a_server_that_is_no_mlflow_is_named():
    with FakeOpenAI() as server, pytest.raises(InputError, match="did not answer the experiment as an MLflow"):
        MlflowSource(server.base_url.removesuffix("/v1"), "support-bot")


def test_refused_credentials_are_named_and_the_token_never_shown(monkeypatch):
    with FakeOpenAI() as server:
        server.modes.add("bad_key")  # 401 for everything, as an MLflow server with authentication on
        url = server.base_url.removesuffix("/v1")
        with pytest.raises(InputError, match=r"refused a request without credentials .*\(HTTP 401\)"):
            MlflowSource(url, "support-bot")
        token = "mlflow-tok-fedcba9876543210"
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
        with pytest.raises(InputError, match=r"refused the credentials .*MLFLOW_TRACKING_TOKEN") as caught:
            MlflowSource(url, "support-bot")
        assert token not in str(caught.value)
        assert server.last_headers["authorization"] == f"Bearer {token}"  # sent as MLflow's client sends it


def test_a_server_that_does_not_answer_is_one_line_after_the_timeout():
    with FakeOpenAI(timeout_s=5.0) as server:
        server.faults.append("timeout")
        began = time.monotonic()
        with pytest.raises(InputError, match=r"cannot reach MLflow at .* \(no answer within 1 s\)"):
            MlflowSource(server.base_url.removesuffix("/v1"), "support-bot", timeout=1)
        assert time.monotonic() - began < 4


def test_an_unknown_experiment_lists_those_that_exist(mlflow_tracking, traced):
    """The closest names first (a typo's likely target), whatever else the server holds."""
    with pytest.raises(InputError, match=r"has no experiment 'support bot' \(it has 'support-bot"):
        MlflowSource(mlflow_tracking.url, "support bot")


def test_an_experiment_without_traces_is_one_line(mlflow_tracking):
    mlflow.MlflowClient(mlflow_tracking.url).create_experiment("nothing traced yet")
    source = MlflowSource(mlflow_tracking.url, "nothing traced yet")
    with pytest.raises(InputError, match="'nothing traced yet' at http://127.0.0.1:\\d+ has no traces"):
        next(iter(source.spans()))


# -- the command: role-rubric import source=mlflow ------------------------------------------------------------


def import_command(url: str, experiment: str, out: Path) -> int:
    from calibration.cli import main

    # an experiment name with spaces or brackets is quoted, as Hydra asks of any such value
    return main(["import", "source=mlflow", f"tracking_uri={url}", f"experiment='{experiment}'", f"out={out}"])


def test_the_import_command_writes_the_conversations_and_each_reviewers_labels(mlflow_tracking, traced, tmp_path):
    out = tmp_path / "imported"
    assert import_command(mlflow_tracking.url, TRACED, out) == 0
    records = [json.loads(line) for line in (out / "conversations.jsonl").read_text(encoding="utf-8").splitlines()]
    assert_same_conversations({r["conversation_id"]: r for r in records}, traced.expected)
    assert [t["mlflow_trace_id"] for r in records for t in r["turns"]] == [
        t["mlflow_trace_id"] for c in traced.expected for t in c["turns"]
    ]  # conversations in the order they started, turns in order
    turn_of_trace = {
        t["mlflow_trace_id"].removeprefix("tr-"): (c["conversation_id"], str(n))
        for c in traced.expected
        for n, t in enumerate(c["turns"])
    }
    want = {(*turn_of_trace[trace], reviewer, name, str(value)) for reviewer, name, value, trace, _, _ in traced.human}
    with (out / "labels.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["conversation_id", "turn", "judge_id", "question_id", "answer"]
    assert {tuple(r) for r in rows[1:]} == want and len(rows) - 1 == len(want)
    assert {r[2] for r in rows[1:]} == {"reviewer-1", "reviewer-2", "reviewer-3"}  # no "gpt-judge": not a label
    summary = json.loads((out / "import_summary.json").read_text(encoding="utf-8"))
    assert summary["source"]["experiment"] == TRACED and summary["counts"]["labels"] == len(want)


def small_experiment(url: str, name: str) -> list[str]:
    """An experiment holding one two-turn conversation ("conv-small"), posted over OTLP as OTel GenAI spans;
    the MLflow trace ids of its turns."""
    experiment_id = mlflow.MlflowClient(url).create_experiment(name)
    now = time.time_ns()
    history: list[dict[str, Any]] = []
    spans, ids = [], []
    for n, (user, reply) in enumerate([("Where is my parcel?", "It arrives today."), ("Thanks!", "Glad to help.")]):
        trace_id = os.urandom(16).hex()
        ids.append("tr-" + trace_id)
        asked = [*history, {"role": "user", "parts": [{"type": "text", "content": user}]}]
        said = [{"role": "assistant", "parts": [{"type": "text", "content": reply}], "finish_reason": "stop"}]
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": "conv-small",
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "You are Sam of Parcelo."}]),
            "gen_ai.input.messages": json.dumps(asked),
            "gen_ai.output.messages": json.dumps(said),
        }
        spans.append(
            {
                "traceId": trace_id,
                "spanId": os.urandom(8).hex(),
                "name": "chat support-bot",
                "kind": 3,
                "startTimeUnixNano": str(now + n * 10**9),
                "endTimeUnixNano": str(now + n * 10**9 + 10**8),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
            }
        )
        history = asked + said
    body = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}]}]}
    assert post_otlp(url, experiment_id, json.dumps(body).encode(), "application/json") == 200
    return ids


def test_an_answer_outside_a_questions_options_is_refused_and_nothing_written(mlflow_tracking, tmp_path, capsys):
    from mlflow.entities import AssessmentSource

    first, _ = small_experiment(mlflow_tracking.url, "support-bot (a slip)")
    mlflow.set_tracking_uri(mlflow_tracking.url)
    person = AssessmentSource(source_type="HUMAN", source_id="reviewer-1")
    mlflow.log_feedback(trace_id=first, name="overall", value=3, source=person)
    mlflow.log_feedback(trace_id=first, name="scope", value=7, source=person)
    out = tmp_path / "imported"
    assert import_command(mlflow_tracking.url, "support-bot (a slip)", out) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("role-rubric import: error: "), err
    assert f"MLflow trace {first} feedback a-" in err and "answer 7" in err and "'scope'" in err, err
    assert not (out / "conversations.jsonl").exists() and not (out / "labels.csv").exists()


def test_a_reviewers_feedback_on_a_whole_session_is_read_as_the_conversations(mlflow_tracking, tmp_path, capsys):
    """MLflow keeps a session's feedback on its first trace, its metadata naming the session: the source gives
    it as the conversation's; the import refuses it (the questions are asked of each reply), in one line."""
    from mlflow.entities import AssessmentSource, Feedback

    first, _ = small_experiment(mlflow_tracking.url, "support-bot (session feedback)")
    mlflow.set_tracking_uri(mlflow_tracking.url)
    feedback = Feedback(
        name="overall",
        value=2,
        source=AssessmentSource(source_type="HUMAN", source_id="reviewer-2"),
        metadata={"mlflow.trace.session": "conv-small"},
    )
    mlflow.log_assessment(trace_id=first, assessment=feedback)
    got = imported(mlflow_tracking, "support-bot (session feedback)")
    assert [(a.name, a.value, a.reviewer, a.trace_id, a.span_id, a.session_id) for a in got.annotations] == [
        ("overall", 2, "reviewer-2", None, None, "conv-small")
    ]
    assert import_command(mlflow_tracking.url, "support-bot (session feedback)", tmp_path / "imported") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "on a whole conversation ('conv-small')" in err, err


@pytest.mark.parametrize("case", ["unreachable", "unknown experiment", "no traces"])
def test_the_command_says_what_is_wrong_with_the_server_in_one_line(mlflow_tracking, tmp_path, capsys, case):
    url, experiment, pattern = {
        "unreachable": (f"http://127.0.0.1:{_closed_port()}", "support-bot", r"cannot reach MLflow at http://127"),
        "unknown experiment": (mlflow_tracking.url, "support_bot", r"has no experiment 'support_bot' \(it has "),
        "no traces": (
            mlflow_tracking.url,
            "nothing traced (command)",
            r"'nothing traced \(command\)' .* has no traces",
        ),
    }[case]
    if case == "no traces":
        mlflow.MlflowClient(mlflow_tracking.url).create_experiment(experiment)
    out = tmp_path / "imported"
    began = time.monotonic()
    assert import_command(url, experiment, out) == 2
    assert time.monotonic() - began < 15  # the command's own start included
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("role-rubric import: error: "), err
    assert re.search(pattern, err) and " Fix: " in err, err
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.slow  # a second server, with authentication on (~20-60 s to start)
def test_a_server_with_authentication_is_read_with_mlflows_own_credentials(tmp_path, monkeypatch, capsys):
    """MLflow's basic-auth app: the chatbot logs as the admin (MLFLOW_TRACKING_USERNAME/PASSWORD), its client
    uploading each trace's spans as an artifact (what it does when the server refuses its span logging), and the
    import reads them, with the same variables, through the server's artifact proxy. A wrong password, or none,
    is one line; never shown. The server stopping in the middle of a read is one line too."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(mlflow_server(tmp_path / "server", auth=True))
        except ServerUnavailable as exc:
            pytest.skip(str(exc))
        user, password = server.admin
        credentials = {"MLFLOW_TRACKING_USERNAME": user, "MLFLOW_TRACKING_PASSWORD": password}
        out = tmp_path / "conversations.json"
        _run(
            "-m",
            "tests.traces.mlflow_chatbot",
            server.url,
            "secured",
            str(out),
            "--spans-as-artifacts",
            env=credentials,
        )
        expected = json.loads(out.read_text(encoding="utf-8"))
        for key, value in credentials.items():
            monkeypatch.setenv(key, value)
        client = mlflow.MlflowClient(server.url)
        stored = client.search_traces(
            locations=[client.get_experiment_by_name("secured").experiment_id], include_spans=False
        )
        assert stored and all(t.info.tags.get("mlflow.trace.spansLocation") != "TRACKING_STORE" for t in stored)
        assert import_command(server.url, "secured", tmp_path / "imported") == 0
        lines = (tmp_path / "imported" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
        records = {r["conversation_id"]: r for r in map(json.loads, lines)}
        assert_same_conversations(records, expected)
        assert [t["mlflow_trace_id"] for c in expected for t in c["turns"]] == [
            t["mlflow_trace_id"] for r in records.values() for t in r["turns"]
        ]
        capsys.readouterr()
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "not-the-Password-951")
        assert import_command(server.url, "secured", tmp_path / "wrong") == 2
        err = capsys.readouterr().err.strip()
        assert "refused the credentials for the experiment (HTTP 401)" in err and len(err.splitlines()) == 1, err
        assert "not-the-Password-951" not in err and password not in err
        monkeypatch.delenv("MLFLOW_TRACKING_USERNAME")
        monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD")
        assert import_command(server.url, "secured", tmp_path / "none") == 2
        assert "refused a request without credentials" in capsys.readouterr().err

        # the server goes away in the middle of a read: one line, after a few retries, not minutes
        for key, value in credentials.items():
            monkeypatch.setenv(key, value)
        reading = MlflowSource(server.url, "secured", page_size=1, timeout=5).spans()
        next(reading)
        stop(server.process)
        began = time.monotonic()
        with pytest.raises(InputError, match=r"reading the traces of .* failed \(connection refused\)\. Fix: "):
            list(reading)
        assert time.monotonic() - began < 30
