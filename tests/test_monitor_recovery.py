"""`monitor` after a run that stopped halfway (between windows.jsonl and state.json), and its bad inputs: a
rerun leaves every window once, as an uninterrupted run would have written them; a state.json that is not
JSON, or that records windows windows.jsonl lost, and settings out of range are one line and exit 2."""

from __future__ import annotations

import json

import pytest

import calibration.monitor.state as st
from calibration.cli import main
from tests.calibration.conftest import make_native_dataset
from tests.calibration.test_monitor import monitor, records, write_stream


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A small trained model (tests/calibration's tiny_model, made here: its fixtures are that folder's)."""
    data = make_native_dataset(tmp_path_factory.mktemp("synthetic"))
    out = tmp_path_factory.mktemp("tiny")
    train = ["train.ensemble=2", "train.pretrain_steps=30", "train.finetune_steps=30"]
    assert main(["train", f"data={data}", f"out={out}", *train]) == 0
    return out


def _crash_before_state(monkeypatch) -> None:
    """state.json's save fails as a killed process would leave it: not written."""

    def killed(out, state):
        raise KeyboardInterrupt

    monkeypatch.setattr(st, "save", killed)


def test_a_run_stopped_before_state_json_is_finished_by_the_next_without_duplicates(
    tiny, tmp_path, monkeypatch, capsys
):
    data = write_stream(tmp_path / "stream", [0, 1])
    out, clean = tmp_path / "mon", tmp_path / "clean"
    assert monitor(data, tiny, out) == 0
    write_stream(tmp_path / "stream", [0, 1, 2, 3])  # two more weeks
    with monkeypatch.context() as m:
        _crash_before_state(m)
        assert monitor(data, tiny, out) == 130
    # the crash left weeks 2 and 3 in windows.jsonl, and state.json still at week 1
    assert len(records(out)) == 4 and len(json.loads((out / "state.json").read_text())["windows"]) == 2
    with (out / "windows.jsonl").open("a") as f:
        f.write('{"window": "2026-02-02T00:00Z", "ro')  # and a last line cut short mid-write
    capsys.readouterr()
    assert monitor(data, tiny, out) == 0
    assert "2 windows in" in capsys.readouterr().err
    assert monitor(data, tiny, clean) == 0  # the same data, never interrupted
    assert records(out) == records(clean)
    assert records(out, "alarms.jsonl") == records(clean, "alarms.jsonl")
    assert (out / "windows.csv").read_text() == (clean / "windows.csv").read_text()
    assert monitor(data, tiny, out) == 0 and records(out) == records(clean)  # and again: nothing new


def test_a_state_json_whose_windows_jsonl_lost_records_is_one_line(tiny, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0, 1])
    out = tmp_path / "mon"
    assert monitor(data, tiny, out) == 0
    lines = (out / "windows.jsonl").read_text().splitlines()
    (out / "windows.jsonl").write_text(lines[0] + "\n")
    capsys.readouterr()
    assert monitor(data, tiny, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "windows.jsonl: 1 windows that state.json records" in err[0] and "Fix: " in err[0]
    assert (out / "windows.jsonl").read_text() == lines[0] + "\n"  # left as it was


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ('{"format": 1, "model": {"path"', "state.json: state.json is not a monitor's state"),
        ("[]", "state.json: state.json is not a monitor's state"),
    ],
)
def test_a_corrupt_state_json_is_one_line_and_kept(tiny, tmp_path, capsys, state, expected):
    data = write_stream(tmp_path / "stream", [0], per_week=4)
    out = tmp_path / "mon"
    out.mkdir()
    (out / "state.json").write_text(state)
    assert monitor(data, tiny, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0]
    assert (out / "state.json").read_text() == state and not (out / "windows.jsonl").exists()


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("alpha=0", "alpha=0"),
        ("alpha=1.5", "alpha=1.5"),
        ("horizon=0", "horizon=0"),
        ("horizon=-2", "horizon=-2"),
        ("reference=-1", "reference=-1"),
    ],
)
def test_settings_out_of_range_are_one_line(tiny, tmp_path, capsys, arg, expected):
    data = write_stream(tmp_path / "stream", [0], per_week=4)
    assert main(["monitor", f"data={data}", f"model={tiny}", f"out={tmp_path / 'mon'}", arg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and expected in err[0] and "internal error" not in err[0]
    assert not (tmp_path / "mon").exists()


@pytest.mark.parametrize(
    ("cut", "expected"),
    [
        (lambda text: text[:-30], r"conversations\.jsonl, row 24: malformed JSON"),
        (lambda text: text + "[1, 2]\n", r"conversations\.jsonl, row 25: a line must be a JSON object"),
    ],
)
def test_a_window_whose_conversations_jsonl_is_cut_or_not_conversations_is_one_line(
    tiny, tmp_path, capsys, cut, expected
):
    import re

    data = write_stream(tmp_path / "stream", [0])
    path = data / "conversations.jsonl"
    path.write_text(cut(path.read_text()))
    assert monitor(data, tiny, tmp_path / "mon") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(expected, err[0]) and "internal error" not in err[0]
    assert not (tmp_path / "mon").exists()
