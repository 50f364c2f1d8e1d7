"""The in-process request machinery: bounded-concurrency workers over a judge backend, a progress bar, and
the cache writer that commits the answers of one event-loop iteration together.

Used by the gather stage (rubric/judge/gather.py) in this process and by each worker process of
rubric/judge/parallel.py; it imports neither of them back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from rubric.judge.backends import Answer, RequestFailed
from rubric.judge.cache import RequestCache
from rubric.judge.prompts import Prompt
from rubric.progress import progress_bar as rubric_progress_bar


def progress_bar(total: int, progress: bool) -> Any:
    # A bar on a terminal (gone when done: the summary line replaces it), plain lines in a log.
    return rubric_progress_bar(total, progress, desc="gather", unit="ask", smoothing=0.1)


async def run_in_process(
    backend: Any,
    pending: list[tuple[str, Prompt]],
    store: RequestCache,
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    concurrency: int,
    progress: bool,
) -> None:
    bar = progress_bar(len(pending), progress)

    writer = TickWriter(store)
    answered, failed = recorders(answers, failures, writer, bar)
    try:
        if getattr(backend, "batch", False):
            await run_batched(backend, pending, store, answers, bar)
        else:
            await run_workers(backend, pending, concurrency, answered, failed)
    finally:
        writer.flush()
        bar.close()


def recorders(
    answers: dict[str, Answer], failures: dict[str, Answer], writer: TickWriter, bar: Any
) -> tuple[Callable[[str, Answer], None], Callable[[str, Answer], None]]:
    """The callbacks the workers report each finished prompt to: (answered, failed)."""

    def answered(key: str, ans: Answer) -> None:
        answers[key] = ans
        writer.put(key, ans)
        bar.update(1)

    def failed(key: str, spent: Answer) -> None:
        failures[key] = spent
        bar.update(1)

    return answered, failed


class TickWriter:
    """Commits the answers that finish in one event-loop iteration together, at the end of it.

    Why: one SQLite commit per answer cost about 0.07 ms each, a tenth of a request's CPU. A kill loses
    at most the answers of the iteration it lands in: responses read microseconds before, as good as in
    flight. A failed commit keeps its rows and stops the run at the next answer; call flush() when the
    run ends, however it ends."""

    def __init__(self, store: RequestCache):
        self.store = store
        self.rows: list[tuple[str, str]] = []
        self.error: Exception | None = None

    def put(self, key: str, ans: Answer) -> None:
        if self.error is not None:
            raise self.error
        if not self.rows:
            asyncio.get_running_loop().call_soon(self._flush_soon)
        self.rows.append((key, ans.to_json()))

    def flush(self) -> None:
        if self.rows:
            self.store.put_many(self.rows)
            self.rows = []

    def _flush_soon(self) -> None:
        try:
            self.flush()
        except Exception as exc:  # raised from put(), in the run, not lost in the event loop's log
            self.error = exc


async def run_workers(
    backend: Any,
    pending: Sequence[tuple[str, Prompt]],
    concurrency: int,
    answered: Callable[[str, Answer], None],
    failed: Callable[[str, Answer], None],
) -> None:
    """Ask `backend` every pending prompt, `concurrency` at a time, in order; report each as it finishes.
    RequestFailed is a counted failure; anything else (InputError...) stops the run."""
    pool = WorkerPool()
    for entry in pending:
        pool.queue.put_nowait(entry)
    pool.start(backend, min(concurrency, len(pending)), answered, failed)
    try:
        await pool.finish()
    finally:
        await pool.cancel()


class WorkerPool:
    """Tasks that ask the backend about the prompts put in `queue`, each one at a time, in queue order."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[str, Prompt] | None] = asyncio.Queue()
        self.tasks: list[asyncio.Task] = []

    @property
    def started(self) -> bool:
        return bool(self.tasks)

    def start(self, backend: Any, n: int, answered: Callable, failed: Callable) -> None:
        self.tasks = [asyncio.create_task(worker(backend, self.queue, answered, failed)) for _ in range(n)]

    def stopped_early(self) -> bool:
        """A worker ends only at the end of the queue, or on an error that stops the run."""
        return any(t.done() for t in self.tasks)

    async def finish(self) -> None:
        """No more prompts: wait until every one is answered; the first error (not RequestFailed) raises."""
        for _ in self.tasks:
            self.queue.put_nowait(None)  # each worker stops at one of these
        await asyncio.gather(*self.tasks)

    async def cancel(self) -> None:
        """Stop whatever is still running (after finish(), nothing is)."""
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def worker(
    backend: Any,
    queue: asyncio.Queue,
    answered: Callable[[str, Answer], None],
    failed: Callable[[str, Answer], None],
) -> None:
    while (entry := await queue.get()) is not None:  # None: no more prompts
        key, prompt = entry
        try:
            ans = await (backend.judge(prompt) if prompt.question is not None else backend.reason(prompt))
        except RequestFailed as exc:
            failed(key, exc.spent or Answer(None, error=str(exc)))
        else:
            answered(key, ans)


async def run_batched(
    backend: Any, pending: list[tuple[str, Prompt]], store: RequestCache, answers: dict[str, Answer], bar: Any
) -> None:
    size = int(backend.batch_size)
    for start in range(0, len(pending), size):
        chunk = pending[start : start + size]
        got = await asyncio.to_thread(backend.judge_batch, [p for _, p in chunk])
        rows = [(k, a.to_json()) for (k, _), a in zip(chunk, got, strict=True)]
        store.put_many(rows)
        answers.update({k: a for (k, _), a in zip(chunk, got, strict=True)})
        bar.update(len(chunk))
