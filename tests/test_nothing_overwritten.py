"""A file a command writes never replaces one of its inputs, nor an existing file it did not write, unless
overwrite=true (calibration/schema/paths.py, one rule for every command that writes files): checked before
anything is read or sent, one line, exit 2, the file left as it was."""

from __future__ import annotations

import dataclasses
import json

import pytest

from calibration.cli import main
from calibration.schema.paths import INPUT_KEYS, OWN_FILES, written_files
from calibration.schema.store import SCHEMAS, flat_settings

UNRELATED = "conversation_id,turn,judge_id,question_id,answer\nc1,0,J1,overall,3\n"  # someone's labels


def _refused(capsys, path, before: bytes) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert path.read_bytes() == before
    return err[0]


@pytest.mark.parametrize(
    ("command", "args", "name"),
    [
        ("predict", ["model=nowhere", "data=nowhere"], "mine.csv"),
        ("evaluate", ["predictions=nowhere.csv", "data=nowhere"], "mine.json"),
        ("score", ["conversations=nowhere.jsonl"], "mine.csv"),
        ("publish", ["target=otel", "estimate=nowhere"], "mine.jsonl"),
    ],
)
def test_an_existing_file_the_command_did_not_write_is_kept(tmp_path, capsys, command, args, name):
    out = tmp_path / name
    out.write_text(UNRELATED)
    assert main([command, *args, f"out={out}"]) == 2
    line = _refused(capsys, out, UNRELATED.encode())
    assert f"out= would replace {name}, an existing file this command did not write; it is kept." in line
    assert "Fix: choose another out=, or pass overwrite=true to replace it." in line


def test_files_written_beside_out_are_kept_too(tmp_path, capsys):
    """predict writes OUT_shift.json beside out=; score its turns table: someone's file there is kept."""
    (tmp_path / "p_shift.json").write_text('{"mine": 1}')
    assert main(["predict", "model=nowhere", "data=nowhere", f"out={tmp_path / 'p.csv'}"]) == 2
    assert "would replace p_shift.json (written beside out=)" in _refused(
        capsys, tmp_path / "p_shift.json", b'{"mine": 1}'
    )
    (tmp_path / "s_turns.csv").write_text(UNRELATED)
    assert main(["score", "conversations=nowhere.jsonl", f"out={tmp_path / 's.csv'}"]) == 2
    assert "turns_out= would replace s_turns.csv" in _refused(capsys, tmp_path / "s_turns.csv", UNRELATED.encode())


def test_every_path_key_is_an_input_or_an_output():
    """A new key that names a file the command reads must join INPUT_KEYS, or its outputs could replace it."""
    outputs = {"out", "turns_out", "cache"}  # written (the cache: read and written by the command itself)
    for command, schema in SCHEMAS.items():
        for key, field in flat_settings(schema):
            if field.metadata["rule"].type.startswith("path") and key not in outputs:
                assert key in INPUT_KEYS, (command, key)


def test_each_file_output_is_told_from_files_it_did_not_write(tmp_path):
    """The recognisers: each command's own earlier output is its own; someone's table is not."""
    foreign = tmp_path / "x"
    foreign.write_text(UNRELATED)
    for command, own in OWN_FILES.items():
        assert not own(foreign), command
    events = tmp_path / "events.jsonl"  # publish's lines are batches of events: megabytes each
    events.write_text(json.dumps({"resourceLogs": [{"x": "y" * 200_000}]}) + "\n")
    assert OWN_FILES["publish"](events)
    assert [key for key, _, _ in written_files("score", {"out": "s.csv", "calibrator": "m"})] == [
        "out",
        "out",
        "turns_out",
    ]
    assert dataclasses.is_dataclass(SCHEMAS["publish"])


def test_a_folder_output_never_replaces_what_it_reads_in_an_input_folder(tmp_path, capsys):
    """report cv=DIR out=DIR would replace the cv's metrics.json, which it reads for the cv's settings."""
    cv = tmp_path / "cv"
    cv.mkdir()
    (cv / "predictions.csv").write_text("conversation_id\n")
    (cv / "metrics.json").write_text('{"settings": {}}')
    assert main(["report", "data=nowhere", f"cv={cv}", f"out={cv}"]) == 2
    line = _refused(capsys, cv / "metrics.json", b'{"settings": {}}')
    assert "out= would overwrite metrics.json, one of this command's own inputs" in line
