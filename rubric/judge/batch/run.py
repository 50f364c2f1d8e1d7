"""The gather stage in batch mode (`role-rubric gather mode=batch`): plan the batch files, submit them to
the judge's Batch API and wait (or stop at the files, or read results made elsewhere), then answer every
(item, question) from the cache exactly as the online gather does (rubric/judge/gather.py).

The file format and the reading of a result are rubric/judge/batch/lines.py; the job and its record
rubric/judge/batch/job.py; the API calls rubric/judge/batch/api.py.
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric.conversations import Conversation, iter_items
from rubric.errors import InputError
from rubric.files import atomic_write_bytes, file_sha256
from rubric.judge.backends import Answer
from rubric.judge.batch.job import BatchJob
from rubric.judge.batch.lines import TERMINAL, BatchSettings
from rubric.judge.cache import RequestCache, identity_json
from rubric.judge.outputs import GatherResult, GatherSummary, failure_frame, llm_frame, reason_frame, tally
from rubric.judge.prompts import prompt_chunks, prompt_keys
from rubric.judge.settings import JudgeConfig
from rubric.progress import progress_bar
from rubric.schema import Rubric
from rubric.secrets import mask_secrets

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def gather_batch(
    conversations: Sequence[Conversation],
    rubric: Rubric,
    judge: JudgeConfig | Mapping[str, Any],
    *,
    out: str | Path,
    settings: BatchSettings | None = None,
    granularity: str = "turn",
    cache: str | Path | RequestCache | None = None,
    include_reason: bool = False,
    progress: bool = False,
    api: Any = None,
) -> GatherResult | None:
    """`gather` through batch files in `out`/batch/. Returns the result once every request is answered
    (or failed), None while the job waits on files to be run elsewhere (submit=false, or a results file
    whose re-asks form a new round). api: a BatchAPI to use (tests); by default one for `judge`."""
    cfg = judge if isinstance(judge, JudgeConfig) else JudgeConfig.from_mapping(judge)
    settings = settings or BatchSettings()
    if cfg.backend == "embedding":
        raise InputError("mode=batch needs an LLM judge; the embedding judge runs here.", fix="use mode=online.")
    started = time.perf_counter()
    items = list(iter_items(conversations, granularity))
    asks = [p for chunk in prompt_chunks(items, rubric, include_reason) for p in chunk]
    keys = prompt_keys(asks, identity_json(cfg.identity()))
    store = cache if isinstance(cache, RequestCache) else RequestCache(cache)
    fresh: dict[str, Answer] = {}
    failures: dict[str, Answer] = {}
    try:
        answers = {k: Answer.from_json(v) for k, v in store.get_many(keys).items()}
        cached = len(answers)
        job = BatchJob(Path(out) / "batch", cfg, asks, keys, settings)

        def record(rows: list[tuple[str, Answer]]) -> None:
            store.put_many([(k, a.to_json()) for k, a in rows])  # one transaction per round
            fresh.update(rows)

        finished = _run_job(job, keys, answers, failures, record, progress, api)
    except BaseException:
        if not isinstance(cache, RequestCache):
            store.discard_if_new()  # stopped before any answer (no key, nothing listening): no empty cache left
        raise
    if not isinstance(cache, RequestCache):
        store.close()
    if not finished:
        return None
    summary = GatherSummary(
        items=len(items),
        questions=len(rubric.questions),
        pairs=len(items) * len(rubric.questions),
        cached=cached,
        processes=0,
    )
    tally(summary, list(fresh.values()), keys, answers, failures, cfg)
    if summary.cost_usd is not None:
        summary.cost_usd *= settings.price_factor
    # No HTTP request to the judge was made here: the lines went through batch files.
    summary.mode, summary.batch_requests, summary.http_requests, summary.retries = "batch", summary.http_requests, 0, 0
    summary.batch = _batch_record(job)
    summary.wall_s = time.perf_counter() - started
    return GatherResult(
        llm_frame(asks, keys, answers, cfg.model),
        reason_frame(asks, keys, answers, include_reason),
        failure_frame(asks, keys, failures, ids=job.failure_ids()),
        summary,
    )


def _batch_record(job: BatchJob) -> dict[str, Any]:
    """gather_summary.json's `batch`: the folder, the job's number there, and each round's input files and
    the results read for it (downloaded or given with results=); empty when every answer was cached."""
    state = job.state
    return {"folder": str(job.folder), "job": state.get("job", 1), "rounds": state.get("history", [])}


def _run_job(
    job: BatchJob,
    keys: list[str],
    answers: dict[str, Answer],
    failures: dict[str, Answer],
    record: Any,
    progress: bool,
    api: Any,
) -> bool:
    """Plan or resume the job and drive it round by round; False while it waits on files run elsewhere. A new
    job to submit opens the Batch API before it writes its files, so that what the API refuses at once (no
    key, a local judge, nothing listening at the address) stops the gather with nothing written."""
    settings = job.settings
    opened = None
    if job.load():
        job.requested()  # the job is for these requests: checked now, not after a day of waiting
        ids = ", ".join(job.remote) or "not submitted"
        log.info(f"gather: resuming the batch job in {job.folder} (round {job.state['round']}; batches: {ids})")
    else:
        pending = [(k, job.prompt_of[k]) for k in dict.fromkeys(keys) if k not in answers]
        if not pending:
            if settings.results:
                log.info(f"gather: every request is in the cache already; {settings.results} was not read")
            return True
        if api is None and settings.submit and not settings.results:
            from rubric.judge.batch.api import BatchAPI

            api = opened = BatchAPI(job.cfg)
        job.plan(pending, 0)
        _print_files(job)
    try:
        return _drive(job, answers, failures, record, progress, api)
    finally:
        if opened is not None:
            opened.close()


def _drive(
    job: BatchJob, answers: dict[str, Answer], failures: dict[str, Answer], record: Any, progress: bool, api: Any
) -> bool:
    """The job's rounds until every request is answered or failed (True), or it waits on files (False)."""
    settings = job.settings
    while True:
        if job.waiting:
            if settings.results:
                job.take_results(settings.results)
            elif not settings.submit:
                _announce(job)
                return False
            else:
                _submit_and_wait(job, api, progress)
        reask = job.ingest(answers, failures, record)
        if reask:
            spent = {k: job.state["spent"][k] for k in reask}
            job.plan([(k, job.prompt_of[k]) for k in reask], job.state["round"] + 1, spent)
            log.info(f"gather: {len(reask)} answers named no option; they are asked again (judge.reasks)")
            _print_files(job)
            if settings.results or not settings.submit:
                _announce(job)
                return False
            continue
        for key, error in job.state["failed"].items():  # earlier rounds' failures, listed again
            failures.setdefault(key, Answer(None, error=error))
        job.state["finished"] = True
        job.save()
        return True


def _print_files(job: BatchJob) -> None:
    n = sum(f["requests"] for f in job.state["files"])
    log.info(f"gather: wrote {n} batch requests in {len(job.state['files'])} file(s):")
    for path in job.paths():
        log.info(f"gather: wrote {path}")


def _announce(job: BatchJob) -> None:
    """What to do with the files (submit=false, or a round of re-asks after results=)."""
    model = shlex.quote(job.cfg.model)
    for path in job.paths():
        out = path.with_name(path.name.replace(".jsonl", ".results.jsonl"))
        log.info(
            "gather: run it with vLLM: python -m vllm.entrypoints.openai.run_batch "
            f"-i {shlex.quote(str(path))} -o {shlex.quote(str(out))} --model {model}"
        )
    log.info(
        "gather: then rerun this gather with mode=batch results=FILE (a folder of results files works too), "
        "or with submit=true to send the files to the judge's Batch API"
    )


def _submit_and_wait(job: BatchJob, api: Any, progress: bool) -> None:
    own = api is None
    if own:
        from rubric.judge.batch.api import BatchAPI

        api = BatchAPI(job.cfg)
    try:
        for entry in job.state["files"]:
            if not entry["done"] and not entry["batch_id"]:
                _submit(job, entry, api)
        _wait(job, api, progress)
    finally:
        if own:
            api.close()


def _submit(job: BatchJob, entry: dict[str, Any], api: Any) -> None:
    """Upload one file and create its batch; each step recorded before it starts and after it ends, so a
    kill in between finds the upload or batch again instead of paying twice."""
    path = job.folder / entry["name"]
    upload_name = f"role-rubric-{entry['sha256'][:16]}-{entry['name']}"
    if not entry["file_id"]:
        if _sha256(path) != entry["sha256"]:
            raise InputError(
                "this batch file changed after it was written; it is not uploaded.",
                path=path,
                fix=f"delete {job.folder / 'state.json'} and rerun to write the files again.",
            )
        file_id = api.find_upload(upload_name, entry["bytes"]) if entry.get("upload_started") else None
        if file_id is None:
            entry["upload_started"] = True
            job.save()
            file_id = api.upload(path, upload_name)
        entry["file_id"] = file_id
        job.save()
    batch_id = api.find_batch(entry["file_id"], job.state["created_at"]) if entry.get("create_started") else None
    if batch_id is None:
        entry["create_started"] = True
        job.save()
        batch_id = api.create(
            entry["file_id"], job.state["endpoint"], {"created_by": "role-rubric", "file": entry["name"]}
        )
    entry["batch_id"] = batch_id
    job.save()
    log.info(f"gather: submitted {path} as batch {batch_id} ({entry['requests']} requests)")


def _sha256(path: Path) -> str:
    """The file's SHA-256, "" when it cannot be read (then it differs from the recorded one)."""
    try:
        return file_sha256(path)
    except OSError:
        return ""


def _wait(job: BatchJob, api: Any, progress: bool) -> None:
    """Poll every open batch until all have ended, downloading each one's files as it ends."""
    files = [f for f in job.state["files"] if not f["done"]]
    bar = progress_bar(sum(f["requests"] for f in files), progress, desc="batch", unit="request")
    shown = 0
    try:
        while True:
            done = 0
            for entry in files:
                if not entry["done"]:
                    done += _poll(job, entry, api)
                done += entry["requests"] if entry["done"] else 0
            bar.update(max(0, done - shown))
            shown = max(shown, done)
            if all(f["done"] for f in files):
                return
            time.sleep(job.settings.poll_s)
    finally:
        bar.close()


def _poll(job: BatchJob, entry: dict[str, Any], api: Any) -> int:
    """Read one batch's status (downloading its results when it has ended); requests finished so far."""
    batch = api.retrieve(entry["batch_id"])
    counts = batch.request_counts
    finished = (counts.completed + counts.failed) if counts else 0
    if batch.status != entry["status"]:
        entry["status"] = batch.status
        job.save()
        total = counts.total if counts else entry["requests"]
        log.info(f"gather: batch {entry['batch_id']} {batch.status} ({finished}/{total} requests done)")
    if batch.status not in TERMINAL:
        return finished
    for kind, file_id in (("output", batch.output_file_id), ("errors", batch.error_file_id)):
        if file_id:
            name = entry["name"].replace(".jsonl", f".{kind}.jsonl")
            atomic_write_bytes(job.folder / name, api.download(file_id))
            entry[kind] = name
            log.info(f"gather: downloaded batch {entry['batch_id']}'s {kind} file to {job.folder / name}")
    if batch.status == "failed":
        errors = (batch.errors.data if batch.errors else None) or []
        said = "; ".join(f"{'line ' + str(e.line) + ': ' if e.line else ''}{e.message}" for e in errors[:3])
        entry["failure"] = mask_secrets(said, job.api_key) or "the batch failed"
    entry["done"] = True
    job.save()
    return 0
