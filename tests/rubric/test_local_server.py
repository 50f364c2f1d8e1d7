"""judge=local's plumbing (start on a free port, wait, gather, stop; the cache key; dying with its parent)
with a stand-in `llama_cpp` package whose server is the fake OpenAI-protocol judge. The real model is
tests/rubric/test_local_llm.py (marker `llm`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import make_conversations

from rubric.errors import InputError
from rubric.judge.gather import gather
from rubric.judge.settings import JudgeConfig, judge_config
from rubric.servers.local import LocalServer

TESTS = Path(__file__).resolve().parent

FAKE_SERVER = """
import argparse, asyncio, json, os, sys
sys.path.insert(0, {tests!r})
from openai_server import FakeOpenAI

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
args, _ = parser.parse_known_args()
with open(os.environ["FAKE_LLAMA_LOG"], "a") as fh:
    fh.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_LLAMA_FAIL"):
    print("error: cannot load the model", file=sys.stderr)
    sys.exit(1)
asyncio.run(FakeOpenAI().serve_forever(args.port))
"""


@pytest.fixture
def fake_llama(tmp_path, monkeypatch):
    """A `llama_cpp` package whose `python -m llama_cpp.server` is the fake judge; returns its start log."""
    pkg = tmp_path / "site" / "llama_cpp"
    (pkg / "server").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "server" / "__init__.py").write_text("")
    (pkg / "server" / "__main__.py").write_text(FAKE_SERVER.format(tests=str(TESTS)))
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), os.environ.get("PYTHONPATH", "")]))
    log = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_LLAMA_LOG", str(log))
    return log


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def local_judge(model_file, **overrides):
    return judge_config("local", **{"model_path": str(model_file), "timeout": 5.0, **overrides})


def starts(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_gathers_through_a_server_it_starts_and_stops(fake_llama, model_file, rubric, tmp_path):
    judge = local_judge(model_file)
    convs = make_conversations(2, 2)
    first = gather(convs, rubric, judge, cache=tmp_path / "c.sqlite")
    assert first.summary.answered == 20 and first.summary.failures == 0
    assert set(first.llm["source"]) == {"logprobs"} and first.summary.cost_usd is None
    (argv,) = starts(fake_llama)
    opts = dict(zip(argv[::2], argv[1::2], strict=False))
    assert opts["--model"] == str(model_file) and opts["--host"] == "127.0.0.1"
    assert opts["--logits_all"] == "true" and opts["--chat_format"] == "gemma" and opts["--n_ctx"] == "4096"
    # another free port next time, yet the same cache key: a rerun makes no request and starts no server
    again = gather(convs, rubric, judge, cache=tmp_path / "c.sqlite")
    assert again.summary.http_requests == 0 and again.summary.cached == 20
    assert len(starts(fake_llama)) == 1 and again.llm.equals(first.llm)


def test_the_cache_key_names_the_model_file_and_chat_format(model_file, tmp_path):
    judge = local_judge(model_file)
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF" + bytes(10))
    assert judge.identity() == local_judge(model_file, timeout=99.0).identity()
    assert judge.identity() != local_judge(other).identity()
    assert judge.identity() != local_judge(model_file, server={"chat_format": "llama-2"}).identity()


def test_a_server_that_cannot_start_is_one_clear_error(fake_llama, model_file, monkeypatch):
    monkeypatch.setenv("FAKE_LLAMA_FAIL", "1")
    with pytest.raises(InputError, match="cannot load the model"):
        LocalServer(str(model_file)).start()


def test_a_missing_model_file_or_library_is_one_clear_error(fake_llama, tmp_path, monkeypatch):
    with pytest.raises(InputError, match="does not exist"):
        LocalServer(str(tmp_path / "nope.gguf")).start()
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"role-rubric\[local\]"):
        LocalServer(str(tmp_path / "nope.gguf")).start()


@pytest.mark.parametrize("bad", [{"processes": 2}, {"concurrency": 64}])
def test_a_local_server_is_not_sharded(model_file, bad):
    with pytest.raises(InputError, match="one request at a time"):
        JudgeConfig.from_mapping({**local_judge(model_file).to_dict(), **bad})


PARENT = """
import sys, time
from rubric.servers.local import LocalServer
server = LocalServer(sys.argv[1]).start()
print(server.process.pid, flush=True)
time.sleep(60)
"""


def test_the_server_dies_with_the_process_that_started_it(fake_llama, model_file):
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(PARENT), str(model_file)], stdout=subprocess.PIPE, text=True
    )
    try:
        server_pid = int(parent.stdout.readline())
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(server_pid):
            time.sleep(0.1)
        assert not _alive(server_pid)
    finally:
        parent.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
