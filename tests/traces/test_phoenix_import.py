"""Conversations and reviewers' labels from a real Phoenix server (`phoenix serve`, SQLite, a free port).

The test chatbot (chatbot.py) talks to the project's own OpenAI-protocol server under
openinference-instrumentation-openai, its spans sent to Phoenix over OTLP/HTTP (phoenix_feed.py, a process of
its own); reviewers then annotate through Phoenix's REST API (arize-phoenix-client): HUMAN span, trace and
session annotations from several reviewers, among LLM and CODE annotations and a note that are no labels.
The import gives back exactly the conversations the chatbot had and the HUMAN annotations, each reviewer apart.
Skipped with one reason where Phoenix is not installed (servers.py: ROLE_RUBRIC_PHOENIX).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from calibration.cli import main
from calibration.connectors.phoenix.source import PhoenixSource, PhoenixTraces
from calibration.connectors.phoenix.spans import otlp_attributes
from calibration.schema.source_keys import PhoenixKeys
from rubric.errors import InputError
from rubric.traces.assemble import TraceSelection, assemble
from tests.processes import free_port
from tests.traces.servers import ROOT

QUESTIONS = ("scope", "tone", "prohibited", "next_step", "overall")  # conf/rubric/role_adherence.yaml
LLM_CALLS = 9  # 3 + 2 user messages answered in one call each, 2 answered by the agent in two calls each
API_KEY = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJBcGlLZXk6MSJ9.dGVzdC1zaWduYXR1cmU"  # a Phoenix API key is a JWT: never shown


@dataclass
class Fed:
    """A project fed by the chatbot and annotated by reviewers: what an import must give back."""

    project: str
    conversations: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    human: set[tuple]
    """(name, value, reviewer, trace_id, span_id, session_id) of every HUMAN annotation posted."""


def _client(phoenix, key: str | None = None):
    client = pytest.importorskip("phoenix.client", reason="reviewers annotate with arize-phoenix-client ([phoenix])")
    return client.Client(base_url=phoenix.url, api_key=key or getattr(phoenix, "admin_key", None))


def _wait_for_spans(phoenix, project: str, count: int) -> None:
    """Phoenix inserts the spans it receives in batches, a moment later: wait until all of them are there."""
    client, deadline = _client(phoenix), time.monotonic() + 60
    while len(client.spans.get_spans(project_identifier=project, limit=1000)) < count:
        assert time.monotonic() < deadline, f"Phoenix has not stored the {count} spans sent to project {project}"
        time.sleep(0.3)


def _feed(phoenix, project: str, out: Path, *flags: str) -> dict[str, Any]:
    for module in ("openinference.instrumentation.openai", "opentelemetry.exporter.otlp.proto.http.trace_exporter"):
        pytest.importorskip(module, reason="the chatbot is traced with the [dev] and [otel] extras' packages")
    done = subprocess.run(
        [sys.executable, "-m", "tests.traces.phoenix_feed", phoenix.otlp_endpoint, project, str(out), *flags],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def _annotate(phoenix, calls: list[dict[str, Any]]) -> set[tuple]:
    """Reviewers' answers on the reply spans, a trace and a session, beside an LLM judge's, a CODE check's and
    a note: returns the HUMAN ones as the import must give them."""
    client = _client(phoenix)
    replies = {c["span_id"]: c for c in calls if c["reply"]}  # the agent's tool-calling calls write no reply
    human: set[tuple] = set()

    def span(span_id: str, name: str, reviewer: str | None, *, score=None, label=None, kind="HUMAN") -> None:
        client.spans.add_span_annotation(
            span_id=span_id,
            annotation_name=name,
            annotator_kind=kind,
            score=score,
            label=label,
            identifier=reviewer,
            sync=True,
        )
        if kind == "HUMAN":
            value = score if score is not None else label
            human.add((name, value, reviewer or "phoenix-api", replies[span_id]["trace_id"], span_id, None))

    for n, (span_id, call) in enumerate(replies.items()):
        span(span_id, "scope", "rev-ana", score=4)
        span(span_id, "tone", "rev-ana", score=1 + n % 4)
        span(span_id, "scope", "judge-gpt", score=1, kind="LLM")  # an LLM judge's: not a label
        span(span_id, "tone", "tone-regex", score=2, kind="CODE")  # a program's: not a label
        if call["session_id"] == "conv-shop-1":
            span(span_id, "scope", "rev-bo", label="3")  # a label without a score: the label is the answer
    tutor = [s for s, c in replies.items() if c["session_id"] == "conv-tutor-1"]
    span(tutor[0], "overall", None, score=2)  # no identifier, no user: the reviewer is the source
    client.spans.add_span_note(span_id=tutor[1], note="check this one again")  # a note: not a label

    agent_trace = next(c["trace_id"] for c in calls if c["session_id"] == "conv-shop-agent" and c["reply"])
    client.traces.add_trace_annotation(
        trace_id=agent_trace, annotation_name="overall", annotator_kind="HUMAN", score=4, identifier="rev-cy", sync=True
    )
    human.add(("overall", 4, "rev-cy", agent_trace, None, None))
    # on a whole conversation: read, but no label (the rubric's questions are asked of each reply)
    for kind, reviewer, label in (("HUMAN", "rev-ana", "yes"), ("LLM", "judge-gpt", "no")):
        client.sessions.add_session_annotation(
            session_id="conv-tutor-1",
            annotation_name="resolved",
            annotator_kind=kind,
            label=label,
            identifier=reviewer,
            sync=True,
        )
    human.add(("resolved", "yes", "rev-ana", None, None, "conv-tutor-1"))
    return human


@pytest.fixture(scope="module")
def fed(phoenix, tmp_path_factory) -> Fed:
    project = "support-bot"
    sent = _feed(phoenix, project, tmp_path_factory.mktemp("phoenix_feed") / "sent.json")
    assert len(sent["calls"]) == LLM_CALLS
    _wait_for_spans(phoenix, project, LLM_CALLS)
    return Fed(project, sent["conversations"], sent["calls"], _annotate(phoenix, sent["calls"]))


def _tool_steps(steps: list[dict[str, Any]]) -> list[tuple]:
    """Tool steps compared by what the judge sees: role, text, and the calls' names and parsed arguments."""
    out = []
    for step in steps:
        calls = [c.get("function", c) for c in step.get("tool_calls") or ()]
        out.append(
            (
                step["role"],
                step.get("content") or "",
                tuple((c["name"], json.dumps(json.loads(c["arguments"]), sort_keys=True)) for c in calls),
            )
        )
    return out


def _expected(fed: Fed) -> list[dict[str, Any]]:
    """The chatbot's conversations with each turn's ids: the LLM call that wrote the reply."""
    by_reply = {(c["session_id"], c["reply"]): c for c in fed.calls if c["reply"]}
    records = []
    for conv in fed.conversations:
        turns = []
        for turn in conv["turns"]:
            call = by_reply[(conv["conversation_id"], turn["assistant"])]
            turns.append({**turn, "trace_id": call["trace_id"], "span_id": call["span_id"]})
        records.append({**conv, "turns": turns})
    return records


def _assert_same_conversations(got: list[dict[str, Any]], expected: list[dict[str, Any]]) -> None:
    """Roles, turns in order, text, each reply's trace and span ids, the tool steps: exactly."""
    assert sorted(r["conversation_id"] for r in got) == sorted(r["conversation_id"] for r in expected)
    for want in expected:
        have = next(r for r in got if r["conversation_id"] == want["conversation_id"])
        assert have["chatbot_role"] == want["chatbot_role"]
        assert [(t["user"], t["assistant"]) for t in have["turns"]] == [
            (t["user"], t["assistant"]) for t in want["turns"]
        ]
        assert [(t["trace_id"], t["span_id"]) for t in have["turns"]] == [
            (t["trace_id"], t["span_id"]) for t in want["turns"]
        ]
        assert [_tool_steps(t.get("tools", [])) for t in have["turns"]] == [
            _tool_steps(t.get("tools", [])) for t in want["turns"]
        ]
        assert have["started_at"].endswith("Z")


def _expected_labels(fed: Fed) -> set[tuple[str, ...]]:
    """labels.csv rows of the HUMAN annotations named like a question (on a span or on a one-turn trace)."""
    turns = [(r["conversation_id"], str(i), t) for r in _expected(fed) for i, t in enumerate(r["turns"])]
    of_span = {t["span_id"]: (cid, i) for cid, i, t in turns}
    of_trace = {t["trace_id"]: (cid, i) for cid, i, t in turns}
    rows = set()
    for name, value, reviewer, trace_id, span_id, _session in fed.human:
        if name in QUESTIONS:
            cid, turn = of_span[span_id] if span_id else of_trace[trace_id]
            rows.add((cid, turn, reviewer, name, str(int(float(value)))))
    return rows


def test_conversations_come_back_exactly(phoenix, fed):
    source = PhoenixSource(phoenix.url, fed.project)
    spans = list(source.spans())
    assert len(spans) == LLM_CALLS
    assert all(s.attributes["openinference.span.kind"] == "LLM" for s in spans)  # put back where Phoenix took it
    assert {s.attributes["session.id"] for s in spans} == {c["conversation_id"] for c in fed.conversations}
    assert all(s.start_ns <= t.start_ns for s, t in zip(spans, spans[1:], strict=False))  # oldest first
    got = assemble(spans, TraceSelection(), source={"kind": "phoenix"}, description=source.description).records
    _assert_same_conversations(got, _expected(fed))


def test_a_responses_api_chatbot_comes_back_exactly(phoenix, tmp_path):
    """The chatbot on the OpenAI Responses API (instructions, only the new input after previous_response_id),
    traced by OpenInference into Phoenix: roles, turns, tool steps and reply ids as the chatbot had them."""
    project = "support-bot-responses"
    sent = _feed(phoenix, project, tmp_path / "sent.json", "--api", "responses")
    assert len(sent["calls"]) == LLM_CALLS
    _wait_for_spans(phoenix, project, LLM_CALLS)
    source = PhoenixSource(phoenix.url, project)
    got = assemble(source.spans(), TraceSelection(), source={"kind": "phoenix"}, description=source.description)
    fed = Fed(project, sent["conversations"], sent["calls"], set())
    _assert_same_conversations(got.records, _expected(fed))


def test_human_annotations_come_back_each_reviewer_apart(phoenix, fed):
    source = PhoenixSource(phoenix.url, fed.project)
    got = {(a.name, a.value, a.reviewer, a.trace_id, a.span_id, a.session_id) for a in source.annotations()}
    assert got == fed.human
    assert {a[2] for a in got} == {"rev-ana", "rev-bo", "rev-cy", "phoenix-api"}  # no LLM judge, no program
    assert len(list(source.annotations())) == len(fed.human)  # read once: asking again gives the same


def test_page_by_page_the_same(phoenix, fed):
    """Pages of 2 (spans, and annotations of a page's spans, traces and sessions): the same as in one page."""
    whole, paged = PhoenixSource(phoenix.url, fed.project), PhoenixSource(phoenix.url, fed.project, page_size=2)
    assert [s.span_id for s in paged.spans()] == [s.span_id for s in whole.spans()]
    assert sorted(map(repr, paged.annotations())) == sorted(map(repr, whole.annotations()))


def test_a_phoenix_with_authentication(phoenix_with_auth, tmp_path, monkeypatch):
    server = phoenix_with_auth
    ana = server.user_key("ana")  # a reviewer with an account: what she annotates carries her user
    monkeypatch.setenv("PHOENIX_API_KEY", server.admin_key)  # the chatbot sends its spans with a key
    sent = _feed(server, "secured", tmp_path / "sent.json")
    _wait_for_spans(server, "secured", LLM_CALLS)
    reply = next(c for c in sent["calls"] if c["reply"])
    _client(server, ana).spans.add_span_annotation(
        span_id=reply["span_id"], annotation_name="scope", score=2, sync=True
    )
    expected = {("scope", 2, "ana", reply["trace_id"], reply["span_id"], None)}

    def imported() -> set[tuple]:
        source = PhoenixSource(server.url, "secured")
        assert len(list(source.spans())) == LLM_CALLS
        return {(a.name, a.value, a.reviewer, a.trace_id, a.span_id, a.session_id) for a in source.annotations()}

    assert imported() == expected  # the admin's key: the reviewer is her user name

    monkeypatch.setenv("PHOENIX_API_KEY", ana)  # her own key reads the project, but may not list the users
    with pytest.warns(UserWarning, match="phoenix-user-N: listing Phoenix's users .* needs an admin's API key"):
        assert {a[2] for a in imported()} == {"phoenix-user-3"}  # users 1 and 2: Phoenix's admin and system

    monkeypatch.delenv("PHOENIX_API_KEY")
    with pytest.raises(InputError, match=rf"Phoenix at {server.url} refused a request without an API key .*HTTP 401"):
        PhoenixSource(server.url, "secured")
    wrong = ana[:-6] + "xxxxxx"
    monkeypatch.setenv("READER_KEY", wrong)
    with pytest.raises(InputError) as caught:
        PhoenixSource(server.url, "secured", token_env="READER_KEY")
    message = str(caught.value)
    assert "refused the API key" in message and "READER_KEY" in message
    assert wrong not in message and ana not in message and server.admin_key not in message


def test_the_import_command(phoenix, fed, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)  # sent (this Phoenix has no authentication), never written
    out = tmp_path / "imported"
    assert main(["import", "source=phoenix", f"url={phoenix.url}", f"project={fed.project}", f"out={out}"]) == 0
    printed = capsys.readouterr()
    records = [json.loads(line) for line in (out / "conversations.jsonl").read_text().splitlines()]
    _assert_same_conversations(records, _expected(fed))
    assert all(r["source"] == {"kind": "phoenix", "url": phoenix.url, "project": fed.project} for r in records)
    labels = pd.read_csv(out / "labels.csv", dtype=str, keep_default_na=False)
    assert set(map(tuple, labels[["conversation_id", "turn", "judge_id", "question_id", "answer"]].to_numpy())) == (
        _expected_labels(fed)
    )
    assert set(labels["judge_id"]) == {"rev-ana", "rev-bo", "rev-cy", "phoenix-api"}  # each reviewer apart
    assert str(out) in printed.out + printed.err  # says where it wrote
    assert API_KEY not in printed.out + printed.err
    for path in out.rglob("*"):
        assert API_KEY.encode() not in path.read_bytes(), f"the API key was written into {path}"


def test_an_answer_outside_the_options_is_refused(phoenix, tmp_path, capsys):
    project = "support-bot-bad-answer"
    sent = _feed(phoenix, project, tmp_path / "sent.json")
    _wait_for_spans(phoenix, project, LLM_CALLS)
    reply = next(c for c in sent["calls"] if c["reply"])
    client = _client(phoenix)
    client.spans.add_span_annotation(span_id=reply["span_id"], annotation_name="scope", score=4, identifier="rev-ana")
    client.spans.add_span_annotation(
        span_id=reply["span_id"], annotation_name="tone", score=7, identifier="rev-ana", sync=True
    )
    out = tmp_path / "imported"
    assert main(["import", "source=phoenix", f"url={phoenix.url}", f"project={project}", f"out={out}"]) == 2
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and "7" in error and "'tone'" in error and "rev-ana" in error and "1, 2, 3 or 4" in error
    assert not out.exists() or not any(out.iterdir())  # nothing half-written


REFUSED = {
    "unreachable": "cannot reach Phoenix at",
    "unknown project": "has no project 'nope' (it has ",
    "no spans": "Phoenix project 'no-spans-yet' at {url} has no spans",
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_the_command_refuses_in_one_line(phoenix, case, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)
    url, project = phoenix.url, {"unknown project": "nope", "no spans": "no-spans-yet"}.get(case, "support-bot")
    if case == "unreachable":
        url = f"http://127.0.0.1:{free_port()}"
    if case == "no spans":
        _client(phoenix).projects.create(name=project)
    out = tmp_path / "imported"
    started = time.monotonic()
    assert main(["import", "source=phoenix", f"url={url}", f"project={project}", f"out={out}"]) == 2
    assert time.monotonic() - started < 10
    error = capsys.readouterr().err.strip()
    assert "\n" not in error and url in error and API_KEY not in error
    assert REFUSED[case].format(url=url) in error
    assert not out.exists() or not any(out.iterdir())


def test_unknown_project_lists_those_that_exist(phoenix, fed):
    with pytest.raises(
        InputError, match=rf"Phoenix at {phoenix.url} has no project 'support-bott' \(it has .*'support-bot'"
    ):
        PhoenixSource(phoenix.url, "support-bott")


def test_a_project_without_spans_is_one_line(phoenix):
    _client(phoenix).projects.create(name="empty-project")
    source = PhoenixSource(phoenix.url + "/", "empty-project")  # a trailing slash (or /v1) is taken as well
    with pytest.raises(InputError, match="Phoenix project 'empty-project' at .* has no spans"):
        list(source.spans())


def test_an_unreachable_server_is_one_line_within_seconds(monkeypatch):
    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(InputError) as caught:
        PhoenixSource(url, "support-bot")
    assert time.monotonic() - started < 5
    message = str(caught.value)
    assert f"cannot reach Phoenix at {url}" in message and "\n" not in message
    assert API_KEY not in message


def test_the_api_key_comes_from_the_environment(monkeypatch, tmp_path):
    def importing(**keys):
        settings = PhoenixKeys(url="http://127.0.0.1:1", project="p", timeout=5, **keys)
        return PhoenixTraces(settings).import_into(tmp_path / "out", progress=False)

    monkeypatch.setenv("PHOENIX_API_KEY", API_KEY)
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    with pytest.raises(InputError, match="cannot reach Phoenix"):  # the default: Phoenix's own variable
        importing()
    with pytest.raises(InputError, match="token_env=MY_PHOENIX_KEY names an environment variable that is not set"):
        importing(token_env="MY_PHOENIX_KEY")  # named on purpose: must be set
    with pytest.raises(InputError, match="token_env=LABEL_STUDIO_API_KEY names an environment variable that is not"):
        importing(token_env="LABEL_STUDIO_API_KEY")  # Label Studio's variable, named on purpose: honoured as given
    with pytest.raises(InputError) as caught:
        importing(token_env=API_KEY)  # the key itself where its variable's name belongs: never echoed
    assert "looks like the API key itself" in str(caught.value) and API_KEY not in str(caught.value)


def test_attributes_phoenix_parsed_are_json_text_again():
    flat = {
        "llm.input_messages.0.message.content": "hi",
        "metadata.user.id": "u7",
        "metadata.tags.0.name": "vip",
        "metadata.tags.1.name": "new",
        "llm.prompt_template.variables.city": "Leeds",
        "retrieval.documents.0.document.metadata.source": "faq",
        "session.id": "c1",
    }
    got = otlp_attributes(flat)
    assert list(got) == [
        "llm.input_messages.0.message.content",
        "metadata",
        "llm.prompt_template.variables",
        "retrieval.documents.0.document.metadata",
        "session.id",
    ]
    assert json.loads(got["metadata"]) == {"user": {"id": "u7"}, "tags": [{"name": "vip"}, {"name": "new"}]}
    assert json.loads(got["llm.prompt_template.variables"]) == {"city": "Leeds"}
    assert json.loads(got["retrieval.documents.0.document.metadata"]) == {"source": "faq"}
    assert otlp_attributes({"metadatas": 1, "x.metadata_version": 2}) == {"metadatas": 1, "x.metadata_version": 2}
