"""Bad inputs at the edges where role-rubric meets other programs (issue 35, items 5-7, 9 and 10): the judge
endpoint and the fake judge's port, Label Studio exports and tokens, spreadsheet cells, batch results files,
and `-` given as a path. Each ends in one line naming what is wrong (exit 2), or works as documented, and
never writes or echoes a secret.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import urllib.request
from pathlib import Path

import pytest

from calibration.cli import main

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "data" / "examples" / "tiny"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _gather_two(url: str, out: Path, *extra: str) -> list[str]:
    """`gather` of TINY's first two conversations by the fake judge at URL into OUT."""
    conversations = TINY / "conversations.jsonl"
    return [
        "gather",
        f"conversations={conversations}",
        "limit=2",
        "judge=fake",
        f"judge.base_url={url}",
        *extra,
        f"out={out}",
    ]


# the judge endpoint (item 9) ---------------------------------------------------------------------------------
def test_gather_against_an_address_where_nothing_listens_names_it(tmp_path, monkeypatch, capsys):
    from rubric.judge import backends

    monkeypatch.setattr(backends, "REFUSED_WAIT_S", 0.5)  # 10 s by default: a judge started just before
    url = f"http://127.0.0.1:{_free_port()}/v1"
    code = main(_gather_two(url, tmp_path / "g"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"connection refused at {url}: nothing listens there" in err and "Fix:" in err
    assert not (tmp_path / "g" / "llm.csv").exists() and not (tmp_path / "g" / "failures.csv").exists()


def test_the_fake_judge_refuses_a_taken_port_in_the_foreground(capsys):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for extra in ([], ["background=true"]):
            assert main(["serve-fake-judge", f"port={port}", *extra]) == 2
            err = capsys.readouterr().err
            assert f"cannot listen on 127.0.0.1:{port}" in err and "port=0" in err, err


def test_the_fake_judge_in_the_background_prints_its_url_and_serves(capsys):
    assert main(["serve-fake-judge", "port=0", "background=true"]) == 0
    captured = capsys.readouterr()
    url = captured.out.strip()
    pid = int(re.search(r"`kill (\d+)`", captured.err).group(1))
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url), captured.out
        body = b'{"model": "m", "messages": [{"role": "user", "content": "code (1, 2)"}], "max_tokens": 1}'
        request = urllib.request.Request(
            url + "/chat/completions", data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=30) as reply:
            assert reply.status == 200 and b"chat.completion" in reply.read()
    finally:
        os.kill(pid, signal.SIGTERM)


# smaller ones (item 10) -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv",
    [
        ["gather", "conversations=-", "judge=fake", "out=g"],
        ["gather", f"conversations={TINY / 'conversations.jsonl'}", "judge=fake", "out=-"],
        ["train", "data=-", "out=m"],
        ["train", f"data={TINY}", "out=-"],
        ["predict", "model=m", f"data={TINY}", "out=-"],
        ["score", "conversations=-", "calibrator=m", "judge=fake", "out=s.csv"],
    ],
)
def test_a_dash_for_a_path_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "=- : role-rubric does not" in err, err
    assert not any(tmp_path.iterdir())  # no file or folder named "-", nothing else either


@pytest.mark.parametrize("data", ["runs/tiny", "/tmp/my runs/it's $HOME", ["runs/a", "/tmp/b c/d,e", 'x"y']])
def test_the_printed_train_command_survives_the_shell_and_hydra(data):
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser

    from calibration.evaluation.cv_predictions import best_trainable

    command = best_trainable({"calibrated": 0.5}, data, target="over all")["command"]
    words = shlex.split(command)
    assert words[:2] == ["role-rubric", "train"] and words[-1] == "out=MODEL_DIR"
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(words[2:])}
    assert parsed["data"] == data and parsed["target"] == "over all"
    if data == "runs/tiny":
        assert command == "role-rubric train data=runs/tiny 'target=\"over all\"' out=MODEL_DIR"


def test_model_weights_get_the_mode_of_every_other_output(tmp_path):
    import torch

    from calibration.model.files import _write_model
    from calibration.model.record import ModelRecord
    from rubric.files import FILE_MODE

    _write_model(tmp_path / "m", {"w": torch.zeros(2)}, ModelRecord.model_construct())
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir()}
    assert modes == {"model.json": FILE_MODE, "weights.safetensors": FILE_MODE}


def test_score_against_a_judge_that_is_not_there_or_fails_names_it(tmp_path, monkeypatch, capsys):
    from rubric.judge import backends
    from rubric.servers.fake import FakeOpenAI

    monkeypatch.setattr(backends, "REFUSED_WAIT_S", 0.5)
    conversations = f"conversations={TINY / 'new.jsonl'}"
    url = f"http://127.0.0.1:{_free_port()}/v1"
    assert main(["score", conversations, "judge=fake", f"judge.base_url={url}", f"out={tmp_path / 's.csv'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"connection refused at {url}" in err, err
    with FakeOpenAI() as server:  # it answers, but every answer is an error: say which, there is no failures file
        server.fail_when = "role"
        assert (
            main(
                [
                    "score",
                    conversations,
                    "judge=fake",
                    f"judge.base_url={server.base_url}",
                    "judge.max_retries=0",
                    f"out={tmp_path / 's.csv'}",
                ]
            )
            == 2
        )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the judge answered no question" in err and "first: HTTP 500" in err, err
    assert not (tmp_path / "s.csv").exists()


def test_a_batch_gather_against_an_address_where_nothing_listens_names_it(tmp_path, capsys):
    import time

    url = f"http://127.0.0.1:{_free_port()}/v1"
    started = time.monotonic()
    code = main(_gather_two(url, tmp_path / "g", "mode=batch"))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"connection refused at {url}" in err, err
    assert time.monotonic() - started < 10
