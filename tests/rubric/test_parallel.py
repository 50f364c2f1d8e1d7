"""A gather whose HTTP work runs in worker processes (rubric/judge/parallel.py), against the real HTTP server."""

from __future__ import annotations

import multiprocessing
import os

import pytest
from conftest import make_conversations

from rubric.errors import InputError
from rubric.judge import parallel
from rubric.judge.cache import RequestCache
from rubric.judge.gather import gather
from rubric.judge.settings import JudgeConfig
from rubric.notices import cli_notices

N_PAIRS = 4 * 3 * 5  # conversations x turns x questions


@pytest.fixture
def convs():
    return make_conversations(4)


@pytest.fixture
def children_before():
    """Child processes alive before the test: earlier tests leave some on purpose (multiprocessing's
    resource tracker, started by the first spawned pool of a session). Not the gather's to count."""
    return set(child_pids())


def no_children_left(before: set[int]):
    return multiprocessing.active_children() == [] and not set(child_pids()) - before


def child_pids():
    """Live (not zombie) processes whose parent is this one, read from /proc."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    stat = fh.read()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(int(entry))
    return found


def test_sharded_gather_is_identical_to_one_process(server, judge, convs, rubric, tmp_path, children_before):
    one = gather(convs, rubric, {**judge, "processes": 1})
    two = gather(convs, rubric, {**judge, "processes": 2}, cache=tmp_path / "c.sqlite")
    assert (one.summary.processes, two.summary.processes) == (1, 2)
    assert two.llm.to_csv(index=False) == one.llm.to_csv(index=False)
    s1, s2 = one.summary, two.summary
    assert (s2.pairs, s2.answered, s2.http_requests, s2.failures) == (N_PAIRS, N_PAIRS, N_PAIRS, 0)
    assert (s2.prompt_tokens, s2.completion_tokens) == (s1.prompt_tokens, s1.completion_tokens)
    assert len(RequestCache(tmp_path / "c.sqlite")) == N_PAIRS  # the parent wrote every answer
    before = server.requests
    again = gather(convs, rubric, {**judge, "processes": 2}, cache=tmp_path / "c.sqlite")
    assert server.requests == before and again.summary.processes == 0 and again.llm.equals(two.llm)
    assert no_children_left(children_before)


def test_retries_are_counted_across_processes(server, judge, convs, rubric):
    server.faults.extend(["429"] * 3)
    res = gather(convs, rubric, {**judge, "processes": 2})
    assert res.summary.retries == 3 and res.summary.http_requests == N_PAIRS + 3
    assert res.summary.failures == 0 and len(res.llm) == N_PAIRS * 4


def test_failures_are_counted_and_left_out(server, judge, rubric):
    server.fail_when = "conversation 1 "  # every request about conversation c1 gets HTTP 500
    convs = make_conversations(4, 1)
    res = gather(convs, rubric, {**judge, "processes": 2, "max_retries": 1})
    assert res.summary.failures == 5 and set(res.failures["conversation_id"]) == {"c1"}
    assert "HTTP 500" in res.failures["error"].iloc[0]
    assert len(res.llm) == 3 * 5 * 4 and "c1" not in set(res.llm["conversation_id"])
    # the summary counts what the failed pairs spent too: 2 requests (1 retry) each, from the children
    assert res.summary.retries == 5 and res.summary.http_requests == 15 + 5 * 2


def test_sampling_warning_is_printed_once(server, judge, convs, rubric, capsys):
    server.modes.update({"reject_logprobs"})
    with cli_notices():  # the warning on stderr, as the command line prints it
        res = gather(convs, rubric, {**judge, "processes": 2})
    err = capsys.readouterr().err
    assert err.count("WARNING") == 1 and "samples" in err
    assert set(res.llm["source"]) == {"sampled"} and res.summary.processes == 2


@pytest.mark.parametrize(
    ("mode", "answer_mode", "match"),
    [("reject_logprobs", "logprobs", "answer_mode"), ("bad_key", "auto", "refused the key")],
)
def test_input_error_in_a_child_surfaces(server, judge, convs, rubric, mode, answer_mode, match, children_before):
    server.modes.add(mode)
    with pytest.raises(InputError, match=match) as info:
        gather(convs, rubric, {**judge, "processes": 2, "answer_mode": answer_mode})
    assert info.value.fix  # the same error, fix included
    assert no_children_left(children_before)


class BrokenCache(RequestCache):
    def put_many(self, rows):
        raise OSError("disk full")


def test_an_error_in_the_parent_stops_the_children(server, judge, convs, rubric, children_before):
    with pytest.raises(OSError, match="disk full"):
        gather(convs, rubric, {**judge, "processes": 2}, cache=BrokenCache(None))
    assert no_children_left(children_before)


def test_shards_keep_items_whole_and_in_order(rubric):
    from rubric.conversations import iter_items
    from rubric.judge.prompts import render_prompt

    asks = [render_prompt(i, q) for i in iter_items(make_conversations(3, 2)) for q in rubric.questions]
    pending = [(str(n), p) for n, p in enumerate(asks)]
    shards = parallel.shard(pending, 4)
    assert [len(s) for s in shards] == [10, 10, 5, 5]  # six items dealt round-robin
    for part in shards:
        assert [int(k) for k, _ in part] == sorted(int(k) for k, _ in part)
        for start in range(0, len(part), 5):  # whole items: one item's five questions, in order
            block = part[start : start + 5]
            assert len({id(p.item) for _, p in block}) == 1
            assert [p.question.id for _, p in block] == [q.id for q in rubric.questions]
    assert sorted(k for s in shards for k, _ in s) == sorted(k for k, _ in pending)
    assert len(parallel.shard(pending[:5], 4)) == 1  # one item: one process
    assert parallel.slots(64, 3) == [22, 21, 21] and parallel.slots(2, 4) == [1, 1, 1, 1]


def test_automatic_process_count():
    auto = JudgeConfig(concurrency=128)
    many = min(parallel.available_cpus(), parallel.AUTO_MAX_PROCESSES)
    assert parallel.worker_processes(auto, 999) == 1
    assert parallel.worker_processes(auto, 5000) == many
    assert parallel.worker_processes(JudgeConfig(concurrency=64), 5000) == 1  # aiohttp: one keeps up
    assert parallel.worker_processes(JudgeConfig(concurrency=16, http_client="openai"), 5000) == many
    assert parallel.worker_processes(JudgeConfig(concurrency=8, http_client="openai"), 5000) == 1
    assert parallel.worker_processes(JudgeConfig(concurrency=128, processes=0), 5000) == many
    assert parallel.worker_processes(JudgeConfig(concurrency=64, processes=3), 10) == 3
    assert parallel.worker_processes(JudgeConfig(concurrency=2, processes=3), 10) == 2
    with pytest.raises(InputError, match="processes"):
        JudgeConfig.from_mapping({"processes": "many"})
    assert JudgeConfig(processes=4).identity() == JudgeConfig().identity()  # not in the cache key


def test_inside_a_running_event_loop(server, judge, convs, rubric, children_before):
    import asyncio

    async def notebook_cell():  # gather() from a running loop, as in Jupyter: a helper thread forks
        return gather(convs, rubric, {**judge, "processes": 2})

    res = asyncio.run(notebook_cell())
    assert res.summary.processes == 2 and len(res.llm) == N_PAIRS * 4
    assert no_children_left(children_before)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_refused_port_is_waited_for_once_before_any_worker_starts(
    judge, convs, rubric, monkeypatch, capsys, tmp_path
):
    """Several worker processes against an address where nothing listens: one shared wait of REFUSED_WAIT_S
    in the parent, then the one line (exit 2 on the command line), and no worker is ever started to wait
    out its own."""
    import time
    from pathlib import Path

    from calibration.cli import main
    from rubric.judge import backends

    def no_workers(*args):
        raise AssertionError("worker processes started against a closed port")

    monkeypatch.setattr(backends, "REFUSED_WAIT_S", 1.0)
    monkeypatch.setattr(parallel, "_start_children", no_workers)
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    with pytest.raises(InputError, match=rf"connection refused at {url}: nothing listens there \(tried for 1 s\)"):
        gather(convs, rubric, {**judge, "base_url": url, "processes": 4, "concurrency": 8})
    tiny = Path(__file__).resolve().parents[2] / "data" / "examples" / "tiny" / "conversations.jsonl"
    argv = ["gather", f"conversations={tiny}", "judge=fake", f"judge.base_url={url}", "judge.processes=4"]
    started = time.monotonic()
    code = main([*argv, "judge.concurrency=8", f"out={tmp_path / 'g'}"])
    took = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"connection refused at {url}" in err, err
    assert 1.0 <= took < 3.0  # one wait, not one per worker
    assert not (tmp_path / "g").exists()


def test_a_judge_that_starts_during_the_wait_is_used_by_every_worker(judge, convs, rubric, monkeypatch):
    import threading

    from rubric.servers.fake import FakeOpenAI

    server = FakeOpenAI()
    server.port = _closed_port()
    timer = threading.Timer(1.0, server.__enter__)
    timer.start()
    try:
        res = gather(convs, rubric, {**judge, "base_url": server.base_url, "processes": 2})
    finally:
        timer.join()
        server.__exit__(None, None, None)
    assert res.summary.failures == 0 and res.summary.processes == 2 and len(res.llm) > 0
