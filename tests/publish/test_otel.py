"""publish target=otel: gen_ai.evaluation.result events as OTLP JSON and over OTLP/HTTP to a real local server
that decodes the protobuf requests."""

from __future__ import annotations

import base64
import json

import pandas as pd
import pytest

from calibration.cli import main
from rubric.conversations import load_conversations
from tests.loopback import LoopbackServer, QuietHandler

SECRET = "Bearer s3cret-token-do-not-print"


def attrs_of(record) -> dict:
    """OTLP JSON attributes -> {key: python value}."""
    out = {}
    for kv in record["attributes"]:
        ((kind, value),) = kv["value"].items()
        out[kv["key"]] = int(value) if kind == "intValue" else value
    return out


def records_of_file(path) -> list[dict]:
    return [
        r
        for line in path.read_text().splitlines()
        for rl in json.loads(line)["resourceLogs"]
        for sl in rl["scopeLogs"]
        for r in sl["logRecords"]
    ]


def spans_of(conversations) -> dict[tuple[str, int], tuple[str, str]]:
    return {
        (c.conversation_id, i): (t["trace_id"], t["span_id"])
        for c in load_conversations(conversations)
        for i, t in enumerate(c.record["turns"])
    }


def test_file_holds_one_event_per_turn_on_its_span_and_one_per_conversation(scored_copy, tmp_path):
    out = tmp_path / "evaluations.jsonl"
    assert main(["publish", "target=otel", f"scores={scored_copy['scores']}", f"out={out}"]) == 0
    records = records_of_file(out)
    turns = pd.read_csv(scored_copy["scores"].with_name("scores_turns.csv"), dtype={"conversation_id": str})
    convs = pd.read_csv(scored_copy["scores"], dtype={"conversation_id": str})
    spans = spans_of(scored_copy["conversations"])
    assert len(records) == len(turns) + len(convs)
    assert {r["eventName"] for r in records} == {"gen_ai.evaluation.result"}
    per_turn = {}
    for r in records:
        a = attrs_of(r)
        if a["gen_ai.evaluation.name"] == "role_rubric/adherence":
            per_turn[(a["gen_ai.conversation.id"], a["role_rubric.turn"])] = (r, a)
    assert len(per_turn) == len(turns)
    for row in turns.itertuples():
        record, a = per_turn[(row.conversation_id, row.turn)]
        assert (record["traceId"], record["spanId"]) == spans[(row.conversation_id, row.turn)]
        assert a["gen_ai.evaluation.score.value"] == pytest.approx(row.adherence)
        assert a["gen_ai.evaluation.score.label"] == ("adheres" if row.adheres else "violates")
        assert a["role_rubric.expected.overall"] == pytest.approx(row.expected_overall)
        assert (
            "\n" not in a["gen_ai.evaluation.explanation"]
            and f"{row.adherence:.3f}" in a["gen_ai.evaluation.explanation"]
        )
    sessions = {
        attrs_of(r)["gen_ai.conversation.id"]: r
        for r in records
        if attrs_of(r)["gen_ai.evaluation.name"] == "role_rubric/session_adherence"
    }
    for row in convs.itertuples():
        a = attrs_of(sessions[row.conversation_id])
        assert a["gen_ai.evaluation.score.value"] == pytest.approx(row.score)
        assert (sessions[row.conversation_id]["traceId"], sessions[row.conversation_id]["spanId"]) == spans[
            (row.conversation_id, 0)
        ]


def test_file_is_otlp_json_that_protobuf_reads_back_and_a_second_publish_writes_the_same_bytes(scored_copy, tmp_path):
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    out = tmp_path / "evaluations.jsonl"
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"out={out}"]
    assert main(args) == 0
    first = out.read_bytes()
    assert main(args) == 0
    assert out.read_bytes() == first
    for line in first.decode().splitlines():
        data = json.loads(line)
        for rl in data["resourceLogs"]:
            for sl in rl["scopeLogs"]:
                for r in sl["logRecords"]:  # OTLP JSON's hex ids back to protobuf's base64
                    r["traceId"] = base64.b64encode(bytes.fromhex(r["traceId"])).decode()
                    r["spanId"] = base64.b64encode(bytes.fromhex(r["spanId"])).decode()
        request = ParseDict(data, ExportLogsServiceRequest())
        assert request.resource_logs[0].scope_logs[0].log_records[0].event_name == "gen_ai.evaluation.result"
        assert len(request.resource_logs[0].scope_logs[0].log_records[0].trace_id) == 16


class Collector(LoopbackServer):
    """A tiny OTLP/HTTP logs receiver: decodes each protobuf request; `fail_after` requests, answers 400."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.records: list = []
        self.headers: list[dict] = []
        self.fail_after = fail_after
        collector = self

        class Handler(QuietHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
                    ExportLogsServiceRequest,
                    ExportLogsServiceResponse,
                )

                body = self.rfile.read(int(self.headers["Content-Length"]))
                collector.headers.append(dict(self.headers))
                if collector.fail_after is not None and len(collector.headers) > collector.fail_after:
                    self.send_response(400)
                    self.end_headers()
                    return
                request = ExportLogsServiceRequest.FromString(body)
                collector.records += [r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
                reply = ExportLogsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        super().__init__(Handler)
        self.endpoint = f"{self.url}/v1/logs"


def keys_of(records) -> list[tuple[str, object]]:
    out = []
    for r in records:
        a = {kv.key: kv.value for kv in r.attributes}
        turn = a["role_rubric.turn"].int_value if "role_rubric.turn" in a else "session"
        out.append((a["gen_ai.conversation.id"].string_value, turn))
    return out


def test_post_sends_every_event_once_with_the_headers_and_never_prints_them(scored_copy, monkeypatch, capsys):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"authorization={SECRET.replace(' ', '%20')}")
    with Collector() as collector:
        args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"endpoint={collector.endpoint}"]
        assert main(args) == 0
        assert main(args) == 0  # the second publish finds everything there and sends nothing
    turns = pd.read_csv(scored_copy["scores"].with_name("scores_turns.csv"), dtype={"conversation_id": str})
    convs = pd.read_csv(scored_copy["scores"])
    keys = keys_of(collector.records)
    assert len(keys) == len(set(keys)) == len(turns) + len(convs)
    assert len(collector.headers) == 1 and collector.headers[0]["authorization"] == SECRET
    spans = spans_of(scored_copy["conversations"])
    for r in collector.records:
        a = {kv.key: kv.value for kv in r.attributes}
        if "role_rubric.turn" in a:
            key = (a["gen_ai.conversation.id"].string_value, a["role_rubric.turn"].int_value)
            assert (r.trace_id.hex(), r.span_id.hex()) == spans[key]
    printed = capsys.readouterr()
    assert "s3cret" not in printed.out + printed.err
    assert "s3cret" not in scored_copy["scores"].with_name("scores_published.json").read_text()


def test_an_interrupted_post_is_one_line_and_resumes_without_duplicates(scored_copy, monkeypatch, capsys):
    from calibration.connectors.otel import publish as otel

    monkeypatch.setattr(otel, "BATCH", 5)
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", "timeout=2"]
    with Collector(fail_after=2) as collector:
        args.append(f"endpoint={collector.endpoint}")
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert "did not accept" in err[-1] and "10 of 24 are there" in err[-1] and "again: it resumes" in err[-1]
        sent_before = keys_of(collector.records)
        assert len(sent_before) == 10
        collector.fail_after = None  # the receiver is back
        assert main(args) == 0
    rest = keys_of(collector.records)[10:]
    assert len(rest) == 14 and not set(rest) & set(sent_before)


def test_an_unreachable_endpoint_is_one_line_naming_it_without_its_password(scored_copy, capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    endpoint = f"http://user:hunter22@127.0.0.1:{port}/v1/logs"
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"endpoint={endpoint}", "timeout=1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"127.0.0.1:{port}" in err.strip().splitlines()[-1] and "hunter22" not in err


def test_scores_of_another_model_than_the_one_named_are_one_line(scored_copy, tmp_path, capsys):
    import shutil

    from tests.publish.scored import write_labels

    data, other = tmp_path / "data", tmp_path / "other_model"
    shutil.copytree(scored_copy["data"], data)
    write_labels(data, seed=7)  # other reviewers' labels: another model
    train = ["train.ensemble=1", "train.pretrain_steps=10", "train.finetune_steps=10"]
    assert main(["train", f"data={data}", f"out={other}", *train]) == 0
    args = [
        "publish",
        "target=otel",
        f"scores={scored_copy['scores']}",
        f"model={other}",
        f"out={tmp_path / 'e.jsonl'}",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "another model" in err and "model=" in err and not (tmp_path / "e.jsonl").exists()


def test_conversations_not_imported_from_traces_are_one_line(scored_copy, tmp_path, capsys):
    plain = tmp_path / "plain.jsonl"
    records = [json.loads(line) for line in scored_copy["conversations"].read_text().splitlines()]
    for r in records:
        for t in r["turns"]:
            t.pop("trace_id"), t.pop("span_id")
    plain.write_text("".join(json.dumps(r) + "\n" for r in records))
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"conversations={plain}",
            f"out={tmp_path / 'e.jsonl'}"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no trace_id/span_id" in err and "import" in err


def test_an_estimate_is_the_release_rate_with_its_interval_in_no_trace(release_estimate, tmp_path):
    out = tmp_path / "release.jsonl"
    assert main(["publish", "target=otel", f"estimate={release_estimate}", f"out={out}"]) == 0
    result = json.loads((release_estimate / "estimate.json").read_text())
    records = records_of_file(out)
    assert len(records) == 1 + len(result["by_role"])
    assert all("traceId" not in r and "spanId" not in r for r in records)
    (overall,) = [attrs_of(r) for r in records if "role_rubric.role" not in attrs_of(r)]
    ppi = result["rate"]["ppi"]
    assert overall["gen_ai.evaluation.name"] == "role_rubric/release_adherence_rate"
    assert overall["gen_ai.evaluation.score.value"] == pytest.approx(ppi["estimate"])
    assert ppi["low"] < ppi["high"]  # a sample, not every conversation, is labelled: a real interval
    assert overall["role_rubric.interval.low"] == pytest.approx(ppi["low"])
    assert overall["role_rubric.interval.high"] == pytest.approx(ppi["high"])
    assert overall["role_rubric.interval.level"] == pytest.approx(1 - result["alpha"])
    assert overall["gen_ai.evaluation.score.ci.lower"] == pytest.approx(ppi["low"])
    assert overall["gen_ai.evaluation.score.ci.upper"] == pytest.approx(ppi["high"])
    assert overall["gen_ai.evaluation.score.ci.level"] == pytest.approx(1 - result["alpha"])
    assert overall["gen_ai.evaluation.score.label"] == "gate passed"
    assert overall["role_rubric.n_labelled_conversations"] == 6
