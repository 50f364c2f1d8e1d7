"""`role-rubric gather` end to end: config composition, the output dir, and resuming after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import ROOT, make_conversations
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from calibration.cli import main
from rubric.conversations import load_conversations, save_conversations
from rubric.schema import load_rubric
from tests.rubric.conftest import gather_overrides


@pytest.fixture
def convs_file(tmp_path):
    return save_conversations(make_conversations(3), tmp_path / "conversations.jsonl")


def test_gather_command_writes_a_native_dataset_dir(server, tmp_path, convs_file, capsys):
    assert main(["gather", *gather_overrides(server, tmp_path)]) == 0
    out = tmp_path / "out"
    printed = capsys.readouterr().out
    assert str(out / "llm.csv") in printed and "45 (item, question) pairs" in printed
    llm = pd.read_csv(out / "llm.csv")
    assert len(llm) == 45 * 4 and set(llm["question_id"]) == {
        "scope",
        "tone",
        "prohibited",
        "next_step",
        "overall",
    }
    assert load_rubric(out).target == "overall"
    assert load_conversations(out) == make_conversations(3)
    assert (out / "gather_summary.json").exists() and (out / "cache.sqlite").exists()


def test_rubric_selection_and_rubric_file(server, tmp_path, convs_file):
    assert main(["gather", *gather_overrides(server, tmp_path, "rubric=llm_rubric")]) == 0
    assert set(pd.read_csv(tmp_path / "out/llm.csv")["question_id"]) == {f"Q{i}" for i in range(9)}
    own = tmp_path / "mine.yaml"
    own.write_text(
        "questions:\n  - {id: ok, text: 'Is it ok?', options: [{value: 0, label: no}, {value: 1, label: yes}]}\n"
    )
    assert main(["gather", *gather_overrides(server, tmp_path, f"rubric_file={own}", f"out={tmp_path / 'o2'}")]) == 0
    llm = pd.read_csv(tmp_path / "o2/llm.csv")
    assert set(llm["question_id"]) == {"ok"} and set(llm["option"]) == {0, 1}


def test_bad_input_exits_2_with_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"conversation_id": "a", "chatbot_role": "r", "turns": [{"user": "u", "assistant": "a"}]}\n{oops\n')
    assert main(["gather", f"conversations={bad}", "judge=embedding", f"out={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "row 2" in err and "malformed JSON" in err


def test_every_judge_config_composes():
    GlobalHydra.instance().clear()
    names = sorted(p.stem for p in (ROOT / "conf/judge").glob("*.yaml"))
    assert {"openai", "vllm", "ollama", "llamacpp", "tgi", "embedding"} <= set(names)
    from rubric.judge.settings import JudgeConfig

    with initialize_config_module(config_module="conf", version_base="1.3"):
        for name in names:
            cfg = compose(config_name="gather", overrides=[f"judge={name}", "conversations=x"])
            from omegaconf import OmegaConf

            JudgeConfig.from_mapping(OmegaConf.to_container(cfg.judge, resolve=True))
    GlobalHydra.instance().clear()


KILLED_RUN = """
import sys
from calibration.cli import main
sys.exit(main(sys.argv[1:]))
"""


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains `text` (a killed gather's worker processes would)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().decode(errors="replace")
            with open(f"/proc/{entry}/stat") as fh:
                zombie = fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            continue
        if text in cmdline and not zombie:
            found.append(int(entry))
    return found


@pytest.mark.parametrize("processes", [1, 2])
def test_sigkill_halfway_then_rerun_gives_the_same_llm_csv(server, tmp_path, processes):
    save_conversations(make_conversations(20, 3), tmp_path / "conversations.jsonl")  # 300 pairs
    server.latency = 0.02
    args = gather_overrides(server, tmp_path, "judge.concurrency=8", f"judge.processes={processes}")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_RUN, "gather", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while server.requests < 150 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 1
    while processes_mentioning(str(tmp_path)) and time.time() < deadline:
        time.sleep(0.01)
    assert not processes_mentioning(str(tmp_path))  # no orphaned worker process goes on asking
    time.sleep(0.1)
    assert 100 < server.requests < 300 and not (tmp_path / "out/llm.csv").exists()
    killed_at = server.requests
    assert main(["gather", *args]) == 0
    resumed_requests = server.requests - killed_at
    # an uninterrupted run into a fresh dir and cache, in one process
    clean = gather_overrides(server, tmp_path, f"out={tmp_path / 'clean'}", "judge.processes=1")
    assert main(["gather", *clean]) == 0
    resumed = (tmp_path / "out/llm.csv").read_bytes()
    assert resumed == (tmp_path / "clean/llm.csv").read_bytes()
    # each pair was requested once, apart from the few in flight at the kill
    assert resumed_requests <= 300 - killed_at + 8 + 8
    assert resumed_requests < 300


def test_an_endpoint_error_in_a_worker_process_exits_2_with_one_line(server, tmp_path, convs_file, capsys):
    server.modes.add("bad_key")
    assert main(["gather", *gather_overrides(server, tmp_path, "judge.processes=2")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "refused the key" in err and "Fix:" in err
