"""One gather's HTTP work spread over a few worker processes; this process keeps everything else.

Why: each request costs CPU in the process that makes it (about 0.6 ms with judge.http_client=aiohttp,
1.5 ms through the openai client, on the 2-core benchmark machine), so one Python process tops out at
some hundreds to a couple of thousand requests/s; a high concurrency against a fast endpoint asks for more
(64 against 50 ms: 1,280/s). Each child builds its own OpenAIBackend from the JudgeConfig (the same HTTP
client, the same retry and answer logic) and runs the same worker loop as an in-process gather
(`rubric.judge.workers.run_workers`) over its shard, with its share of the concurrency. It sends every finished
result back through a pipe as soon as it has it; the parent alone owns the SQLite cache, the answers, the
failures, the progress bar and the summary, and commits each answer to the cache the moment it arrives,
so a killed gather loses at most the requests in flight.

- Shards are whole items dealt round-robin, so a turn's questions stay together and in order (a server
  prefix cache sees them back to back) and the children work through the same region of the input.
- Children are forked on Linux (about 7 ms each, the imported openai client included) and spawned elsewhere.
  A child ignores Ctrl-C (the parent terminates it), and exits when the parent dies: PR_SET_PDEATHSIG
  where available, a parent-pid check every 0.2 s, and a broken pipe on its next result.
- Log lines from children (the one loud "switching to sampling" warning) are printed once per gather.
- An InputError in a child (bad key, unknown model, logprobs required but refused) stops the gather and is
  raised here as the same InputError; RequestFailed stays a counted failure.
- A judge address where nothing listens yet (a server still starting, a wrong port) is waited for once, here,
  before the children start: one wait of at most REFUSED_WAIT_S and one error line, not one per child.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rubric.errors import InputError
from rubric.lifetime import die_with_parent

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

if TYPE_CHECKING:
    from rubric.judge.backends import Answer
    from rubric.judge.cache import RequestCache
    from rubric.judge.prompts import Prompt
    from rubric.judge.settings import JudgeConfig

# Automatic choice (judge.processes=auto). Several processes pay off only where one process is CPU-bound,
# and otherwise cost CPU of their own (pipes, a client each: 0.75 against 0.63 ms per request at
# concurrency 64). Measured on benchmarks/gather_throughput.py (2 cores shared with the server, 50 ms,
# median of 3, wall / ideal):
#   aiohttp: concurrency 32: 1.16 (2 processes) vs 1.20 (1); 64: 1.20 vs 1.18; 128: 1.58 vs 1.77.
#   openai:  concurrency 32: 1.24 vs 1.29; 64: 1.47 vs 1.91; 128: 2.50 vs 4.45.
# So from concurrency 128 with aiohttp (64 and 128 level; in between not measured) and from 16 through the
# openai client (whose 1.5 ms a request bind one process near 650 requests/s). Below 1,000 pending requests
# the run is over in seconds and start-up dominates: each child costs a fork (7 ms with openai imported)
# plus its own client and connections. More processes than cores measured slower (3 on 2 cores lost to
# 2); the cap of 4 bounds start-up and memory on big machines (not measured beyond 2 cores).
AUTO_MIN_PENDING = 1000
AUTO_MIN_CONCURRENCY = {"aiohttp": 128, "openai": 16}
AUTO_MAX_PROCESSES = 4
PARENT_CHECK_S = 0.2


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def worker_processes(cfg: JudgeConfig, pending: int) -> int:
    """How many processes should make the requests of a gather with `pending` requests to make."""
    if cfg.processes not in ("auto", 0):
        return max(1, min(int(cfg.processes), cfg.concurrency, max(pending, 1)))
    if pending < AUTO_MIN_PENDING or cfg.concurrency < AUTO_MIN_CONCURRENCY[cfg.http_client]:
        return 1
    return max(1, min(available_cpus(), AUTO_MAX_PROCESSES, cfg.concurrency))


def shard(pending: Sequence[tuple[str, Prompt]], n: int) -> list[list[tuple[str, Prompt]]]:
    """Split into at most n non-empty shards of whole items (consecutive prompts about one item), dealt
    round-robin; each shard keeps the original order."""
    groups: list[list[tuple[str, Prompt]]] = []
    for key, prompt in pending:
        if groups and groups[-1][-1][1].item is prompt.item:
            groups[-1].append((key, prompt))
        else:
            groups.append([(key, prompt)])
    shards: list[list[tuple[str, Prompt]]] = [[] for _ in range(min(n, len(groups)))]
    for i, group in enumerate(groups):
        shards[i % len(shards)].extend(group)
    return shards


def slots(concurrency: int, n: int) -> list[int]:
    """concurrency split over n processes (at least 1 each), e.g. 64 over 3 -> [22, 21, 21]."""
    return [max(1, concurrency // n + (1 if i < concurrency % n else 0)) for i in range(n)]


def _context() -> Any:
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    return multiprocessing.get_context(method)


# parent ---------------------------------------------------------------------------------------------
async def run_sharded(
    cfg: JudgeConfig,
    pending: Sequence[tuple[str, Prompt]],
    store: RequestCache,
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    processes: int,
    progress: bool,
) -> int:
    """Make the pending requests in up to `processes` child processes; returns how many were used. A judge
    address where nothing listens is waited for here, once, before any child starts."""
    from rubric.judge.backends import wait_for_listener
    from rubric.judge.workers import progress_bar

    await wait_for_listener(cfg)

    ctx = _context()
    if ctx.get_start_method() == "fork":
        import openai  # noqa: F401  - imported once here (0.6 s), inherited by every child

        with contextlib.suppress(ImportError):
            import aiohttp  # noqa: F401
    parts = shard(pending, processes)
    children: list[Any] = []
    readers: list[Any] = []
    loop = asyncio.get_running_loop()
    bar = None
    # Forked children share this process's memory copy-on-write; frozen objects are left out of their
    # garbage collections, which would otherwise walk (and so copy) the whole inherited heap.
    gc.freeze()
    try:
        _start_children(ctx, cfg, parts, children, readers)
        gc.unfreeze()
        bar = progress_bar(len(pending), progress)
        collector = _Collector(store, answers, failures, bar, loop)
        for recv in readers:
            collector.listen(recv)
        await collector.done
    finally:
        gc.unfreeze()
        _stop_children(loop, children, readers)
        if bar is not None:
            bar.close()
    return len(parts)


def _start_children(ctx: Any, cfg: JudgeConfig, parts: list, children: list, readers: list) -> None:
    """One child per shard, each with its share of the concurrency and the write end of its own pipe;
    appended to `children` and `readers` as they start, so that the caller stops those started so far
    whatever happens."""
    for part, n_slots in zip(parts, slots(cfg.concurrency, len(parts)), strict=True):
        recv, send = ctx.Pipe(duplex=False)
        # Forked, the child also holds the read ends (its own, the other children's); it closes them,
        # so that its writes fail at once when this process dies.
        inherited = [*readers, recv] if ctx.get_start_method() == "fork" else []
        child = ctx.Process(
            target=_child_main,
            args=(cfg, part, n_slots, send, os.getpid(), inherited),
            name="rubric-gather",
            daemon=True,
        )
        child.start()
        send.close()  # the child holds the only write end: EOF here when it exits
        children.append(child)
        readers.append(recv)


def _stop_children(loop: asyncio.AbstractEventLoop, children: list, readers: list) -> None:
    """Stop listening, end every child still running (terminate, then kill one that ignores it), close the pipes."""
    for recv in readers:
        with contextlib.suppress(OSError, ValueError):
            loop.remove_reader(recv.fileno())
    for child in children:
        if child.is_alive():
            child.terminate()
    for child in children:
        child.join(5.0)
        if child.is_alive():  # pragma: no cover - ignored SIGTERM
            child.kill()
            child.join()
    for recv in readers:
        recv.close()


class _Collector:
    """The parent's end of the children's pipes: each answer committed to the cache the moment it arrives,
    failures counted, a child's warning printed once per gather (not once per child), and `done` resolved
    when every child has finished, or with the first error (an InputError raised in a child, a crash, a
    child that exited without finishing)."""

    def __init__(
        self,
        store: RequestCache,
        answers: dict[str, Answer],
        failures: dict[str, Answer],
        bar: Any,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.store, self.answers, self.failures, self.bar, self.loop = store, answers, failures, bar, loop
        self.done: asyncio.Future[None] = loop.create_future()
        self.open = 0
        self.finished: set[Any] = set()
        self.logged: set[str] = set()

    def listen(self, conn: Any) -> None:
        self.open += 1
        self.loop.add_reader(conn.fileno(), self.readable, conn)

    def finish(self, exc: BaseException | None = None) -> None:
        if not self.done.done():
            self.done.set_exception(exc) if exc is not None else self.done.set_result(None)

    def handle(self, batch: list[tuple], conn: Any) -> None:
        rows = [(msg[1], msg[2].to_json()) for msg in batch if msg[0] == "ans"]
        if rows:
            self.store.put_many(rows)  # committed now: a kill after this line loses none of them
        for msg in batch:
            kind = msg[0]
            if kind == "ans":
                self.answers[msg[1]] = msg[2]
            elif kind == "fail":
                self.failures[msg[1]] = msg[2]
            elif kind == "log":
                if msg[1] not in self.logged:  # one warning per gather, not one per child
                    self.logged.add(msg[1])
                    log.warning(msg[1])
            elif kind == "done":
                self.finished.add(conn)
            elif kind == "input_error":
                problem, path, row, fix = msg[1:]
                self.finish(InputError(problem, path=path, row=row, fix=fix))
            elif kind == "crash":
                self.finish(RuntimeError(f"a gather worker process failed: {msg[1]}"))
        self.bar.update(len(rows) + sum(msg[0] == "fail" for msg in batch))

    def readable(self, conn: Any) -> None:
        # One message per call: the selector calls again while more is waiting. A child writes one
        # message per event-loop iteration of its own (all the results that finished in it).
        if self.done.done():
            return
        try:
            batch = conn.recv()
        except (EOFError, OSError):  # the child closed its end: it is exiting
            self.closed(conn)
            return
        try:
            self.handle(batch, conn)
        except Exception as exc:  # e.g. the cache could not be written: stop, do not hang
            self.finish(exc)

    def closed(self, conn: Any) -> None:
        self.loop.remove_reader(conn.fileno())
        self.open -= 1
        if conn not in self.finished:  # it exited without finishing (killed, out of memory...)
            self.finish(RuntimeError("a gather worker process died; finished answers are cached."))
        elif self.open == 0:
            self.finish()


# child ----------------------------------------------------------------------------------------------
def _child_main(
    cfg: JudgeConfig,
    part: list[tuple[str, Prompt]],
    n_slots: int,
    conn: Any,
    parent_pid: int,
    inherited: list[Any],
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the parent stops us
    for read_end in inherited:  # the pipes' read ends, inherited through fork
        read_end.close()
    die_with_parent(parent_pid)
    # A fresh thread: a forked child still carries the parent's running event loop in this one.
    worker = threading.Thread(target=_child_thread, args=(cfg, part, n_slots, conn, parent_pid))
    worker.start()
    worker.join()


class _Outbox:
    """What a child tells the parent, sent as one message per event-loop iteration (all the results that
    finished in it): fewer writes here and fewer wake-ups in the parent than one message per result."""

    def __init__(self, conn: Any):
        self.conn = conn
        self.items: list[tuple] = []
        self.loop: asyncio.AbstractEventLoop | None = None

    def put(self, msg: tuple) -> None:
        if not self.items and self.loop is not None:
            self.loop.call_soon(self.flush)
        self.items.append(msg)

    def flush(self) -> None:
        if self.items:
            batch, self.items = self.items, []
            try:
                self.conn.send(batch)
            except OSError:  # the parent is gone: stop making requests at once
                os._exit(1)


def _child_thread(cfg: JudgeConfig, part: list, n_slots: int, conn: Any, parent_pid: int) -> None:
    out = _Outbox(conn)
    try:
        asyncio.run(_child_gather(cfg, part, n_slots, out, parent_pid))
    except InputError as exc:
        out.put(("input_error", exc.problem, exc.path, exc.row, exc.fix))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which raises
        out.put(("crash", f"{type(exc).__name__}: {exc}"))
    out.flush()
    conn.close()


async def _child_gather(cfg: JudgeConfig, part: list, n_slots: int, out: _Outbox, parent_pid: int) -> None:
    from rubric.judge.backends import OpenAIBackend
    from rubric.judge.workers import run_workers

    out.loop = asyncio.get_running_loop()
    watchdog = asyncio.create_task(_watch_parent(parent_pid))
    try:
        backend = OpenAIBackend(cfg, log=lambda msg: out.put(("log", msg)))
        try:
            await run_workers(
                backend,
                part,
                n_slots,
                lambda key, ans: out.put(("ans", key, ans)),  # pickled whole: counts, tokens, error
                lambda key, spent: out.put(("fail", key, spent)),
            )
            out.put(("done",))
        finally:
            await backend.close()
    finally:
        out.loop = None  # what is left is flushed by the caller, after the loop
        watchdog.cancel()


async def _watch_parent(parent_pid: int) -> None:
    while True:
        await asyncio.sleep(PARENT_CHECK_S)
        if os.getppid() != parent_pid:
            os._exit(1)
