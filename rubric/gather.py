"""The gather stage: ask the judge every rubric question about every item -> llm.csv.

    role-rubric gather conversations=FILE rubric=NAME judge=NAME out=DIR

Requests run with bounded concurrency in item order (the questions of a turn back to back, so a server's
prefix cache sees the shared prefix while it is warm). In one process the first requests go out while
the later prompts are still being rendered and looked up in the cache. Very concurrent runs spread the
HTTP work over a few worker processes (judge.processes; rubric/parallel.py), since each request's CPU
caps what one process can do; this process alone writes the cache. Every finished answer goes to the
SQLite cache within the event-loop iteration it arrives in; llm.csv is written at the end from the cache
and fresh answers in a fixed order, so a rerun or a resumed run writes the same file. Requests that fail after every retry are counted, listed in
failures.csv and left out of llm.csv (a rerun retries them); answers that never named an option are
written as a flagged uniform fallback.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rubric.backends import Answer, JudgeConfig, OpenAIBackend, RequestFailed
from rubric.cache import RequestCache, cache_key, identity_json
from rubric.conversations import Conversation, Item, iter_items, load_conversations, save_conversations
from rubric.errors import InputError
from rubric.parallel import run_sharded, worker_processes
from rubric.prompts import Prompt, render_context, render_prompt, render_reason_prompt
from rubric.schema import Rubric, format_value, load_rubric, rubric_from_dict, save_rubric

LLM_COLUMNS = [
    "conversation_id",
    "turn",
    "question_id",
    "option",
    "prob",
    "coverage",
    "source",
    "model",
    "prompt_hash",
]


@dataclass
class GatherSummary:
    """What a gather did; printed at the end and written to gather_summary.json."""

    items: int = 0
    questions: int = 0
    pairs: int = 0
    """(item, question) pairs asked for."""
    cached: int = 0
    """Answers (pairs and reasons) read from the cache instead of requested."""
    answered: int = 0
    """Answers obtained from the judge in this run."""
    http_requests: int = 0
    retries: int = 0
    failures: int = 0
    """Pairs or reasons that failed after every retry (not in llm.csv; a rerun retries them)."""
    fallbacks: int = 0
    """Pairs whose answer never named an option (written with source=fallback)."""
    sources: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    processes: int = 1
    """Processes that made the requests (1: this one; more: rubric/parallel.py)."""
    wall_s: float = 0.0

    def line(self) -> str:
        cost = "" if self.cost_usd is None else f", cost ${self.cost_usd:.4f}"
        return (
            f"{self.pairs} (item, question) pairs over {self.items} items: {self.cached} from cache, "
            f"{self.answered} answered with {self.http_requests} requests ({self.retries} retries"
            f"{'' if self.processes <= 1 else f', {self.processes} processes'}); "
            f"{self.failures} failed, {self.fallbacks} fallbacks; sources {self.sources}; tokens "
            f"{self.prompt_tokens} prompt / {self.completion_tokens} completion{cost}; {self.wall_s:.1f} s"
        )


@dataclass
class GatherResult:
    llm: pd.DataFrame
    """Long-form llm.csv rows (LLM_COLUMNS)."""
    reasons: pd.DataFrame | None
    """conversation_id, turn, reason (include_reason=True only)."""
    failures: pd.DataFrame
    """conversation_id, turn, question_id, error: what failed after every retry."""
    summary: GatherSummary


def judge_config(judge: str | Mapping[str, Any] | JudgeConfig = "openai", **overrides: Any) -> JudgeConfig:
    """A judge from a name in conf/judge/ ("openai", "vllm", "embedding", ...), a mapping or a JudgeConfig,
    with keyword overrides (e.g. `judge_config("vllm", model="my-model", base_url="http://host:8000/v1")`)."""
    from dataclasses import replace
    from importlib import resources

    import yaml

    if isinstance(judge, JudgeConfig):
        return replace(judge, **overrides) if overrides else judge
    if isinstance(judge, str):
        names = sorted(
            p.name[:-5]
            for p in resources.files("conf").joinpath("judge").iterdir()
            if p.name.endswith(".yaml")
        )
        if judge not in names:
            raise InputError(
                f"unknown judge {judge!r}.", fix=f"use one of {', '.join(names)} or pass a mapping."
            )
        judge = yaml.safe_load(resources.files("conf").joinpath("judge", f"{judge}.yaml").read_text())
    return JudgeConfig.from_mapping({**dict(judge), **overrides})


def make_backend(judge: JudgeConfig, *, log: Callable[[str], None] | None = None) -> Any:
    if judge.backend == "embedding":
        from rubric.embedding_judge import EmbeddingBackend

        return EmbeddingBackend(judge)
    return OpenAIBackend(judge, log=log)


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
        )
    )


def run_sync(coro: Any) -> Any:
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
) -> GatherResult:
    """Ask `judge` every question of `rubric` about every item of `conversations`.

    judge: a JudgeConfig or a mapping like conf/judge/*.yaml. cache: a path (SQLite file), an open
    RequestCache, or None for an in-memory cache. backend: an already-built backend to reuse (its
    config must be `judge`). Returns llm rows in item order, then question order, then option order.
    """
    cfg = judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_mapping(judge)
    if include_reason and cfg.backend == "embedding":
        raise InputError(
            "include_reason needs an LLM judge; the embedding judge cannot explain itself.",
            fix="set include_reason=false or choose an LLM judge.",
        )
    started = time.perf_counter()
    items = list(iter_items(conversations, granularity))
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
        asks, keys, pending, processes = await run(
            cfg, backend, chunks, identity, store, answers, failures, progress
        )
    finally:
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
    _tally(summary, fresh, keys, answers, failures, cfg)
    result = GatherResult(
        _llm_frame(asks, keys, answers, cfg.model),
        _reason_frame(asks, keys, answers, include_reason),
        _failure_frame(asks, keys, failures),
        summary,
    )
    summary.wall_s = time.perf_counter() - started
    return result


def _processes(cfg: JudgeConfig, backend: Any, pending: int) -> int:
    """Processes to make `pending` requests: one for a given backend or the embedding judge, else
    judge.processes (rubric/parallel.py)."""
    return 1 if backend is not None or cfg.backend == "embedding" else worker_processes(cfg, pending)


def progress_bar(total: int, progress: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not progress, unit="ask", desc="gather", file=sys.stderr, smoothing=0.1)


def _prompt_chunks(
    items: list[Item], rubric: Rubric, include_reason: bool, size: int = 32
) -> Iterator[list[Prompt]]:
    """Every prompt in request order (all the questions, item by item; then the reasons), `size` items a
    chunk."""
    for start in range(0, len(items), size):
        yield [p for item in items[start : start + size] for p in _render_all(item, rubric)]
    if include_reason:
        for start in range(0, len(items), size):
            yield [render_reason_prompt(item) for item in items[start : start + size]]


def _keys(prompts: list[Prompt], identity: str) -> list[str]:
    return [cache_key(identity, {"messages": p.messages, "reason": p.question is None}) for p in prompts]


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
        await _run(backend, pending, store, answers, failures, cfg.concurrency, progress)
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
    answered, failed = _recorders(answers, failures, writer, bar)
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


def _render_all(item: Item, rubric: Rubric) -> list[Prompt]:
    context = render_context(item)  # the shared prefix, rendered once for all the questions
    return [render_prompt(item, q, context) for q in rubric.questions]


async def _run(
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
    answered, failed = _recorders(answers, failures, writer, bar)
    try:
        if getattr(backend, "batch", False):
            await _run_batched(backend, pending, store, answers, bar)
        else:
            await run_workers(backend, pending, concurrency, answered, failed)
    finally:
        writer.flush()
        bar.close()


def _recorders(
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
        self.tasks = [asyncio.create_task(_worker(backend, self.queue, answered, failed)) for _ in range(n)]

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


async def _worker(
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


async def _run_batched(
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


def _tally(
    summary: GatherSummary,
    fresh: list[Answer],
    keys: list[str],
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    cfg: JudgeConfig,
) -> None:
    summary.answered = len(fresh)
    summary.failures = len(failures)
    spent = fresh + list(failures.values())  # failed pairs cost requests (and tokens) too
    summary.http_requests = sum(a.requests for a in spent)
    summary.retries = sum(a.retries for a in spent)
    summary.prompt_tokens = sum(a.prompt_tokens for a in spent)
    summary.completion_tokens = sum(a.completion_tokens for a in spent)
    sources = [answers[k].dist.source for k in keys if k in answers and answers[k].dist is not None]
    summary.sources = {s: sources.count(s) for s in sorted(set(sources))}
    summary.fallbacks = summary.sources.get("fallback", 0)
    if cfg.price_input_per_mtok is not None and cfg.price_output_per_mtok is not None:
        summary.cost_usd = (
            summary.prompt_tokens * cfg.price_input_per_mtok
            + summary.completion_tokens * cfg.price_output_per_mtok
        ) / 1e6


def _llm_frame(asks: list[Prompt], keys: list[str], answers: dict[str, Answer], model: str) -> pd.DataFrame:
    cols: dict[str, list[Any]] = {c: [] for c in LLM_COLUMNS}
    for p, k in zip(asks, keys, strict=True):
        ans = answers.get(k)
        if p.question is None or ans is None or ans.dist is None:
            continue
        h = p.prompt_hash
        for opt, prob in zip(p.question.options, ans.dist.probs, strict=True):
            cols["conversation_id"].append(p.item.conversation.conversation_id)
            cols["turn"].append(p.item.turn)
            cols["question_id"].append(p.question.id)
            cols["option"].append(format_value(opt.value))
            cols["prob"].append(prob)
            cols["coverage"].append(ans.dist.coverage)
            cols["source"].append(ans.dist.source)
            cols["model"].append(model)
            cols["prompt_hash"].append(h)
    frame = pd.DataFrame(cols, columns=LLM_COLUMNS)
    frame["turn"] = frame["turn"].astype("Int64")
    return frame


def _reason_frame(
    asks: list[Prompt], keys: list[str], answers: dict[str, Answer], wanted: bool
) -> pd.DataFrame | None:
    if not wanted:
        return None
    rows = [
        (p.item.conversation.conversation_id, p.item.turn, answers[k].text)
        for p, k in zip(asks, keys, strict=True)
        if p.question is None and k in answers
    ]
    frame = pd.DataFrame(rows, columns=["conversation_id", "turn", "reason"])
    frame["turn"] = frame["turn"].astype("Int64")
    return frame


def _failure_frame(asks: list[Prompt], keys: list[str], failures: dict[str, Answer]) -> pd.DataFrame:
    rows = [
        (
            p.item.conversation.conversation_id,
            p.item.turn,
            p.question.id if p.question else "(reason)",
            failures[k].error,
        )
        for p, k in zip(asks, keys, strict=True)
        if k in failures
    ]
    return pd.DataFrame(rows, columns=["conversation_id", "turn", "question_id", "error"])


# command line -------------------------------------------------------------------------------------------
def rubric_from_config(cfg: Any) -> Rubric:
    """`rubric_file=PATH` if given, else the composed `rubric` group (conf/rubric/NAME.yaml)."""
    from omegaconf import OmegaConf

    target = cfg.get("target")
    if cfg.get("rubric_file"):
        return load_rubric(cfg.rubric_file, target=target)
    return rubric_from_dict(
        OmegaConf.to_container(cfg.rubric, resolve=True), source="conf/rubric", target=target
    )


def run_gather(cfg: Any) -> GatherResult:
    """`role-rubric gather`: read conversations and rubric, gather, write a native dataset dir."""
    from omegaconf import OmegaConf

    if not cfg.get("conversations") or str(cfg.conversations) == "???":
        raise InputError("no conversations file given.", fix="pass conversations=PATH/conversations.jsonl.")
    conversations = load_conversations(cfg.conversations)
    if cfg.get("limit"):
        conversations = conversations[: int(cfg.limit)]
    rubric = rubric_from_config(cfg)
    judge = JudgeConfig.from_mapping(OmegaConf.to_container(cfg.judge, resolve=True))
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    result = gather(
        conversations,
        rubric,
        judge,
        granularity=cfg.granularity,
        cache=cfg.cache,
        include_reason=bool(cfg.include_reason),
        progress=bool(cfg.progress),
    )
    written = write_outputs(result, out, rubric, conversations, judge)
    print(f"gather: {result.summary.line()}")
    for path in written:
        print(f"gather: wrote {path}")
    return result


def write_outputs(
    result: GatherResult, out: Path, rubric: Rubric, conversations: Sequence[Conversation], judge: JudgeConfig
) -> list[Path]:
    """llm.csv, rubric.yaml, conversations.jsonl (a native dataset dir), plus reasons/failures/summary."""
    written = [
        out / "llm.csv",
        save_rubric(rubric, out / "rubric.yaml"),
        save_conversations(conversations, out / "conversations.jsonl"),
    ]
    result.llm.to_csv(written[0], index=False)
    if result.reasons is not None:
        result.reasons.to_csv(out / "reasons.csv", index=False)
        written.append(out / "reasons.csv")
    failures = out / "failures.csv"
    if len(result.failures):
        result.failures.to_csv(failures, index=False)
        written.append(failures)
    elif failures.exists():
        failures.unlink()  # a stale list from an earlier run would mislead
    summary = {
        **asdict(result.summary),
        "judge": {k: v for k, v in judge.to_dict().items() if k != "api_key"},
    }
    (out / "gather_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    written.append(out / "gather_summary.json")
    return written
