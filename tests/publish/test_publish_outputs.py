"""What publish reads and writes, checked before anything is sent: its out= never replaces the scores it
publishes or a file it did not write (calibration/schema/paths.py), the two score tables are joined by
conversation and turn and refused naming the row that does not line up, the conversations file must be the
one `score` read (its checksum), and a server that answers with something other than JSON is one line naming
it."""

from __future__ import annotations

import json
from pathlib import Path

from calibration.cli import main
from tests.loopback import LoopbackServer, QuietHandler


def _refused(capsys, path, before: bytes) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert path.read_bytes() == before
    return err[0]


def test_publish_never_writes_over_the_scores_it_publishes(scored_copy, capsys):
    """The issue's case: out= naming the scores being published replaced them with OTLP events (exit 0)."""
    scores = scored_copy["scores"]
    before = scores.read_bytes()
    for extra in ([], ["overwrite=true"]):  # an input is never replaced, overwrite or not
        assert main(["publish", "target=otel", f"scores={scores}", f"out={scores}", *extra]) == 2
        assert "out= would overwrite scores.csv, one of this command's own inputs" in _refused(capsys, scores, before)
    turns = scores.with_name("scores_turns.csv")  # read beside it, not an out= of publish
    assert main(["publish", "target=otel", f"scores={scores}", f"out={turns}"]) == 2
    assert "would replace scores_turns.csv" in _refused(capsys, turns, turns.read_bytes())


def test_publish_replaces_its_own_output_and_with_overwrite_any_file(scored_copy, tmp_path):
    scores, out = scored_copy["scores"], tmp_path / "events.jsonl"
    assert main(["publish", "target=otel", f"scores={scores}", f"out={out}"]) == 0
    first = out.read_bytes()
    assert main(["publish", "target=otel", f"scores={scores}", f"out={out}"]) == 0  # a rerun: its own file
    assert out.read_bytes() == first
    other = tmp_path / "notes.txt"
    other.write_text("mine\n")
    assert main(["publish", "target=otel", f"scores={scores}", f"out={other}", "overwrite=true"]) == 0
    assert other.read_bytes() == first and "resourceLogs" in json.loads(first.splitlines()[0])


def test_score_tables_that_do_not_line_up_are_refused_naming_the_row(scored_copy, tmp_path, capsys):
    """The issue's case: a _turns.csv short of a row published the rest ("54 turns" of 55)."""
    import pandas as pd

    scores = scored_copy["scores"]
    turns_file = scores.with_name("scores_turns.csv")
    whole = pd.read_csv(turns_file, dtype={"conversation_id": str})
    out = tmp_path / "events.jsonl"
    args = ["publish", "target=otel", f"scores={scores}", f"out={out}"]
    cid = whole["conversation_id"].iloc[-1]
    cases = {
        "short of a row": (whole.iloc[:-1], f"conversation '{cid}' has {(whole['conversation_id'] == cid).sum() - 1} "),
        "a row twice": (pd.concat([whole, whole.iloc[[3]]]), f"scores_turns.csv, row {len(whole) + 1}: turn "),
        "another conversation": (
            pd.concat([whole, whole.iloc[[0]].assign(conversation_id="stray")]),
            f"scores_turns.csv, row {len(whole) + 1}: conversation 'stray' is not in scores.csv",
        ),
    }
    for frame, said in cases.values():
        frame.to_csv(turns_file, index=False)
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and "nothing was published" in err[0], err
        assert not out.exists()
    whole.to_csv(turns_file, index=False)
    assert main(args) == 0  # the same table whole again: published


def test_conversations_changed_since_score_are_refused(scored_copy, tmp_path, capsys):
    """score records the checksum of the conversations' text; publish puts values on their turns' spans: the same
    conversations in another order are fine, an edited reply is refused."""
    scores = scored_copy["scores"]
    made = json.loads(scores.with_name("scores_shift.json").read_text())["scored_with"]
    edited = tmp_path / "conversations.jsonl"
    records = [json.loads(line) for line in Path(made["conversations"]).read_text().splitlines()]
    edited.write_text("".join(json.dumps(r) + "\n" for r in reversed(records)))  # another order: the same text
    args = ["publish", "target=otel", f"scores={scores}", f"conversations={edited}", f"out={tmp_path / 'e.jsonl'}"]
    assert main(args) == 0
    records[0]["turns"][0]["assistant"] += " (edited)"  # the reply scored is no longer this one
    edited.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "these conversations changed since `score` read them" in err and str(edited) in err


class TextServer(LoopbackServer):
    """A real HTTP server that answers every request 200 with text (a proxy's page, another service)."""

    def __init__(self) -> None:
        class Handler(QuietHandler):
            def _answer(self):  # the body read, then "OK" as text, whatever was asked
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"OK")

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815 (http.server's names)

        super().__init__(Handler)


def test_a_server_answering_text_is_one_line_naming_it(scored_copy, capsys):
    """The issue's case: 200 with text where JSON goes was exit 70 (JSONDecodeError)."""
    import pytest

    with TextServer() as server:
        for target, key, said, path in (
            ("mlflow", "tracking_uri", "answered with something that is not JSON", ""),
            ("phoenix", "url", "does not answer as a Phoenix server does", ""),
            ("otel", "endpoint", "answered with text (text/plain), not as an OTLP collector does", "/v1/logs"),
        ):
            pytest.importorskip({"otel": "opentelemetry"}.get(target, target))
            args = ["publish", f"target={target}", f"scores={scored_copy['scores']}", f"{key}={server.url}{path}"]
            assert main([*args, "timeout=5"]) == 2, target
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1, err
            assert f"the server at {server.url}{path} {said}" in err[0], err
            assert f"Fix: check {key}=" in err[0]


def test_credentials_in_the_mlflow_address_are_refused_with_the_variables_to_use(scored_copy, capsys):
    args = ["publish", "target=mlflow", f"scores={scored_copy['scores']}", "tracking_uri=http://me:s3cret@127.0.0.1:9"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "carries a user name or password" in err and "s3cret" not in err
    assert (
        "export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in err
        and "tracking_uri=http://127.0.0.1:9" in err
    )


def test_each_command_replaces_its_own_earlier_output(scored_copy, tmp_path):
    """The other side of the rule: a rerun into the same out= (score's three files, predict's two, evaluate's
    metrics.json) is its own output, replaced without overwrite=true."""
    from rubric.servers.fake import FakeOpenAI

    run = scored_copy
    with FakeOpenAI() as server:
        score = ["score", f"conversations={run['conversations']}", f"calibrator={run['model']}", f"out={run['scores']}",
                 "judge=fake", f"judge.base_url={server.base_url}", "progress=false"]  # fmt: skip
        assert main(score) == 0
    predictions, metrics = tmp_path / "p.csv", tmp_path / "m.json"
    predict = ["predict", f"model={run['model']}", f"data={run['data']}", f"out={predictions}"]
    evaluate = ["evaluate", f"predictions={predictions}", f"data={run['data']}", f"out={metrics}"]
    for command in (predict, predict, evaluate, evaluate):
        assert main(command) == 0
    assert predictions.with_name("p_shift.json").exists() and "rmse" in json.loads(metrics.read_text())
