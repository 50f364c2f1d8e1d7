"""map_slices: work in forked children comes back in order, with its progress, errors and deaths reported."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
import torch

from calibration.data.dataset import load_dataset
from calibration.model import forked
from calibration.model.forked import can_fork, map_slices
from calibration.model.settings import Settings
from calibration.model.train import Plan, fit_dataset
from rubric.errors import InputError

pytestmark = pytest.mark.skipif(not can_fork(), reason="fork is used on Linux from a single-threaded process only")


class Bar:
    def __init__(self):
        self.n = 0

    def update(self, n=1):
        self.n += n


def test_items_run_in_children_and_come_back_in_order():
    bar = Bar()

    def work(item, bar):
        bar.update(item)
        return item * 10, os.getpid()

    out = map_slices(work, [1, 2, 3, 4], bar, fork=True)
    assert [value for value, _ in out] == [10, 20, 30, 40]
    pids = [pid for _, pid in out]
    assert pids[0] == os.getpid() and len(set(pids)) == 4  # the first here, each other in its own child
    assert bar.n == 1 + 2 + 3 + 4  # the children's progress reached the parent's bar


def test_an_error_in_a_child_is_raised_here_as_itself():
    def work(item, _):
        if item == 2:
            raise InputError("labels.csv row 3: answer 7 is not an option.", fix="use one of 1-4.")
        return item

    with pytest.raises(InputError, match="answer 7 is not an option"):
        map_slices(work, [1, 2], fork=True)


def test_an_unpicklable_error_comes_back_with_its_traceback():
    class Local(Exception):  # a class defined in a function does not pickle
        pass

    def work(item, _):
        if item:
            raise Local("deep inside")
        return item

    with pytest.raises(RuntimeError, match="(?s)a training process failed.*Local: deep inside"):
        map_slices(work, [0, 1], fork=True)


def test_a_child_that_dies_is_one_clear_error():
    def work(item, _):
        if item:
            os.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would
        return item

    with pytest.raises(InputError, match="died without a result \\(signal 9\\)") as caught:
        map_slices(work, [0, 1], fork=True)
    assert "ROLE_RUBRIC_WORKERS=1" in caught.value.fix


def test_a_failing_parent_kills_its_children(monkeypatch):
    children = []
    real = forked._start_child
    monkeypatch.setattr(forked, "_start_child", lambda *a: children.append(real(*a)) or children[-1])

    def work(item, _):
        if item == 0:
            raise ValueError("parent slice failed")
        import time

        time.sleep(60)  # killed long before this ends

    with pytest.raises(ValueError, match="parent slice failed"):
        map_slices(work, [0, 1], fork=True)
    ((pid, _),) = children
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # killed and reaped: not running, not even a zombie


def test_no_fork_from_another_thread_or_with_more_torch_threads():
    seen = []
    thread = threading.Thread(target=lambda: seen.append(can_fork()))
    thread.start()
    thread.join()
    assert seen == [False]
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert not can_fork()  # a child runs one torch thread; a caller that asked for more gets threads
    finally:
        torch.set_num_threads(before)
    assert can_fork()


def test_forked_training_equals_threaded_training_bit_for_bit(synthetic_dir, monkeypatch):
    ds = load_dataset(synthetic_dir)
    X = torch.from_numpy(ds.features(ds.feature_spec()))
    settings = Settings(
        hidden1=8, hidden2=8, pretrain_steps=30, finetune_steps=30, ensemble=1, eval_every=5, patience=2
    )
    rows = np.arange(len(ds.label_item))
    plan = Plan([rows[rows % 4 != k] for k in range(4)], [rows[rows % 4 == k] for k in range(4)], [3, 4, 5, 6])

    def train():
        net = fit_dataset(ds, X, plan.subset(np.arange(4)), settings, workers=2)
        return net.state_dict()

    calls = []
    real = forked._start_child
    monkeypatch.setattr(forked, "_start_child", lambda *a: calls.append(1) or real(*a))
    in_processes = train()
    assert calls  # the second slice did train in a child
    monkeypatch.setattr(forked, "can_fork", lambda: False)
    in_threads = train()
    for name, value in in_threads.items():
        assert torch.equal(in_processes[name], value), name
