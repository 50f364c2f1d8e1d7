"""`monitor` on the first run (no window closed yet), the open window, and a judge change told apart from a
chatbot change: the judge behind each window and the canary (issue 58)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.cli import main
from tests.calibration.test_monitor import records, write_stream

IDENTITY = {
    "backend": "chat",
    "model": "judge-v1",
    "base_url_host": "127.0.0.1",
    "prompt_template": "abc123",
    "rubric": "r1",
    "answer_mode": "distribution/auto",
}


def _judged_by(folder: Path, **change) -> Path:
    (folder / "gather_summary.json").write_text(json.dumps({"judge_identity": {**IDENTITY, **change}}))
    return folder


def test_the_first_run_with_no_closed_window_saves_its_state_and_says_when_one_closes(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0], per_week=10)
    out = tmp_path / "mon"
    code = main(["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", "until=2026-01-08T12:00:00Z"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "no window is complete yet" in printed and "closes at 2026-01-13T00:00:00+00:00" in printed
    assert (out / "state.json").is_file() and records(out) == []
    provisional = json.loads((out / "provisional.json").read_text())
    assert provisional["note"].startswith("provisional") and 0 < provisional["conversations"] <= 10
    assert "is open until" in printed and "never tested" in printed
    # a week later the window has closed: it is monitored, once
    assert main(["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", "until=2026-01-14T00:00:00Z"]) == 0
    assert [w["window"] for w in records(out)] == ["2026-01-06T00:00Z"]


def test_a_new_judge_is_its_own_alarm_and_holds_the_rate_checks(tiny_model, tmp_path, capsys):
    weeks = [_judged_by(write_stream(tmp_path / f"week-{i}", [i], per_week=30, seed=i)) for i in range(4)]
    _judged_by(weeks[3], model="judge-v2")  # the provider's new version behind the dashboard
    out = tmp_path / "mon"
    args = ["monitor", f"model={tiny_model}", f"out={out}", "window=directory", "allow_judge_mismatch=true"]
    args += ["drop=0.05", "reference=2", "shift=false"]
    assert main([*args, f"data=[{weeks[0]},{weeks[1]},{weeks[2]}]"]) == 0
    assert main([*args, f"data=[{weeks[0]},{weeks[1]},{weeks[2]},{weeks[3]}]"]) == 1
    err = capsys.readouterr().err
    assert "gathered by another judge" in err and "model: 'judge-v1' -> 'judge-v2'" in err
    last = records(out)[-1]
    assert last["judge"]["held"] and "held" in last["note"]
    assert all(c["check"] != "drop" for r in last["rows"].values() for c in r["checks"])  # no rate evidence
    alarms = records(out, "alarms.jsonl")
    assert [a["check"] for a in alarms] == ["judge_changed"]


def _canary(tmp_path: Path, shift: float) -> Path:
    canary = write_stream(tmp_path / "canary", [0], per_week=40, seed=7)
    if shift:
        llm = pd.read_csv(canary / "llm.csv")
        # the same conversations read by a harsher judge: mass moved one option down on every question
        llm["option"] = np.where(llm["option"] > 1, llm["option"] - 1, 1)
        llm = llm.groupby(["conversation_id", "turn", "question_id", "option"], as_index=False)["prob"].sum()
        full = write_stream(tmp_path / "tmp-canary", [0], per_week=40, seed=7)
        options = pd.read_csv(full / "llm.csv")[["conversation_id", "turn", "question_id", "option"]]
        llm = options.merge(llm, how="left").fillna({"prob": 1e-6})
        llm["prob"] /= llm.groupby(["conversation_id", "turn", "question_id"])["prob"].transform("sum")
        shutil.rmtree(full)
        llm.to_csv(canary / "llm.csv", index=False)
    return canary


def test_the_canary_tells_a_judge_change_from_no_change(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0, 1], per_week=20)
    canary = _canary(tmp_path, shift=0)
    out = tmp_path / "mon"
    args = ["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", f"canary={canary}", "until=2027-01-01"]
    assert main(args) == 0
    kept = json.loads((out / "state.json").read_text())["canary"]
    assert len(kept["rates"]) == 40 and kept["tests"] == 0
    # gathered again by the same judge (nothing changed but the file's bytes): the test runs and finds nothing
    llm = pd.read_csv(canary / "llm.csv")
    llm.to_csv(canary / "llm.csv", index=False, float_format="%.12g")
    assert main(args) == 0
    assert "canary: 40 fixed conversations read again" in capsys.readouterr().out
    # gathered again by a harsher judge: its own alarm, naming the judge, not the chatbot
    shutil.rmtree(canary)
    _canary(tmp_path, shift=1)
    assert main(args) == 1
    alarms = records(out, "alarms.jsonl")
    assert alarms[-1]["check"] == "judge_answers_changed" and "not the chatbot" in alarms[-1]["what"]
    assert alarms[-1]["p_value"] < alarms[-1]["level"]


def test_an_absurd_window_is_one_line_naming_the_range(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0], per_week=4)
    for window in ("100000000w", "521w", "99999999999999999999d"):
        code = main(["monitor", f"data={data}", f"model={tiny_model}", f"out={tmp_path / 'mon'}", f"window={window}"])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "out of range" in err[0] and "520w" in err[0], err


def test_a_deleted_windows_file_is_refused_not_silently_restarted(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0, 1], per_week=10)
    out = tmp_path / "mon"
    args = ["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", "until=2026-01-14T00:00:00Z"]
    assert main(args) == 0 and len(records(out)) == 1
    (out / "windows.jsonl").unlink()
    args[-1] = "until=2027-01-01"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "windows.jsonl is gone" in err and "state.json records 1 monitored windows" in err
    assert not (out / "windows.jsonl").exists()  # nothing written over the state's history
