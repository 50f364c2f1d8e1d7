"""The gather stage: ask the judge every rubric question about every item -> llm.csv.

    role-rubric gather conversations=FILE rubric=NAME judge=NAME out=DIR

Requests run with bounded concurrency in item order (the questions of a turn back to back, so a server's
prefix cache sees the shared prefix while it is warm). In one process the first requests go out while
the later prompts are still being rendered and looked up in the cache. Very concurrent runs spread the
HTTP work over a few worker processes (judge.processes; rubric/judge/parallel.py), since each request's CPU
caps what one process can do; this process alone writes the cache. Every finished answer goes to the
SQLite cache within the event-loop iteration it arrives in; llm.csv is written at the end from the cache
and fresh answers in a fixed order, so a rerun or a resumed run writes the same file. Requests that fail after every retry are counted, listed in
failures.csv and left out of llm.csv (a rerun retries them); answers that never named an option are
written as a flagged uniform fallback.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from rubric.conversations import Conversation, iter_items, load_conversations
from rubric.errors import IncompleteRun, InputError
from rubric.files import out_lock
from rubric.judge.backends import Answer
from rubric.judge.cache import RequestCache, identity_json
from rubric.judge.health import check_gather
from rubric.judge.long_turns import LONG_TURN_TOKENS, check_long_turns
from rubric.judge.outputs import (
    GatherResult,
    GatherSummary,
    failure_frame,
    llm_frame,
    reason_frame,
    refuse_overwriting_inputs,
    tally,
    write_outputs,
)
from rubric.judge.parallel import run_sharded, worker_processes
from rubric.judge.prompts import Prompt
from rubric.judge.prompts import prompt_chunks as _prompt_chunks  # shared with batch mode (rubric/judge/batch/run.py)
from rubric.judge.prompts import prompt_keys as _keys
from rubric.judge.registry import BACKENDS
from rubric.judge.settings import JudgeConfig
from rubric.judge.workers import TickWriter, WorkerPool, progress_bar, recorders, run_in_process
from rubric.schema import Rubric, load_rubric, note_default_target, rubric_from_dict

if TYPE_CHECKING:
    from rubric.judge.batch.lines import BatchSettings

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def make_backend(judge: JudgeConfig, *, log: Callable[[str], None] | None = None) -> Any:
    """The backend `judge.backend` names (rubric/judge/registry.py), built for `judge`; its extra checked first."""
    return BACKENDS.load(judge.backend, by=f"judge={judge.backend}")(judge, log=log)


def gather(
    conversations: Sequence[Conversation],
    rubric: Rubric,
    judge: JudgeConfig | Mapping[str, Any],
    *,
    granularity: str = "turn",
    cache: str | Path | RequestCache | None = None,
    include_reason: bool = False,
    progress: bool = False,
    backend: Any = None,
    long_turn_tokens: int | None = LONG_TURN_TOKENS,
    long_turns: str = "warn",
) -> GatherResult:
    """Judge distributions for every (item, question); see `a_gather` (this runs it on a new event loop,
    also from a notebook where one is already running)."""
    return run_sync(
        a_gather(
            conversations,
            rubric,
            judge,
            granularity=granularity,
            cache=cache,
            include_reason=include_reason,
            progress=progress,
            backend=backend,
            long_turn_tokens=long_turn_tokens,
            long_turns=long_turns,
        )
    )


T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion from sync code, also where an event loop is already running (Jupyter):
    then it runs on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


async def a_gather(
    conversations: Sequence[Conversation],
    rubric: Rubric,
    judge: JudgeConfig | Mapping[str, Any],
    *,
    granularity: str = "turn",
    cache: str | Path | RequestCache | None = None,
    include_reason: bool = False,
    progress: bool = False,
    backend: Any = None,
    long_turn_tokens: int | None = LONG_TURN_TOKENS,
    long_turns: str = "warn",
) -> GatherResult:
    """Ask `judge` every question of `rubric` about every item of `conversations`.

    judge: a JudgeConfig or a mapping like conf/judge/*.yaml. cache: a path (SQLite file), an open
    RequestCache, or None for an in-memory cache. backend: an already-built backend to reuse (its
    config must be `judge`). Returns llm rows in item order, then question order, then option order.
    A turn above `long_turn_tokens` estimated tokens is warned about before any request, or with
    long_turns="refuse" an InputError (rubric/judge/long_turns.py).
    """
    cfg = judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_mapping(judge)
    if include_reason and cfg.backend == "embedding":
        raise InputError(
            "include_reason needs an LLM judge; the embedding judge cannot explain itself.",
            fix="set include_reason=false or choose an LLM judge.",
        )
    started = time.perf_counter()
    items = list(iter_items(conversations, granularity))
    check_long_turns(items, rubric, cfg, limit=long_turn_tokens, mode=long_turns, include_reason=include_reason)
    store = cache if isinstance(cache, RequestCache) else RequestCache(cache)
    identity = identity_json(cfg.identity())
    n_asks = len(items) * (len(rubric.questions) + int(include_reason))
    answers: dict[str, Answer] = {}
    failures: dict[str, Answer] = {}
    # Streaming (prompts rendered, hashed and looked up in the cache while the first requests are out)
    # wherever one process makes every request; otherwise the pending count decides the processes first.
    streams = cfg.backend != "embedding" and _processes(cfg, backend, n_asks) == 1
    run = functools.partial(_gather_streaming, total=n_asks) if streams else _gather_upfront
    chunks = _prompt_chunks(items, rubric, include_reason)
    try:
        asks, keys, pending, processes = await run(cfg, backend, chunks, identity, store, answers, failures, progress)
    except BaseException:
        if not isinstance(cache, RequestCache):
            store.discard_if_new()  # stopped before any answer (a refused judge setting): no empty cache left
        raise
    else:
        if not isinstance(cache, RequestCache):
            store.close()
    summary = GatherSummary(
        items=len(items),
        questions=len(rubric.questions),
        pairs=len(items) * len(rubric.questions),
        cached=len(asks) - len(pending),
        processes=processes,
    )
    fresh = [answers[k] for k, _ in pending if k in answers]
    tally(summary, fresh, keys, answers, failures, cfg)
    result = GatherResult(
        llm_frame(asks, keys, answers, cfg.model),
        reason_frame(asks, keys, answers, include_reason),
        failure_frame(asks, keys, failures),
        summary,
    )
    summary.wall_s = time.perf_counter() - started
    return result


def _processes(cfg: JudgeConfig, backend: Any, pending: int) -> int:
    """Processes to make `pending` requests: one for a given backend or the embedding judge, else
    judge.processes (rubric/judge/parallel.py)."""
    return 1 if backend is not None or cfg.backend == "embedding" else worker_processes(cfg, pending)


async def _gather_upfront(
    cfg: JudgeConfig,
    backend: Any,
    chunks: Iterator[list[Prompt]],
    identity: str,
    store: RequestCache,
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    progress: bool,
) -> tuple[list[Prompt], list[str], list[tuple[str, Prompt]], int]:
    """Every prompt rendered and looked up first; then the pending ones asked, in this process or in
    worker processes. Returns (asks, keys, pending, processes used)."""
    asks = [p for chunk in chunks for p in chunk]
    keys = _keys(asks, identity)
    answers.update({k: Answer.from_json(v) for k, v in store.get_many(keys).items()})
    pending = [(k, p) for k, p in zip(keys, asks, strict=True) if k not in answers]
    if not pending:
        return asks, keys, pending, 0
    processes = _processes(cfg, backend, len(pending))
    if processes > 1:  # the HTTP work in child processes; the cache stays here
        used = await run_sharded(cfg, pending, store, answers, failures, processes, progress)
        return asks, keys, pending, used
    own = backend is None
    backend = backend or make_backend(cfg)
    try:
        await run_in_process(backend, pending, store, answers, failures, cfg.concurrency, progress)
    finally:
        if own and hasattr(backend, "close"):
            await backend.close()
    return asks, keys, pending, 1


async def _gather_streaming(
    cfg: JudgeConfig,
    backend: Any,
    chunks: Iterator[list[Prompt]],
    identity: str,
    store: RequestCache,
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    progress: bool,
    total: int,
) -> tuple[list[Prompt], list[str], list[tuple[str, Prompt]], int]:
    """As _gather_upfront in one process, but the requests start with the first chunk of prompts: the
    rest are rendered, hashed and looked up between responses (about 0.25 s for 5,000 prompts that would
    otherwise come before the first request). The judge client is made at the first prompt to ask, so a
    rerun from the cache never builds one."""
    asks: list[Prompt] = []
    keys: list[str] = []
    pending: list[tuple[str, Prompt]] = []
    pool = WorkerPool()
    own = backend is None
    bar = progress_bar(total, progress)
    writer = TickWriter(store)
    answered, failed = recorders(answers, failures, writer, bar)
    try:
        for chunk in chunks:
            chunk_keys = _keys(chunk, identity)
            hits = store.get_many(chunk_keys)
            asks += chunk
            keys += chunk_keys
            for k, p in zip(chunk_keys, chunk, strict=True):
                if k in hits:
                    answers[k] = Answer.from_json(hits[k])
                    bar.update(1)
                else:
                    pending.append((k, p))
                    pool.queue.put_nowait((k, p))
            if pending and not pool.started:
                backend = backend or make_backend(cfg)
                pool.start(backend, cfg.concurrency, answered, failed)
            await asyncio.sleep(0)  # let the workers send what is queued
            if pool.stopped_early():  # a worker stopped the run (InputError...): finish() raises it
                break
        await pool.finish()
    finally:
        await pool.cancel()
        writer.flush()
        bar.close()
        if own and pool.started and hasattr(backend, "close"):
            await backend.close()
    return asks, keys, pending, 1 if pending else 0


# command line -------------------------------------------------------------------------------------------
def rubric_from_config(
    rubric: Mapping[str, Any] | None,
    *,
    rubric_file: str | Path | None = None,
    target: str | None = None,
    command: str = "gather",
) -> Rubric:
    """`rubric_file` if given, else `rubric`, the composed `rubric` group (conf/rubric/NAME.yaml, as a
    mapping); a target that nobody chose is announced once, under COMMAND's name."""
    if rubric_file:
        out = load_rubric(rubric_file, target=target)
    else:
        out = rubric_from_dict(dict(rubric or {}), source="conf/rubric", target=target)
    note_default_target(out, command)
    return out


class _Options(TypedDict):
    """The keys `run_gather` passes on alike to the online and the batch gather."""

    granularity: str
    cache: str | Path | None
    include_reason: bool
    progress: bool


def run_gather(
    conversations: str | Path,
    rubric: Rubric,
    judge: JudgeConfig,
    *,
    out: str | Path,
    cache: str | Path | None,
    granularity: str = "turn",
    include_reason: bool = False,
    limit: int | None = None,
    long_turn_tokens: int | None = LONG_TURN_TOKENS,
    long_turns: str = "warn",
    progress: bool = True,
    batch: BatchSettings | None = None,
    rubric_file: str | Path | None = None,
) -> GatherResult | None:
    """`role-rubric gather`: read the conversations file, gather, write a native dataset dir `out`.

    The output folder is locked for the run; it may not hold the run's own inputs (the conversations,
    `rubric_file`) unless they are the files it would write. Requests that failed after every retry end the
    command with IncompleteRun (exit 3) after everything else is written; a judge that mostly named no
    option, with LowCoverage (exit 4; rubric/judge/health.py) unless judge.allow_low_coverage=true. batch: the
    BatchSettings of mode=batch, which goes through batch files (rubric/judge/batch/run.py) to the same outputs;
    None: online."""
    convs = load_conversations(conversations)
    if limit is not None:
        convs = convs[:limit]
    out = Path(out)
    with out_lock(out):
        refuse_overwriting_inputs(conversations, rubric_file, out, rubric, convs)
        check_long_turns(
            list(iter_items(convs, granularity)),
            rubric,
            judge,
            limit=long_turn_tokens,
            mode=long_turns,
            include_reason=include_reason,
            where=conversations,
        )
        options = _Options(granularity=granularity, cache=cache, include_reason=include_reason, progress=progress)
        if batch is None:  # long turns: checked above, naming the file
            result: GatherResult | None = gather(convs, rubric, judge, long_turn_tokens=None, **options)
        else:  # through batch files (rubric/judge/batch/run.py); None: the files wait to be run elsewhere
            from rubric.judge.batch.run import gather_batch

            result = gather_batch(convs, rubric, judge, out=out, settings=batch, **options)
        if result is None:
            return None
        written = write_outputs(result, out, rubric, convs, judge)
    log.info(f"gather: {result.summary.line()}")
    for path in written:
        log.info(f"gather: wrote {path}")
    failed = result.summary.failures
    if failed:
        asked = result.summary.pairs + (result.summary.items if include_reason else 0)
        how = "in the batch" if batch is not None else "after every retry"
        raise IncompleteRun(
            f"{failed} of {asked} requests failed {how}; they are listed here and left out of llm.csv"
            f" ({len(result.llm)} rows written).",
            path=out / "failures.csv",
            fix="see the error column, fix the endpoint or judge settings and rerun: answered pairs come from the cache.",
        )
    check_gather(result.summary, allow=judge.allow_low_coverage, path=out / "gather_summary.json")
    return result
