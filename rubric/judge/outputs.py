"""What a gather produces: its summary, the llm.csv / reasons / failures frames built from the answers in
a fixed order (so a rerun or a resumed run writes the same bytes), and the native dataset directory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from rubric.conversations import Conversation, conversations_jsonl, save_conversations
from rubric.errors import InputError
from rubric.files import atomic_to_csv, atomic_write_text
from rubric.judge.backends import Answer
from rubric.judge.health import QUANTILES, Health, health_of
from rubric.judge.identity import judge_identity
from rubric.judge.prompts import Prompt
from rubric.judge.settings import JudgeConfig
from rubric.schema import Rubric, format_value, save_rubric

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
    fallback_share: float = 0.0
    """fallbacks / pairs with a distribution (cached ones included)."""
    coverage: dict[str, float] = field(default_factory=dict)
    """Quantiles of the pairs' coverage (rubric/judge/health.py)."""
    warning: str | None = None
    """Why the output is unreliable (median coverage < 0.5 or fallbacks > 5%), or None."""
    sources: dict[str, int] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    """None without prices, and for a loopback (local) server."""
    processes: int = 1
    """Processes that made the requests (1: this one; more: rubric/judge/parallel.py)."""
    wall_s: float = 0.0
    mode: str = "online"
    """online, or batch (`gather mode=batch`: the requests went as lines of batch files, no HTTP request)."""
    batch_requests: int = 0
    """Batch lines read for this run's answers (mode=batch; re-ask rounds included)."""
    batch: dict[str, Any] | None = None
    """mode=batch: the job's folder and number, and each round's input files and results files."""

    def line(self) -> str:
        cost = "" if self.cost_usd is None else f", cost ${self.cost_usd:.4f}"
        asked = (
            f"{self.batch_requests} batch requests (0 HTTP requests"
            if self.mode == "batch"
            else f"{self.http_requests} requests ({self.retries} retries"
        )
        return (
            f"{self.pairs} (item, question) pairs over {self.items} items: {self.cached} from cache, "
            f"{self.answered} answered with {asked}"
            f"{'' if self.processes <= 1 else f', {self.processes} processes'}); "
            f"{self.failures} failed, {self.fallbacks} fallbacks; sources {self.sources}; tokens "
            f"{self.prompt_tokens} prompt / {self.completion_tokens} completion{cost}; {self.wall_s:.1f} s; "
            f"health: {self.health().describe()}"
        )

    def health(self) -> Health:
        pairs = sum(self.sources.values())
        return Health(pairs, self.fallback_share, self.coverage or {k: float("nan") for k in QUANTILES})


@dataclass
class GatherResult:
    llm: pd.DataFrame
    """Long-form llm.csv rows (LLM_COLUMNS)."""
    reasons: pd.DataFrame | None
    """conversation_id, turn, reason (include_reason=True only)."""
    failures: pd.DataFrame
    """conversation_id, turn, question_id, error: what failed after every retry."""
    summary: GatherSummary


def tally(
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
    dists = [d for k in keys if k in answers and (d := answers[k].dist) is not None]
    sources = [d.source for d in dists]
    summary.sources = {s: sources.count(s) for s in sorted(set(sources))}
    summary.fallbacks = summary.sources.get("fallback", 0)
    health = health_of([d.coverage for d in dists], sources)
    summary.fallback_share, summary.coverage, summary.warning = (
        health.fallback_share,
        health.coverage if health.pairs else {},
        health.warning(),
    )
    price_in, price_out = cfg.price_input_per_mtok, cfg.price_output_per_mtok
    if price_in is not None and price_out is not None and not is_loopback(cfg.resolved_base_url()):
        summary.cost_usd = (summary.prompt_tokens * price_in + summary.completion_tokens * price_out) / 1e6


def is_loopback(base_url: str | None) -> bool:
    """A server on this machine (localhost, 127.x, ::1, or one role-rubric starts): no per-token price.

    >>> is_loopback("http://127.0.0.1:8080/v1"), is_loopback("https://api.openai.com/v1"), is_loopback(None)
    (True, False, False)
    """
    import ipaddress
    from urllib.parse import urlsplit

    if base_url == "local":
        return True
    host = urlsplit(base_url or "").hostname
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def llm_frame(asks: list[Prompt], keys: list[str], answers: dict[str, Answer], model: str) -> pd.DataFrame:
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


def reason_frame(asks: list[Prompt], keys: list[str], answers: dict[str, Answer], wanted: bool) -> pd.DataFrame | None:
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


def failure_frame(
    asks: list[Prompt], keys: list[str], failures: dict[str, Answer], ids: dict[str, str] | None = None
) -> pd.DataFrame:
    """failures.csv; ids (a batch run's key -> custom_id) add a custom_id column to find the line by."""
    rows = [
        (
            p.item.conversation.conversation_id,
            p.item.turn,
            p.question.id if p.question else "(reason)",
            *([] if ids is None else [ids.get(k, "")]),
            failures[k].error,
        )
        for p, k in zip(asks, keys, strict=True)
        if k in failures
    ]
    custom = [] if ids is None else ["custom_id"]
    return pd.DataFrame(rows, columns=["conversation_id", "turn", "question_id", *custom, "error"])


def write_outputs(
    result: GatherResult, out: Path, rubric: Rubric, conversations: Sequence[Conversation], judge: JudgeConfig
) -> list[Path]:
    """llm.csv, rubric.yaml, conversations.jsonl (a native dataset dir), plus reasons/failures/summary."""
    written = [
        atomic_to_csv(result.llm, out / "llm.csv"),
        save_rubric(rubric, out / "rubric.yaml"),
        save_conversations(conversations, out / "conversations.jsonl"),
    ]
    if result.reasons is not None:
        written.append(atomic_to_csv(result.reasons, out / "reasons.csv"))
    failures = out / "failures.csv"
    if len(result.failures):
        written.append(atomic_to_csv(result.failures, failures))
    elif failures.exists():
        failures.unlink()  # a stale list from an earlier run would mislead
    summary = {
        **asdict(result.summary),
        "judge": {k: v for k, v in judge.to_dict().items() if k != "api_key"},
        "judge_identity": judge_identity(judge, rubric),  # copied into model.json by `train`
    }
    written.append(atomic_write_text(out / "gather_summary.json", json.dumps(summary, indent=2, default=str)))
    return written


def refuse_overwriting_inputs(
    source: str | Path,
    rubric_file: str | Path | None,
    out: Path,
    rubric: Rubric,
    conversations: Sequence[Conversation],
) -> None:
    """gather writes rubric.yaml and conversations.jsonl into `out`. An existing one there is replaced only
    when it is what gather would write anyway, or when it came from an earlier gather into `out` and is not
    this run's input (`source`, the conversations file or folder read; `rubric_file`): a dataset folder of the
    user's own is never rewritten."""
    import yaml

    source = Path(source)
    inputs = {source.resolve()}
    if source.is_dir():
        inputs.add((source / "conversations.jsonl").resolve())
    if rubric_file:
        inputs |= {Path(rubric_file).resolve(), (Path(rubric_file) / "rubric.yaml").resolve()}
    earlier_gather = (out / "gather_summary.json").exists()
    planned = {
        "conversations.jsonl": conversations_jsonl(conversations),
        "rubric.yaml": yaml.safe_dump(rubric.to_dict(), sort_keys=False, allow_unicode=True),
    }
    for name, text in planned.items():
        target = out / name
        if not target.exists() or (earlier_gather and target.resolve() not in inputs):
            continue
        if target.is_file() and target.read_bytes() == text.encode("utf-8"):
            continue
        what = "is this run's input" if target.resolve() in inputs else "was not written by an earlier gather"
        raise InputError(
            f"the output folder already holds {name}, which {what} and would be overwritten with different content.",
            path=target,
            fix="choose another out= (a new folder for the gathered dataset).",
        )
    if not earlier_gather and (out / "llm.csv").exists():  # a dataset's distributions, imported or hand-made
        raise InputError(
            "the output folder already holds an llm.csv that no earlier gather wrote; it would be replaced.",
            path=out / "llm.csv",
            fix="choose another out= (a new folder for the gathered dataset).",
        )
