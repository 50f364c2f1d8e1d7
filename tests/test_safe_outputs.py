"""Nothing lost, nothing silently wrong (issue 13): the out-folder lock, atomic writes under SIGKILL, the
search's resume rules and dying workers, key masking, and inputs that are accepted on purpose."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest

from calibration.cli import main
from rubric.errors import InputError
from rubric.files import atomic_to_csv, atomic_write_text, out_lock
from rubric.secrets import mask_secrets
from tests.calibration.conftest import make_native_dataset

ROOT = Path(__file__).resolve().parents[1]


# -- the out-folder lock ----------------------------------------------------------------------------------------------
def _lock_holder(folder: Path) -> subprocess.Popen:
    """Another process holding FOLDER's out-folder lock (calibration/schema/out_locks.py), once it says so."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from rubric.files import out_lock\nimport time\nwith out_lock({str(folder)!r}):\n"
            "    print('held', flush=True)\n    time.sleep(60)\n",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def test_a_second_run_into_a_locked_folder_names_the_holder(tmp_path, capsys):
    conversations = tmp_path / "c.jsonl"
    conversations.write_text(
        '{"conversation_id": "a", "chatbot_role": "r", "turns": [{"user": "u", "assistant": "a"}]}\n'
    )
    holder = _lock_holder(tmp_path / "out")  # another run: a lock is re-entrant within one process
    code = main(["gather", f"conversations={conversations}", "judge=embedding", f"out={tmp_path / 'out'}"])
    holder.kill()
    holder.wait()
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert f"another role-rubric run (PID {holder.pid}) is writing to this folder" in err and "Fix: wait" in err
    assert not (tmp_path / "out" / "llm.csv").exists()


def test_the_lock_is_released_when_the_holder_is_killed(tmp_path):
    holder = _lock_holder(tmp_path)
    with pytest.raises(InputError, match=f"PID {holder.pid}"), out_lock(tmp_path):
        pass
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    with out_lock(tmp_path):  # no stale lock after a kill
        pass


# -- atomic writes ------------------------------------------------------------------------------------------------------
def test_a_kill_during_a_write_leaves_the_earlier_file_whole(tmp_path):
    target = tmp_path / "llm.csv"
    old = pd.DataFrame({"a": range(1000)})
    atomic_to_csv(old, target)
    before = target.read_bytes()
    script = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from rubric.files import atomic_write
        def slow(tmp):
            with open(tmp, "w") as fh:
                fh.write("a\\n" + "half-written\\n" * 1000)
                fh.flush()
                Path({str(tmp_path / "writing")!r}).touch()
                time.sleep(60)
        atomic_write({str(target)!r}, slow)
    """)
    writer = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.time() + 30
    while not (tmp_path / "writing").exists() and time.time() < deadline:
        time.sleep(0.05)
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    assert target.read_bytes() == before
    pd.testing.assert_frame_equal(pd.read_csv(target), old)


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    atomic_write_text(tmp_path / "x.json", "{}")

    def broken(tmp):
        tmp.write_text("partial")
        raise RuntimeError("disk full")

    from rubric.files import atomic_write

    with pytest.raises(RuntimeError):
        atomic_write(tmp_path / "x.json", broken)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.json"] and (tmp_path / "x.json").read_text() == "{}"


# -- search: resume, fingerprint, workers -------------------------------------------------------------------------------
def test_an_interrupted_enqueued_trial_is_queued_again(tmp_path):
    from calibration.evaluation.search import open_study

    storage = f"sqlite:///{tmp_path / 'search.db'}"
    study = open_study(storage, "s", 0)
    study.enqueue_trial({"lr": 0.03})
    study.ask()  # trial 0 (the current defaults) starts; the process is killed here
    resumed = open_study(storage, "s", 0)
    states = [t.state for t in resumed.trials]
    assert states == [optuna.trial.TrialState.FAIL, optuna.trial.TrialState.WAITING]
    assert resumed.trials[1].system_attrs["fixed_params"] == {"lr": 0.03}
    assert len(open_study(storage, "s", 0).trials) == 2  # queued once, not on every resume


def test_a_study_is_resumed_only_for_the_same_data_and_settings(tmp_path, caplog):
    from calibration.data.dataset import load_dataset
    from calibration.evaluation.search import search
    from calibration.model.settings import Settings

    a = load_dataset(make_native_dataset(tmp_path / "a", n_conversations=6))
    b = load_dataset(make_native_dataset(tmp_path / "b", n_conversations=6, seed=1))
    storage = f"sqlite:///{tmp_path / 'search.db'}"
    space = {"lr": {"low": 0.01, "high": 0.05, "log": True}}
    kwargs = {"trials": 0, "folds": 2, "storage": storage, "study_name": "s"}
    first = search(a, Settings(), space, **kwargs).user_attrs["fingerprint"]
    assert search(a, Settings(), space, **kwargs).user_attrs["fingerprint"] == first
    for other in ((b, Settings()), (a, Settings(hidden1=7))):
        with pytest.raises(InputError, match=r"was run on another dataset or other settings.*search\.resume=false"):
            search(*other, space, **kwargs)
    with caplog.at_level(logging.INFO, logger="calibration"):  # the library logs; the CLI prints its log
        fresh = search(b, Settings(), space, **kwargs, resume=False)
    assert fresh.user_attrs["fingerprint"] != first and len(fresh.trials) == 1
    assert "deleted the earlier study 's'" in caplog.text


def test_a_search_worker_dies_with_its_parent(tmp_path):
    script = textwrap.dedent(f"""
        import multiprocessing, os, time
        def child(parent):
            from calibration.evaluation.search import _die_with
            _die_with(parent)
            open({str(tmp_path / "child")!r}, "w").write(str(os.getpid()))
            time.sleep(60)
        if __name__ == "__main__":
            p = multiprocessing.get_context("spawn").Process(target=child, args=(os.getpid(),), daemon=False)
            p.start()
            time.sleep(60)
    """)
    (tmp_path / "parent.py").write_text(script)
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py")], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    deadline = time.time() + 60
    while not (tmp_path / "child").exists() and time.time() < deadline:
        time.sleep(0.1)
    child = int((tmp_path / "child").read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.time() + 2
    while time.time() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child), "the worker outlived its parent"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False
    return state != "Z"


# -- key masking ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "masked"),
    [
        ("Incorrect API key provided: sk-proj-abcdefgh12345678", "Incorrect API key provided: sk-***"),
        ("echo: Authorization: Bearer my-own-token", "echo: Authorization: Bearer ***"),
        ('{"api_key": "hunter2hunter2"}', '{"api_key": "***"}'),
        ("x-api-key=abcdef123456", "x-api-key=***"),
        ("the key literally: KEY-0000-1111", "the key literally: ***"),
        ("nothing secret here", "nothing secret here"),
    ],
)
def test_secrets_are_masked(text, masked):
    assert mask_secrets(text, "KEY-0000-1111") == masked


# -- accepted on purpose ------------------------------------------------------------------------------------------------------
def test_judge_ids_are_stripped(tmp_path):
    from calibration.data.dataset import load_dataset

    root = make_native_dataset(tmp_path / "d", n_conversations=6)
    labels = pd.read_csv(root / "labels.csv", dtype=str)
    judge = labels["judge_id"].iloc[0]
    before = load_dataset(root)
    labels.loc[labels["judge_id"] == judge, "judge_id"] = judge + " "
    labels.to_csv(root / "labels.csv", index=False)
    after = load_dataset(root)
    assert after.judges == before.judges and np.array_equal(after.label_judge, before.label_judge)


def test_a_byte_order_mark_is_accepted(tmp_path):
    from rubric.conversations import load_conversations
    from rubric.schema import load_rubric

    (tmp_path / "c.jsonl").write_bytes(
        b'\xef\xbb\xbf{"conversation_id": "a", "chatbot_role": "r", "turns": [{"user": "u", "assistant": "a"}]}\r\n'
    )
    assert load_conversations(tmp_path / "c.jsonl")[0].conversation_id == "a"
    (tmp_path / "rubric.yaml").write_bytes(
        b"\xef\xbb\xbfquestions:\n  - {id: q, options: [{value: 1, label: no}, {value: 2, label: yes}]}\n"
    )
    assert [o.label for o in load_rubric(tmp_path).questions[0].options] == ["no", "yes"]  # YAML 1.2: no is text


def test_gather_rerun_into_its_own_earlier_output_is_allowed(tmp_path):
    """An out written by an earlier gather may be rewritten (a rerun, another limit): only inputs and
    hand-written files are protected."""

    from rubric.conversations import load_conversations, save_conversations
    from rubric.judge.outputs import refuse_overwriting_inputs
    from rubric.schema import load_rubric

    src = tmp_path / "src.jsonl"
    src.write_text(
        "".join(
            f'{{"conversation_id": "c{i}", "chatbot_role": "r", "turns": [{{"user": "u", "assistant": "a"}}]}}\n'
            for i in range(3)
        )
    )
    out = tmp_path / "out"
    out.mkdir()
    convs = load_conversations(src)
    save_conversations(convs, out / "conversations.jsonl")
    (out / "gather_summary.json").write_text("{}")
    rubric = load_rubric(ROOT / "conf/rubric/role_adherence.yaml")
    refuse_overwriting_inputs(src, None, out, rubric, convs[:1])  # no error
    with pytest.raises(InputError, match="which is this run's input"):
        refuse_overwriting_inputs(out, None, out, rubric, convs[:1])
    refuse_overwriting_inputs(out, None, out, rubric, convs)  # the same bytes: allowed
