"""Gathering through the OpenAI batch file format (`role-rubric gather mode=batch`): the OpenAI Batch API,
or vLLM's offline runner (`python -m vllm.entrypoints.openai.run_batch -i IN -o OUT --model M`).

The requests not already in the cache are written as batch files under OUT/batch/ (`input-000.jsonl`, ...,
split at `batch.max_requests` lines and `batch.max_mb` megabytes), one line per (item, question):
`{"custom_id", "method": "POST", "url", "body"}`, the body exactly what the online judge sends first. The
custom id names the item, the question, the prompt hash (llm.csv's prompt_hash) and the cache key's first
12 hex digits, so results from another rubric, prompt or judge setting match nothing and are refused.

Results (downloaded from the Batch API, or `results=FILE`) are read like online responses
(rubric/responses.py, rubric/response_reading.py, rubric/extraction.py) into the same SQLite cache under
the same keys, so llm.csv comes out byte-identical to an online gather's and a rerun, online or batch,
reads them. Answers that named no option are re-asked in a follow-up round (`reask1-000.jsonl`, up to
judge.reasks rounds), then a flagged fallback, as online. Lines that failed go to failures.csv.

OUT/batch/state.json records the job: its files, their upload and batch ids, and what is done. Every
step is written down before and after it happens, so a kill at any point resumes the same batch: an
upload or a batch created just before a kill is found again by its content hash or input file.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rubric.backends import Answer, request_body
from rubric.errors import InputError
from rubric.extraction import (
    Distribution,
    first_word,
    from_answer_steps,
    from_samples,
    one_hot,
    option_of,
    uniform_fallback,
)
from rubric.files import atomic_write_bytes, atomic_write_text
from rubric.http import error_message
from rubric.judge_settings import JudgeConfig
from rubric.prompts import Prompt
from rubric.response_reading import answer_steps, choice_texts, ended_at_once
from rubric.responses import BadResponse, check_completion

STATE = "state.json"
OWN_FILE = re.compile(r"^(input|reask\d+)-\d{3}(\.output|\.errors)?\.jsonl$")  # what a job writes
TERMINAL = ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True)
class BatchSettings:
    """The `batch` block of conf/gather.yaml, with submit= and results=."""

    submit: bool = True
    results: str | None = None
    max_requests: int = 50_000
    max_mb: float = 200.0
    poll_s: float = 30.0
    price_factor: float = 0.5


class LineFailed(Exception):
    """A result line that gives no answer (an error, a bad body): its pair goes to failures.csv."""


# requests -------------------------------------------------------------------------------------------------
def endpoint(cfg: JudgeConfig) -> str:
    return "/v1/chat/completions" if cfg.backend == "chat" else "/v1/completions"


def custom_id(prompt: Prompt, key: str, round_: int = 0) -> str:
    """`conversation|turn|question|prompt_hash|key12` (+ `|rN` for the Nth re-ask)."""
    turn = "" if prompt.item.turn is None else str(prompt.item.turn)
    question = prompt.question.id if prompt.question is not None else "(reason)"
    cid = f"{prompt.item.conversation.conversation_id}|{turn}|{question}|{prompt.prompt_hash}|{key[:12]}"
    return cid + (f"|r{round_}" if round_ else "")


def batch_body(cfg: JudgeConfig, prompt: Prompt, *, reask: bool) -> dict[str, Any]:
    """The body the online judge sends first for `prompt` (rubric/backends.py)."""
    if prompt.question is None:
        return request_body(cfg, prompt, reask=False, max_tokens=cfg.reason_max_tokens, temperature=0.0)
    if cfg.output_mode == "binary":
        return request_body(cfg, prompt, reask=reask, max_tokens=cfg.answer_tokens, temperature=0.0)
    if cfg.answer_mode == "sampled":
        return request_body(
            cfg,
            prompt,
            reask=reask,
            max_tokens=cfg.answer_tokens,
            temperature=cfg.sample_temperature,
            n=cfg.samples,
        )
    return request_body(
        cfg, prompt, reask=reask, max_tokens=cfg.answer_tokens, temperature=cfg.temperature, logprobs=True
    )


def batch_lines(
    cfg: JudgeConfig, pending: Iterable[tuple[str, Prompt]], round_: int, ids: dict[str, str] | None = None
) -> Iterator[bytes]:
    """One JSONL line per request, made as they are written (half a million lines are gigabytes).
    ids: key -> custom_id(prompt, key), where the caller has them already."""
    url = endpoint(cfg)
    suffix = f"|r{round_}" if round_ else ""
    for k, p in pending:
        cid = ids[k] + suffix if ids is not None else custom_id(p, k, round_)
        line = {"custom_id": cid, "method": "POST", "url": url}
        line["body"] = batch_body(cfg, p, reask=round_ > 0)
        yield json.dumps(line, ensure_ascii=False).encode() + b"\n"


def split_lines(lines: Iterable[bytes], max_requests: int, max_bytes: int) -> Iterator[list[bytes]]:
    """Consecutive runs of lines, each at most `max_requests` lines and `max_bytes` bytes, one at a time."""
    chunk: list[bytes] = []
    size = 0
    for line in lines:
        if len(line) > max_bytes:
            raise InputError(
                f"one batch request is {len(line):,} bytes, more than batch.max_mb allows.",
                fix="raise batch.max_mb (the provider's limit per file permitting).",
            )
        if chunk and (len(chunk) >= max_requests or size + len(line) > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(line)
        size += len(line)
    if chunk:
        yield chunk


# results --------------------------------------------------------------------------------------------------
def read_results(path: Path) -> Iterator[dict[str, Any]]:
    """The lines of a results file (Batch API output or error file, or vLLM's run_batch output), one at a
    time (a 50,000-line file of full responses is hundreds of megabytes)."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                cut = not raw.endswith(b"\n")
                raise InputError(
                    "this line is not JSON"
                    + (" (the file ends in the middle of it: truncated)." if cut else "."),
                    path=path,
                    row=n,
                    fix="pass the complete results file the batch produced (nothing was read from this one).",
                ) from None
            if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
                raise InputError(
                    "this line has no custom_id: it is not a batch result.",
                    path=path,
                    row=n,
                    fix="pass the output file of the batch (lines with custom_id, response, error).",
                )
            if "response" not in line and "error" not in line and "body" in line:
                raise InputError(
                    "this is a batch request (input) line, not a result.",
                    path=path,
                    row=n,
                    fix="pass the file the batch wrote (run_batch's -o, or the Batch API's output file).",
                )
            yield line


def _request_ids(path: Path, state: Path) -> Iterator[str]:
    """The custom ids of a batch input file the job wrote (each line starts with its id: only that is
    decoded, not the request's few kilobytes)."""
    decode = json.JSONDecoder().raw_decode
    try:
        with open(path, "rb") as fh:
            for raw in fh:
                if raw.startswith(b'{"custom_id": "'):
                    yield decode(raw[len(b'{"custom_id": ') : raw.index(b'", "method"') + 1].decode())[0]
                else:
                    yield json.loads(raw)["custom_id"]
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(
            "a batch file of the job is missing or damaged.",
            path=path,
            fix=f"delete {state} to start a new batch job (a batch already submitted is then paid for again).",
        ) from None


def line_body(line: dict[str, Any], backend: str) -> dict[str, Any]:
    """The completion a result line carries, or LineFailed with why there is none."""
    error, response = line.get("error"), line.get("response")
    if error:
        if isinstance(error, dict):
            raise LineFailed(f"{error.get('code') or 'error'}: {error.get('message') or ''}".strip())
        raise LineFailed(str(error)[:200])
    if not isinstance(response, dict):
        raise LineFailed("the result line has neither a response nor an error")
    status, body = response.get("status_code"), response.get("body")
    if status != 200:
        raise LineFailed(f"HTTP {status}: {error_message(json.dumps(body).encode())}")
    try:
        return check_completion(body, backend)  # type: ignore[return-value]
    except BadResponse as exc:
        raise LineFailed(str(exc)) from None


def distribution_of(data: dict[str, Any], prompt: Prompt, cfg: JudgeConfig) -> Distribution | None:
    """What the online judge reads from its first response (rubric/backends.py `_ask`); None: the answer
    named no option (re-ask, then fallback)."""
    if cfg.output_mode == "binary":
        idx = option_of(first_word(choice_texts(data, cfg.backend)[0]), prompt.codes)
        return None if idx is None else one_hot(idx, len(prompt.codes), floor=cfg.floor)
    if cfg.answer_mode == "sampled":
        texts = choice_texts(data, cfg.backend)
        if len(texts) < cfg.samples:
            raise LineFailed(
                f"{len(texts)} of the {cfg.samples} samples asked for (the endpoint ignores n); gather online"
            )
        return from_samples(texts[: cfg.samples], prompt.codes, floor=cfg.floor)
    steps = answer_steps(data, cfg.backend)
    if steps is not None:
        return from_answer_steps(steps, prompt.codes, floor=cfg.floor)
    if ended_at_once(data, cfg.backend):
        return None
    raise LineFailed("the response carried no logprobs; set judge.answer_mode=sampled for this endpoint")


# the job --------------------------------------------------------------------------------------------------
class BatchJob:
    """The batch files of one gather and their state in OUT/batch/ (see the module docstring)."""

    def __init__(
        self, folder: Path, cfg: JudgeConfig, asks: list[Prompt], keys: list[str], settings: BatchSettings
    ):
        self.folder, self.cfg, self.settings = folder, cfg, settings
        self.prompt_of = dict(zip(keys, asks, strict=True))
        self.id_of = {k: custom_id(p, k) for k, p in self.prompt_of.items()}  # round 0's; rounds add |rN
        self.first_ids = {cid: k for k, cid in self.id_of.items()}
        self._requested: tuple[int, dict[str, str]] | None = None
        self.state: dict[str, Any] = {}

    # state ------------------------------------------------------------------------------------------
    def load(self) -> bool:
        """Read an unfinished job from OUT/batch/state.json; False when there is none."""
        path = self.folder / STATE
        if not path.exists():
            return False
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError(
                f"the batch job record is unreadable ({exc}).",
                path=path,
                fix="delete it to start a new batch job (a batch already submitted is then paid for again).",
            ) from None
        if state.get("finished"):
            return False
        self.state = state
        return True

    def save(self) -> None:
        atomic_write_text(self.folder / STATE, json.dumps(self.state, indent=1))

    def plan(
        self, pending: list[tuple[str, Prompt]], round_: int, spent: dict[str, list[int]] | None = None
    ) -> None:
        """Write the batch files for `pending` and a new state that names them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        max_bytes = int(self.settings.max_mb * 1_000_000)
        lines = batch_lines(self.cfg, pending, round_, self.id_of)
        chunks = split_lines(lines, self.settings.max_requests, max_bytes)
        prefix = "input" if round_ == 0 else f"reask{round_}"
        files = []
        for i, chunk in enumerate(chunks):
            data = b"".join(chunk)
            name = f"{prefix}-{i:03d}.jsonl"
            atomic_write_bytes(self.folder / name, data)
            files.append(
                {
                    "name": name,
                    "requests": len(chunk),
                    "bytes": len(data),
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "file_id": None,
                    "batch_id": None,
                    "status": None,
                    "output": None,
                    "errors": None,
                    "failure": None,
                    "done": False,
                }
            )
        failed = self.state.get("failed", {}) if round_ else {}
        self.state = {
            "format": 1,
            "created_at": time.time(),
            "endpoint": endpoint(self.cfg),
            "round": round_,
            "files": files,
            "results": None,
            "spent": spent or {},
            "failed": failed,
            "finished": False,
        }
        self.save()
        keep = {f["name"] for f in files}
        for old in self.folder.glob(
            "*.jsonl"
        ):  # earlier rounds' and jobs' files (read already), not the user's
            if OWN_FILE.match(old.name) and old.name not in keep:
                old.unlink()

    def paths(self) -> list[Path]:
        return [self.folder / f["name"] for f in self.state["files"]]

    def requested(self) -> dict[str, str]:
        """custom id -> cache key of every request in the job's current files (read back from the files,
        which are what was sent)."""
        round_ = self.state["round"]
        if self._requested is not None and self._requested[0] == round_:
            return self._requested[1]
        ids: dict[str, str] = {}
        self.file_of: dict[str, dict[str, Any]] = {}
        suffix = f"|r{round_}" if round_ else ""
        wanted = {self.id_of[k] + suffix: k for k in self._round_keys()}
        for entry, path in zip(self.state["files"], self.paths(), strict=True):
            for cid in _request_ids(path, self.folder / STATE):
                self.file_of[cid] = entry
                key = wanted.get(cid)
                if key is None:
                    raise InputError(
                        f"the batch job in {self.folder} asks for {cid!r}, which is not among this gather's "
                        "requests (other conversations, rubric or judge settings).",
                        path=path,
                        fix="rerun with the inputs and judge of that job to collect it, or delete "
                        f"{self.folder / STATE} to abandon it.",
                    )
                ids[cid] = key
        self._requested = (round_, ids)
        return ids

    def _round_keys(self) -> list[str]:
        if self.state["round"] == 0:
            return list(self.prompt_of)
        return list(self.state["spent"])

    @property
    def waiting(self) -> bool:
        return not all(f["done"] for f in self.state["files"])

    @property
    def remote(self) -> list[str]:
        return [f["batch_id"] for f in self.state["files"] if f["batch_id"] and not f["done"]]

    # results ------------------------------------------------------------------------------------------
    def take_results(self, results: str) -> None:
        """A results file (or a folder of them) made elsewhere stands for the current round's output."""
        if self.remote:
            raise InputError(
                f"batch {self.remote[0]} was submitted for these requests and is not collected yet.",
                path=self.folder / STATE,
                fix="rerun without results= to collect it.",
            )
        path = Path(results)
        if not path.exists():
            raise InputError(
                "the results file does not exist.", path=path, fix="pass the file run_batch wrote."
            )
        if path.is_dir() and not [p for p in path.glob("*.jsonl") if not OWN_FILE.match(p.name)]:
            raise InputError(
                "this folder holds no results files (*.jsonl).", path=path, fix="pass the results file."
            )
        # Not saved: the job records these results only once they are read, so a bad file changes nothing
        # (a rerun passes results= again).
        self.state["results"] = str(path.resolve())
        for f in self.state["files"]:
            f["done"] = True

    def result_lines(self) -> Iterable[tuple[Path, dict[str, Any]]]:
        sources = [self.folder / f[k] for f in self.state["files"] for k in ("output", "errors") if f[k]]
        if self.state.get("results"):
            given = Path(self.state["results"])
            found = sorted(p for p in given.glob("*.jsonl") if not OWN_FILE.match(p.name))
            sources += found if given.is_dir() else [given]
        for path in sources:
            for line in read_results(path):
                yield path, line

    def ingest(self, answers: dict[str, Answer], failures: dict[str, Answer], record: Callable) -> list[str]:
        """Read the round's results: answers through `record(rows)` (the cache, one transaction), failed
        lines into `failures`. Returns the keys to re-ask. Nothing is recorded if any line matches nothing."""
        requested = self.requested()
        round_ = self.state["round"]
        spent = self.state["spent"]
        got: dict[str, Answer] = {}
        failed: dict[str, str] = {}
        reask: dict[str, None] = {}  # ordered, and a fast `in`
        unmatched: list[tuple[Path, str]] = []
        for path, line in self.result_lines():
            cid = line["custom_id"]
            key = requested.get(cid)
            if key is None:
                if cid not in self.first_ids:  # an id of this gather's, already answered, is no mistake
                    unmatched.append((path, cid))
                continue
            if key in got or key in failed or key in answers:
                continue
            got_ans, why = self._answer(line, key, round_, spent.get(key, [0, 0, 0]))
            if why is not None:
                failed[key] = why
                failures[key] = got_ans
            elif got_ans.dist is None and got_ans.text is None:
                reask[key] = None
                spent[key] = [got_ans.requests, got_ans.prompt_tokens, got_ans.completion_tokens]
            else:
                got[key] = got_ans
        if unmatched:
            path, cid = unmatched[0]
            raise InputError(
                f"{len(unmatched)} result lines match no request of this gather (first: custom_id {cid!r}): they "
                "answer another rubric, prompt or judge setting.",
                path=path,
                fix="pass the results of the files this gather wrote, with the same conversations, rubric and "
                "judge settings (nothing was read from these results).",
            )
        for cid, key in requested.items():
            if key not in got and key not in failed and key not in reask and key not in answers:
                failures[key] = Answer(None, error=self._missing(cid))
                failed[key] = failures[key].error
        record([(k, a) for k, a in got.items()])
        answers.update(got)
        for key in [*got, *failed]:
            spent.pop(key, None)
        self.state["failed"].update({k: failures[k].error for k in failed})
        return list(reask)

    def _missing(self, cid: str) -> str:
        entry = self.file_of[cid]
        if entry.get("batch_id"):
            why = f": {entry['failure']}" if entry.get("failure") else ""
            return f"no result for this request: batch {entry['batch_id']} ended {entry['status']}{why}"
        return f"no result for this request in {self.state.get('results') or 'the results'}"

    def _answer(
        self, line: dict[str, Any], key: str, round_: int, spent: list[int]
    ) -> tuple[Answer, str | None]:
        prompt = self.prompt_of[key]
        ans = Answer(None, prompt_tokens=spent[1], completion_tokens=spent[2], requests=spent[0] + 1)
        try:
            data = line_body(line, self.cfg.backend)
            usage = data.get("usage") or {}
            ans.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            ans.completion_tokens += int(usage.get("completion_tokens") or 0)
            if prompt.question is None:
                ans.text = choice_texts(data, self.cfg.backend)[0].strip()
                return ans, None
            ans.dist = distribution_of(data, prompt, self.cfg)
        except LineFailed as exc:
            ans.error = f"{exc} (batch)"
            return ans, ans.error
        if ans.dist is None and round_ >= self.cfg.reasks:
            ans.dist = uniform_fallback(len(prompt.codes))  # flagged: source=fallback, as online
        return ans, None

    def earlier_failures(self) -> dict[str, Answer]:
        """Pairs that failed in an earlier round of this job (listed again in failures.csv)."""
        return {k: Answer(None, error=e) for k, e in self.state.get("failed", {}).items()}
