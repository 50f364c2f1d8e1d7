"""publish target=phoenix against a real `phoenix serve` fed OpenInference spans over OTLP: each turn's span
annotation, each session's, a second publish that replaces rather than adds, and the bad inputs."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from calibration.cli import main
from tests.publish.conftest import PROJECT

KEY = "phx-s3cret-api-key-value"


def client(url):
    from phoenix.client import Client

    return Client(base_url=url)


def span_annotations(run) -> list[dict]:
    convs = [json.loads(line) for line in run["conversations"].read_text().splitlines()]
    span_ids = [t["span_id"] for c in convs for t in c["turns"]]
    found = client(run["url"]).spans.get_span_annotations(span_ids=span_ids, project_identifier=PROJECT)
    return [a for a in found if a["name"] == "role_rubric/adherence"]


def session_annotations(run) -> list[dict]:
    from tests.traces.servers import PhoenixServer

    ids = pd.read_csv(run["scores"], dtype={"conversation_id": str})["conversation_id"]
    server = PhoenixServer(run["url"], "", None, None)
    query = "&".join(f"session_ids={sid}" for sid in ids)
    found = server.call("GET", f"/v1/projects/{PROJECT}/session_annotations?{query}&limit=1000")["data"]
    return [a for a in found if a["name"] == "role_rubric/session_adherence"]


def publish(run, *extra):
    return main(["publish", "target=phoenix", f"scores={run['scores']}", f"url={run['url']}", *extra])


def test_each_turn_and_session_is_annotated_once_and_a_second_publish_replaces_it(phoenix_scored, monkeypatch, capsys):
    run = phoenix_scored
    monkeypatch.setenv("PHOENIX_API_KEY", KEY)  # a server without authentication ignores it
    assert publish(run) == 0
    first = span_annotations(run)
    assert publish(run) == 0
    printed = capsys.readouterr()
    assert KEY not in printed.out + printed.err
    again = span_annotations(run)
    assert sorted(a["id"] for a in again) == sorted(a["id"] for a in first)  # replaced, not added
    turns = pd.read_csv(run["scores"].with_name("scores_turns.csv"), dtype={"conversation_id": str})
    convs = {
        json.loads(line)["conversation_id"]: json.loads(line) for line in run["conversations"].read_text().splitlines()
    }
    by_span = {a["span_id"]: a for a in again}
    assert len(by_span) == len(turns)
    checksum = json.loads((run["model"] / "model.json").read_text())["integrity"]["model_sha256"]
    for row in turns.itertuples():
        a = by_span[convs[row.conversation_id]["turns"][row.turn]["span_id"]]
        assert a["annotator_kind"] == "LLM" and a["identifier"] == "role-rubric"
        assert a["metadata"]["model_sha256"] == checksum
        assert a["result"]["score"] == pytest.approx(row.adherence)
        assert a["result"]["label"] == ("adheres" if row.adheres else "violates")
        assert a["metadata"]["expected_overall"] == f"{row.expected_overall:g}"
    sessions = session_annotations(run)
    scores = pd.read_csv(run["scores"], dtype={"conversation_id": str})
    assert len(sessions) == len(scores)
    by_session = {a["session_id"]: a for a in sessions}
    for row in scores.itertuples():
        assert by_session[row.conversation_id]["result"]["score"] == pytest.approx(row.score)
        assert by_session[row.conversation_id]["result"]["label"] == ("pass" if row.success else "fail")


def test_a_retrained_models_scores_replace_the_earlier_ones_one_per_turn(phoenix_scored, tmp_path):
    """Publishing a retrained model's scores leaves one role-rubric annotation per span and per session, the
    new model's (Phoenix keeps one per name, place and identifier; the identifier is the same for every
    model); publishing the first model again makes it the current one again."""
    from rubric.servers.fake import FakeOpenAI
    from tests.publish.scored import rescored_by_another_model

    run = phoenix_scored
    assert publish(run) == 0
    with FakeOpenAI() as server:
        again = rescored_by_another_model(run, tmp_path, server.base_url)
    first, second = (
        json.loads((m / "model.json").read_text())["integrity"]["model_sha256"] for m in (run["model"], again["model"])
    )
    assert first != second
    for scores, checksum in ((again["scores"], second), (run["scores"], first)):
        assert publish({**run, "scores": scores}) == 0
        spans, sessions = span_annotations(run), session_annotations(run)
        turns = pd.read_csv(scores.with_name("scores_turns.csv"))
        assert len(spans) == len({a["span_id"] for a in spans}) == len(turns)
        assert len(sessions) == len({a["session_id"] for a in sessions}) == len(pd.read_csv(scores))
        assert {a["metadata"]["model_sha256"] for a in spans + sessions} == {checksum}
        assert sorted(a["result"]["score"] for a in spans) == pytest.approx(sorted(turns["adherence"]))


def test_a_span_deleted_since_the_import_writes_nothing_of_its_batch(phoenix_scored, tmp_path, capsys):
    run = phoenix_scored
    lines = run["conversations"].read_text().splitlines()
    last = json.loads(lines[-1])
    last["turns"][0]["span_id"] = "00000000000000ab"
    moved = tmp_path / "conversations.jsonl"
    moved.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    before = {a["id"]: a["updated_at"] for a in span_annotations(run)}
    assert publish(run, f"conversations={moved}") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "00000000000000ab" in err and "not on" in err
    assert {a["id"]: a["updated_at"] for a in span_annotations(run)} == before


def test_an_unreachable_phoenix_is_one_line(phoenix_scored, capsys):
    from tests.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"
    assert main(["publish", "target=phoenix", f"scores={phoenix_scored['scores']}", f"url={url}", "timeout=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0] and "does not answer" in err[0]
