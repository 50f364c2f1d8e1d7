"""`publish`'s progress and its bad inputs as a user meets them: a post shows how far it got (status lines when
stderr is not a terminal) and ends naming where the results went; a refused post is one line (the OTLP
exporter's own log line folded into it, not printed beside it); an estimate= that is not an estimate's output,
a token_env= naming an unset variable and an out= that cannot be written are one line and exit 2, with an
earlier output left as it was."""

from __future__ import annotations

import pytest

from calibration.cli import main
from tests.publish.test_otel import Collector


def test_a_post_shows_its_progress_and_ends_naming_where_the_results_went(scored_copy, monkeypatch, capsys):
    from calibration.connectors.otel import publish as otel

    monkeypatch.setattr(otel, "BATCH", 5)
    with Collector() as collector:
        args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"endpoint={collector.endpoint}"]
        assert main(args) == 0
        out = capsys.readouterr().out.strip().splitlines()
        assert main([*args, "progress=false"]) == 0  # everything is there: nothing sent, no progress
        quiet = capsys.readouterr().out.strip().splitlines()
    steps = [line for line in out if line.startswith("publish: ") and " events (" in line and "%)" in line]
    assert steps[0] == "publish: 5/24 events (20%)" and steps[-1] == "publish: 24/24 events (100%)"
    assert out[-1].startswith(f"publish: posted 24 gen_ai.evaluation.result events to {collector.endpoint}")
    assert "scores_published.json" in out[-1]
    assert not any("%)" in line for line in quiet) and "(24 already there)" in quiet[-1]


def test_a_refused_post_is_exactly_one_line(scored_copy, monkeypatch, capfd):
    """capfd: the exporter's logger would write to the process's stderr, which capsys does not see."""
    import socket

    from calibration.connectors.otel import publish as otel

    monkeypatch.setattr(otel, "BATCH", 5)
    with Collector(fail_after=1) as collector:
        args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"endpoint={collector.endpoint}"]
        assert main([*args, "timeout=2"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "did not accept the evaluations" in err[0] and "5 of 24 are there" in err[0] and "Fix: " in err[0]
    with socket.socket() as s:  # nothing listening: the exporter logs why, and that goes into the one line
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"endpoint=http://127.0.0.1:{port}/v1/logs"]
    assert main([*args, "timeout=1"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "(unreachable, or it refused them: Failed to export logs batch" in err[0], err[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"rate": {"ppi": ', r"estimate\.json, row 1: not JSON \(.*\): cut short"),
        ('{"folds": 5}', r"estimate\.json: not the estimate\.json that `role-rubric estimate` writes"),
        ("[1, 2]", r"estimate\.json: not the estimate\.json that `role-rubric estimate` writes"),
    ],
)
def test_an_estimate_that_is_not_an_estimates_output_is_one_line(tmp_path, capsys, text, expected):
    import re

    folder = tmp_path / "est"
    folder.mkdir()
    (folder / "estimate.json").write_text(text)
    before = tmp_path / "events.jsonl"
    before.write_text('{"resourceLogs": []}\n')  # an earlier publish's output
    assert main(["publish", "target=otel", f"estimate={folder}", f"out={before}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(expected, err[0]) and "Fix: pass estimate= the out= folder" in err[0]
    assert before.read_text() == '{"resourceLogs": []}\n'


def test_an_unwritable_out_leaves_nothing_and_is_one_line(scored_copy, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    args = ["publish", "target=otel", f"scores={scored_copy['scores']}", f"out={blocker / 'events.jsonl'}"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a folder" in err[0] and "Fix: " in err[0]
    assert blocker.read_text() == "x"


def test_a_token_env_naming_an_unset_variable_is_one_line_before_any_request(scored_copy, monkeypatch, capsys):
    monkeypatch.delenv("MY_PHOENIX_KEY", raising=False)
    args = ["publish", "target=phoenix", f"scores={scored_copy['scores']}", "url=http://127.0.0.1:9",
            "token_env=MY_PHOENIX_KEY"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "token_env=MY_PHOENIX_KEY names an environment variable that is not set" in err[0]
    assert "does not answer" not in err[0]  # refused before the server is asked
