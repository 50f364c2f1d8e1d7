"""Run slices of training work side by side in forked processes, where that is safe; else in threads.

Why processes: Python threads share one interpreter lock, which training holds between its many small
kernels, so two thread slices on two cores trained only 1.6-1.7x faster than one; two forked processes
share nothing but the cores (README "Speed"). Fork, not spawn: a child starts in milliseconds with the
data and torch already loaded, and writes its own copies of only the pages it changes.

Fork is used only where it is safe: Linux, called from the main thread, with no other Python thread
alive (a child would inherit their locks, held or not, but not the threads that release them; tqdm's
monitor thread is allowed: the child never touches tqdm). A child runs torch on one thread
(`_one_torch_thread`), so a caller that set more (torch_threads) gets threads. Elsewhere the slices run
as threads, with results equal to the last bit: the same code runs on the same models.

- The parent runs the first slice itself; each other slice runs in a child, which sends back its result
  (or its exception) pickled through a pipe and leaves with os._exit, so no exit handler of the parent
  (temporary folders, open files, progress bars) runs twice.
- Progress: a child counts its steps in shared memory; the parent adds them to its bar as it goes.
- A child that dies (killed, out of memory) is one clear error; Ctrl-C or an error in the parent kills
  the children, and a child dies with its parent (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.sharedctypes import RawValue
from typing import Any

POLL_S = 0.2


def can_fork() -> bool:
    """Whether map_slices may fork here (see the module docstring)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return False
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() > 1:  # the caller wants more threads than a child runs
        return False
    return all(t is threading.main_thread() or type(t).__name__ == "TMonitor" for t in threading.enumerate())


def map_slices(
    fn: Callable[[Any, Any], Any], items: Sequence[Any], bar: Any = None, *, fork: bool | None = None
) -> list:
    """[fn(item, bar) for item in items], one item per process (or thread), side by side.

    fn reports progress through bar.update(n) (in a child, a shared counter the parent shows).
    fork: None decides by can_fork(); False always uses threads."""
    bar = _NoBar() if bar is None else bar
    if len(items) == 1:
        return [fn(items[0], bar)]
    if not (can_fork() if fork is None else fork):
        with ThreadPoolExecutor(len(items)) as pool:
            return list(pool.map(lambda item: fn(item, bar), items))
    counters = [RawValue("q", 0) for _ in items[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    children = [_start_child(fn, item, counter) for item, counter in zip(items[1:], counters, strict=True)]
    try:
        shown = _Shown(bar, counters)
        first = fn(items[0], shown)
        return [first, *(_collect(child, shown) for child in children)]
    finally:
        for pid, fd in children:
            _stop(pid, fd)


def map_dealt(fn: Callable[[Any], Any], items: Sequence[Any], workers: int) -> list:
    """[fn(item) for item in items], the items dealt round-robin over `workers` processes (map_slices)."""
    n = max(1, min(workers, len(items)))
    out: list = [None] * len(items)
    for w, results in enumerate(map_slices(lambda share, _: [fn(i) for i in share], [items[w::n] for w in range(n)])):
        out[w::n] = results
    return out


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass


class _Counter:
    """A child's bar: adds to a number in shared memory, which only this child writes."""

    def __init__(self, value):
        self.value = value

    def update(self, n: int = 1) -> None:
        self.value.value += n


class _Shown:
    """The parent's bar, showing the children's steps too whenever it moves."""

    def __init__(self, bar: Any, counters: list):
        self.bar, self.counters, self.seen = bar, counters, 0

    def update(self, n: int = 1) -> None:
        total = sum(c.value for c in self.counters)
        self.bar.update(n + total - self.seen)
        self.seen = total


def _start_child(fn, item, counter) -> tuple[int, int]:
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        os.close(write_fd)
        return pid, read_fd
    os.close(read_fd)
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
        _one_torch_thread()
        from rubric.lifetime import die_with_parent

        die_with_parent(parent)
        try:
            message = pickle.dumps((True, fn(item, _Counter(counter))), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as exc:  # noqa: BLE001 - sent to the parent, which raises it
            message = _failure(exc)
        with os.fdopen(write_fd, "wb") as out:
            out.write(message)
        status = 0
    finally:
        os._exit(status)


def _one_torch_thread() -> None:
    """A child runs torch on one thread. GNU OpenMP's thread pool does not survive fork: a parallel region
    in the child waits forever for the parent's pool threads, which the child does not have (seen: a child
    hung in its first indexing outside torch_threads, where the parent's default of 2 threads held)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _failure(exc: BaseException) -> bytes:
    """The exception itself if it pickles (an InputError stays one), else its traceback as text."""
    try:
        return pickle.dumps((False, exc))
    except Exception:  # noqa: BLE001
        text = "".join(traceback.format_exception(exc))
        return pickle.dumps((False, RuntimeError(f"a training process failed:\n{text}")))


def _collect(child: tuple[int, int], shown: _Shown) -> Any:
    """A child's result, showing progress while it works."""
    pid, fd = child
    chunks = []
    while True:
        readable, _, _ = select.select([fd], [], [], POLL_S)
        shown.update(0)
        if readable:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    if not chunks:
        from rubric.errors import InputError

        raise InputError(
            f"a training process (pid {pid}) died without a result ({_how(status)}), e.g. out of memory.",
            fix="set ROLE_RUBRIC_WORKERS=1 to train in one process, with less memory.",
        )
    ok, value = pickle.loads(b"".join(chunks))
    if not ok:
        raise value
    return value


def _how(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}" if os.WIFEXITED(status) else f"status {status}"


def _stop(pid: int, fd: int) -> None:
    """Kill a child that is still running (the parent failed or was interrupted), and reap it."""
    with contextlib.suppress(OSError):
        os.close(fd)
    try:
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except ChildProcessError:  # already reaped by _collect
        pass
