"""One batch gather's job in OUT/batch/: plan the batch files (rubric/judge/batch/lines.py), record what was sent and
submitted, and read the results into the cache.

OUT/batch/state.json records the job: its files, their upload and batch ids, and what is done. Every
step is written down before and after it happens, so a kill at any point resumes the same batch: an
upload or a batch created just before a kill is found again by its content hash or input file
(rubric/judge/batch/run.py). Answers that named no option are asked again in a next round of files, up to
judge.reasks rounds; the pairs waiting for one carry what they spent so far (`spent`), and the pairs
that failed in an earlier round are kept (`failed`) to be listed in failures.csv at the end.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from rubric.errors import InputError
from rubric.files import atomic_write_bytes, atomic_write_text
from rubric.judge.backends import Answer
from rubric.judge.batch.lines import (
    ID_SUFFIX,
    OWN_FILE,
    STATE,
    BatchSettings,
    LineFailed,
    batch_lines,
    custom_id,
    distribution_of,
    endpoint,
    judge_hash,
    line_body,
    read_results,
    split_lines,
)
from rubric.judge.extraction import uniform_fallback
from rubric.judge.prompts import Prompt
from rubric.judge.response_reading import choice_texts
from rubric.judge.settings import JudgeConfig
from rubric.secrets import mask_secrets


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


class BatchJob:
    """The batch files of one gather and their state in OUT/batch/ (see the module docstring)."""

    def __init__(self, folder: Path, cfg: JudgeConfig, asks: list[Prompt], keys: list[str], settings: BatchSettings):
        self.folder, self.cfg, self.settings = folder, cfg, settings
        self.prompt_of = dict(zip(keys, asks, strict=True))
        judge12 = judge_hash(cfg)
        self.id_of = {k: custom_id(p, judge12) for k, p in self.prompt_of.items()}  # job 1's round 0; see suffix
        self.first_ids = {cid: k for k, cid in self.id_of.items()}
        self._requested: tuple[int, dict[str, str]] | None = None
        self.api_key = cfg.resolved_api_key()
        self.state: dict[str, Any] = {}
        self.finished: dict[str, Any] = {}  # the folder's last finished job (its number names the next one)
        self.conflicts: list[tuple[str, Path, Path]] = []

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
            self.finished = state
            return False
        self.state = state
        return True

    def save(self) -> None:
        atomic_write_text(self.folder / STATE, json.dumps(self.state, indent=1))

    def plan(self, pending: list[tuple[str, Prompt]], round_: int, spent: dict[str, list[int]] | None = None) -> None:
        """Write the batch files for `pending` and a new state that names them."""
        self.folder.mkdir(parents=True, exist_ok=True)
        max_bytes = int(self.settings.max_mb * 1_000_000)
        job = self.state.get("job", 1) if round_ else self.finished.get("job", 0) + 1
        lines = batch_lines(self.cfg, pending, round_, self.id_of, _suffix(job, round_))
        chunks = split_lines(lines, self.settings.max_requests, max_bytes)
        prefix = ("" if job == 1 else f"job{job}-") + ("input" if round_ == 0 else f"reask{round_}")
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
            "job": job,  # the Nth job in this folder: its files and custom ids say so (job2-input-000.jsonl, |j2)
            "created_at": time.time(),
            "endpoint": endpoint(self.cfg),
            "round": round_,
            "files": files,
            "results": None,
            "spent": spent or {},
            "failed": failed,
            "failed_ids": self.state.get("failed_ids", {}) if round_ else {},
            "history": self.state.get("history", []) if round_ else [],  # rounds read: files in, results
            "finished": False,
        }
        self.save()
        keep = {f["name"] for f in files}
        for old in self.folder.glob("*.jsonl"):  # earlier rounds' and jobs' files (read already), not the user's
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
        suffix = _suffix(self.state.get("job", 1), round_)
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
            raise InputError("the results file does not exist.", path=path, fix="pass the file run_batch wrote.")
        given = [p for p in path.glob("*.jsonl") if not OWN_FILE.match(p.name)] if path.is_dir() else [path]
        if not given:
            raise InputError("this folder holds no results files (*.jsonl).", path=path, fix="pass the results file.")
        if all(_blank(p) for p in given):
            raise InputError(
                "the results file is empty." if path.is_file() else "every results file in this folder is empty.",
                path=path,
                fix="pass the file the batch wrote once it has finished (nothing was read; the job still waits).",
            )
        # Not saved: the job records these results only once they are read, so a bad file changes nothing
        # (a rerun passes results= again).
        self.state["results"] = str(path.resolve())
        for f in self.state["files"]:
            f["done"] = True

    def result_lines(self) -> Iterable[tuple[Path, int, dict[str, Any]]]:
        sources = [self.folder / f[k] for f in self.state["files"] for k in ("output", "errors") if f[k]]
        if self.state.get("results"):
            given = Path(self.state["results"])
            found = sorted(p for p in given.glob("*.jsonl") if not OWN_FILE.match(p.name))
            sources += found if given.is_dir() else [given]
        for path in sources:
            for n, line in read_results(path):
                yield path, n, line

    def ingest(self, answers: dict[str, Answer], failures: dict[str, Answer], record: Callable) -> list[str]:
        """Read the round's results: answers through `record(rows)` (the cache, one transaction), failed
        lines into `failures`. Returns the keys to re-ask. Nothing is recorded if any line matches nothing,
        or if one request has two results that disagree (both are named: no silent choice)."""
        requested = self.requested()
        round_ = self.state["round"]
        spent = self.state["spent"]
        self.state.setdefault("failed_ids", {})  # a job recorded before these were kept
        self.state.setdefault("history", [])
        got: dict[str, Answer] = {}
        failed: dict[str, str] = {}
        reask: dict[str, None] = {}  # ordered, and a fast `in`
        unmatched: list[tuple[Path, str]] = []
        earlier = 0  # lines of this gather's earlier jobs or rounds
        first_seen: dict[str, tuple[Path, int, Answer]] = {}
        conflicts: list[tuple[str, Path, int, Path, int]] = []
        sources: dict[str, None] = {}
        for path, row, line in self.result_lines():
            sources[str(path)] = None
            cid = line["custom_id"]
            key = requested.get(cid)
            if key is None:
                if ID_SUFFIX.sub("", cid) not in self.first_ids:
                    unmatched.append((path, cid))
                else:  # this gather's, from an earlier job or round: no mistake
                    earlier += 1
                continue
            if key in answers:
                continue
            got_ans, why = self._answer(line, key, round_, spent.get(key, [0, 0, 0]))
            if key in first_seen:
                if _said(first_seen[key][2]) != _said(got_ans):
                    conflicts.append((cid, *first_seen[key][:2], path, row))
                continue
            first_seen[key] = (path, row, got_ans)
            if why is not None:
                failed[key] = why
                failures[key] = got_ans
                self.state["failed_ids"][key] = cid
            elif got_ans.dist is None and got_ans.text is None:
                reask[key] = None
                spent[key] = [got_ans.requests, got_ans.prompt_tokens, got_ans.completion_tokens]
            else:
                got[key] = got_ans
        self._refuse_unusable(unmatched, conflicts, earlier=earlier, requested=len(requested), read=len(first_seen))
        for cid, key in requested.items():
            if key not in got and key not in failed and key not in reask and key not in answers:
                error = self._missing(cid)
                failures[key] = Answer(None, error=error)
                failed[key] = error
                self.state["failed_ids"][key] = cid
        record([(k, a) for k, a in got.items()])
        answers.update(got)
        for key in [*got, *failed]:
            spent.pop(key, None)
        self.state["failed"].update({k: failures[k].error for k in failed})
        self.state["history"].append(
            {"round": round_, "inputs": [f["name"] for f in self.state["files"]], "results": list(sources)}
        )
        return list(reask)

    def _refuse_unusable(
        self,
        unmatched: list[tuple[Path, str]],
        conflicts: list[tuple[str, Path, int, Path, int]],
        *,
        earlier: int,
        requested: int,
        read: int,
    ) -> None:
        """Results that cannot be used, before anything of them is recorded: lines of another gather, two
        results of one request that disagree, or only an earlier job's results (`requested`: this job's
        requests, `read`: how many of them the results answer)."""
        if unmatched:
            path, cid = unmatched[0]
            raise InputError(
                f"{len(unmatched)} result lines match no request of this gather (first: custom_id {cid!r}): they "
                "answer another rubric, prompt or judge setting.",
                path=path,
                fix="pass the results of the files this gather wrote, with the same conversations, rubric and "
                "judge settings (nothing was read from these results).",
            )
        if conflicts:
            cid, one, one_row, other, row = conflicts[0]
            earlier_line = f"line {one_row}" + ("" if one == other else f" of {one}")
            raise InputError(
                f"{len(conflicts)} requests have two results that disagree (first: custom_id {cid!r}, here and "
                f"at {earlier_line}): which one is right cannot be told.",
                path=other,
                row=row,
                fix="keep one results file per batch file (an older run's output beside the new one?) and rerun "
                "(nothing was read from these results).",
            )
        if requested and not read and earlier:
            # results= names the output of this gather's earlier job: read as this job's, every request of
            # it would be a failure and the job would end without asking them
            raise InputError(
                f"these results answer an earlier batch job of this gather ({earlier} lines), none of this job's "
                f"{requested} requests (the files {', '.join(f['name'] for f in self.state['files'])}).",
                path=self.state.get("results") or self.folder,
                fix="run this job's files and pass their results, or rerun without results= (submit=true sends "
                "them; nothing was read from these results).",
            )

    def _missing(self, cid: str) -> str:
        entry = self.file_of[cid]
        if entry.get("batch_id"):
            why = f": {entry['failure']}" if entry.get("failure") else ""
            return f"no result for this request: batch {entry['batch_id']} ended {entry['status']}{why}"
        return f"no result for this request in {self.state.get('results') or 'the results'}"

    def _answer(self, line: dict[str, Any], key: str, round_: int, spent: list[int]) -> tuple[Answer, str | None]:
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
        except LineFailed as exc:  # a server's words may echo the key: masked as the online gather does
            ans.error = f"{mask_secrets(str(exc), self.api_key)} (batch)"
            return ans, ans.error
        if ans.dist is None and round_ >= self.cfg.reasks:
            ans.dist = uniform_fallback(len(prompt.codes))  # flagged: source=fallback, as online
        return ans, None

    def failure_ids(self) -> dict[str, str]:
        """cache key -> the custom_id of the line (or request) that failed, for failures.csv."""
        return {**{k: self.id_of[k] for k in self.state.get("failed", {})}, **self.state.get("failed_ids", {})}

    def earlier_failures(self) -> dict[str, Answer]:
        """Pairs that failed in an earlier round of this job (listed again in failures.csv)."""
        return {k: Answer(None, error=e) for k, e in self.state.get("failed", {}).items()}


def _suffix(job: int, round_: int) -> str:
    """What a job's custom ids add to the first job's: |jN from the second job in a folder on (so a results
    folder that still holds an earlier job's output is told apart), |rN for a re-ask round."""
    return (f"|j{job}" if job > 1 else "") + (f"|r{round_}" if round_ else "")


def _said(ans: Answer) -> tuple[Any, ...]:
    """What a result line answered, to tell a repeated line from a contradicting one."""
    return (None if ans.dist is None else tuple(ans.dist.probs), ans.text, ans.error is not None)


def _blank(path: Path) -> bool:
    """Nothing but white space (read in blocks: a results file can be gigabytes, and is seldom blank)."""
    try:
        with open(path, "rb") as fh:
            while block := fh.read(1 << 20):
                if block.strip():
                    return False
    except OSError:
        return False  # unreadable: reading it says so, naming the file
    return True
