"""The servers and browsers the tests start themselves: a free port of the loopback, a health probe that waits
for one to answer, and stopping one with the workers it started (its own process group)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


class ServerUnavailable(RuntimeError):
    """The server is not installed or did not start: the tests that need it skip with this reason."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def healthy(url: str, probe: str = "/health") -> bool:
    """Whether `url + probe` answers 200 (straight to the loopback, past any proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with contextlib.suppress(OSError), opener.open(url + probe, timeout=2) as reply:
        return reply.status == 200
    return False


def wait_healthy(
    proc: subprocess.Popen, url: str, log: Path, *, name: str, timeout: float, probe: str = "/health", every: float
) -> None:
    """Wait until the server started as `proc` answers `url + probe`; raise ServerUnavailable, with the last line
    of its `log`, where it ends first or does not answer within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not healthy(url, probe):
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            raise ServerUnavailable(f"{name} did not start within {timeout:.0f} s ({tail[0][:200]})")
        time.sleep(every)


def stop(proc: subprocess.Popen) -> None:
    """Stop a server and the workers it started (its own process group: also when the server itself has died,
    which would leave its workers running)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def executable(variable: str, default: Path, program: str) -> Path | None:
    """`program` of the virtual environment the environment variable `variable` names (or the executable it
    names), else of the environment `default`; None where neither has it."""
    named = os.environ.get(variable)
    for candidate in ([Path(named)] if named else []) + [default]:
        exe = candidate / "bin" / program if candidate.is_dir() else candidate
        if exe.is_file() and os.access(exe, os.X_OK):
            return exe
    return None
