"""The schemas of the commands that make and label datasets: gather, label-studio, compare and serve-fake-judge
(the `judge` group is rubric/judge/settings.py `JudgeConfig`; `rubric` and `scorer` are data, in conf/);
import's is commands_import.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.schema.base import Command, KeyRule, block, config_group, given
from calibration.schema.keys import (
    GRANULARITY,
    LABEL_STUDIO_TIMEOUT,
    LABEL_STUDIO_TOKEN_ENV,
    LIMIT,
    PROGRESS,
    optional,
    required,
)
from rubric.config.settings import (
    anything,
    boolean,
    choice,
    http_url,
    integer,
    number,
    path,
    setting,
    text,
)
from rubric.judge.batch.lines import BatchSettings
from rubric.judge.long_turns import LONG_TURN_TOKENS
from rubric.judge.settings import JudgeConfig


@dataclass(frozen=True)
class BatchOptions:
    """gather mode=batch: the batch files and how they are sent (the defaults are rubric/batch.py
    BatchSettings', which the Python API uses too)."""

    max_requests: int = setting(
        BatchSettings.max_requests, "requests per batch file (the OpenAI Batch API's limit)", integer(1)
    )
    max_mb: float = setting(
        BatchSettings.max_mb, "megabytes per batch file (the OpenAI Batch API's limit)", number(above=0)
    )
    poll_s: float = setting(BatchSettings.poll_s, "seconds between status checks of a submitted batch", number(above=0))
    price_factor: float = setting(
        BatchSettings.price_factor,
        "batch price / online price, applied to judge.price_* in the summary (OpenAI: half)",
        number(0),
    )


@dataclass(frozen=True)
class Gather(Command):
    """Asks the judge every rubric question about every assistant turn and writes a native dataset dir:
    llm.csv (+ rubric.yaml, conversations.jsonl, gather_summary.json, reasons.csv, failures.csv).
    Columns: docs/reference/files.md."""

    name = "gather"
    summary = "ask the LLM judge every rubric question about every turn -> llm.csv"
    rules = (
        KeyRule(
            lambda v: given(v, "results") and v.get("mode") != "batch",
            "results= is read in batch mode only.",
            "add mode=batch.",
            "results= needs mode=batch",
        ),
        KeyRule(
            lambda v: given(v, "scorer") and v.get("granularity") != "turn",
            "reference scorers score turns only.",
            "use granularity=turn.",
            "scorer= needs granularity=turn",
        ),
    )
    groups = (
        ("rubric", "role_adherence", "conf/rubric/NAME.yaml; or rubric_file=PATH for your own rubric.yaml"),
        ("judge", "openai", "conf/judge/NAME.yaml: openai, vllm, ollama, llamacpp, tgi, embedding"),
        ("scorer", None, "conf/scorer/NAME.yaml: a reference-based scorer instead of the judge (cosine, knn, ...)"),
    )
    conversations: str = required("conversations.jsonl (or a dataset dir holding one)")
    rubric_file: str | None = optional("a rubric.yaml of your own; overrides rubric=")
    target: str | None = optional("training target question; null keeps the rubric's own", text(optional=True))
    out: str = setting("outputs/gather", "the dataset dir to write", path())
    cache: str = setting("${out}/cache.sqlite", "SQLite request cache; reruns and resumed runs read it", path())
    granularity: str = GRANULARITY()
    include_reason: bool = setting(
        False, "one extra request per item for a short justification -> reasons.csv", boolean()
    )
    limit: int | None = LIMIT()
    long_turn_tokens: int | None = setting(
        LONG_TURN_TOKENS,
        "a turn above this many estimated tokens (characters / 4) is warned about before any request",
        integer(1, optional=True),
    )
    long_turns: str = setting(
        "warn", "warn (count and cost estimate, then send) | refuse (stop before any request)", choice("warn", "refuse")
    )
    progress: bool = PROGRESS()
    mode: str = setting(
        "online",
        "online (requests one by one) | batch (batch files: the OpenAI Batch API at half "
        "the price, or vLLM's run_batch; docs/how-to/batch-gathering.md)",
        choice("online", "batch"),
    )
    submit: bool = setting(
        True,
        "mode=batch: send the files to the judge's Batch API and wait; false: write them to OUT/batch/ only",
        boolean(),
    )
    results: str | None = optional(
        "mode=batch: a results file (or a folder of them) made elsewhere, e.g. by vLLM's run_batch"
    )
    batch: BatchOptions = block(BatchOptions, "mode=batch: the batch files")
    judge: JudgeConfig = config_group("judge")
    rubric: dict[str, Any] | None = config_group("rubric")
    scorer: dict[str, Any] | None = config_group("scorer")


@dataclass(frozen=True)
class LabelStudio(Command):
    """role-rubric label-studio data=DIR url=http://localhost:8080 [project=ID]   (API token in $LABEL_STUDIO_API_KEY)
    One Label Studio task per assistant turn to label, showing the role and the conversation so far (ending with
    the reply under review), and the labelling config made from rubric.yaml: one single-choice question per rubric
    question, option labels as captions, option values as the stored answers. Files to import by hand (out=), or
    pushed into a new or existing project (url=). Labels come back with `role-rubric import source=label-studio`."""

    name = "label-studio"
    summary = "Label Studio tasks and labelling config from a dataset -> files or a project"
    rules = (
        KeyRule(
            lambda v: not given(v, "url") and not given(v, "out"),
            "nowhere to put the tasks.",
            "pass out=FOLDER (files to import by hand) or url=URL (Label Studio's address; the token in the "
            "variable token_env= names).",
            "out= or url= is needed",
        ),
    )
    data: Path = required("dataset folder with rubric.yaml and conversations.jsonl")
    select: Path | None = optional(
        "null: every turn | a CSV naming the turns: a suggest sheet, an estimate sheet, a sample_plan.csv"
    )
    predictions: str | None = optional(
        "null | predictions.csv from `predict judges=population`: its most probable option per question is pre-filled"
    )
    out: Path | None = optional("folder for label_config.xml and tasks.json (needed unless url= is given)")
    url: str | None = optional(
        "Label Studio's address, e.g. http://localhost:8080: add the tasks to a project there", http_url()
    )
    project: int | None = optional(
        "with url=: null makes a new project; an id adds the turns not already in that project",
        integer(1, optional=True),
    )
    title: str = setting("role-rubric labelling", "with url=: the new project's title", text())
    annotations_per_task: int = setting(
        1,
        "with url=: a new project's reviewers per turn (more than one lets the calibrator learn each reviewer)",
        integer(1, 100),
    )
    token_env: str = LABEL_STUDIO_TOKEN_ENV()
    timeout: float = LABEL_STUDIO_TIMEOUT()


@dataclass(frozen=True)
class Compare(Command):
    """The role-adherence paper's evaluation of the reference-based scorers (rubric/scorers) on any dataset
    whose turns carry a `reference` reply and an adherent/violation label: AUC, AP, separation, F1, kappa
    with bootstrap intervals, per corpus size and violation type -> compare.json, compare.html, scores.csv.
    Columns: docs/reference/files.md."""

    name = "compare"
    summary = "reference-based scorers and judges on one scale: AUC table -> compare.json/html"
    conversations: str = required("conversations.jsonl with a reference reply per turn")
    labels: str = required("CSV: conversation_id, turn, design (adherent | violation type) or adherent (1/0)")
    out: Path = setting("outputs/compare", "folder for compare.json, compare.html and scores.csv", path())
    cache: str = setting(
        "${out}/embeddings.sqlite", "SQLite cache of sentence embeddings and pair scores; reruns read it", path()
    )
    sizes: list[int] = setting(
        [15, 50, 150], "references per role drawn (seeded) for kNN and the distribution scorers", anything("[int, ...]")
    )
    methods: list[str] = setting(
        ["cosine", "knn", "bertscore", "nli", "mahalanobis", "pca_mahalanobis", "kl"],
        "the scorers compared",
        anything("[str, ...]"),
    )
    params: dict[str, Any] = setting(
        {
            "knn": {"k": 5},
            "mahalanobis": {"lam": 0.01, "alpha": 1.0},
            "pca_mahalanobis": {"components": 32, "lam": 0.01, "alpha": 1.0},
            "kl": {"top_terms": 500, "smoothing": 0.5},
            "nli": {"model_path": None},
        },
        "per-scorer settings (the paper's values); knn's k counts the turn's reference; nli needs a local model "
        "(model_path: a cross-encoder directory; null reports nli as unavailable)",
        anything("mapping"),
    )
    extra: dict[str, Any] = setting(
        {},
        "name: path, scores of other methods on the same turns, e.g. "
        "{embedding_judge: runs/gather/llm.csv, calibrated: runs/cv/predictions.csv}",
        anything("mapping"),
    )
    target: str = setting("overall", "extra llm.csv / predictions: score = P(target answer >= adheres_at)", text())
    adheres_at: float | None = setting(3, "the lowest adherent answer of the target", number(optional=True))
    extra_method: str = setting("calibrated", "which method's rows of a cv predictions.csv", text())
    n_boot: int = setting(1000, "bootstrap resamples of conversations", integer(1))
    seed: int = setting(0, "seeds the reference draws and the bootstrap", integer(0, 2**32 - 1))


@dataclass(frozen=True)
class ServeFakeJudge(Command):
    """A local judge that speaks the OpenAI protocol on 127.0.0.1, for trying the pipeline without an API key
    (gather with judge=fake). Its answers are a fixed hash of each prompt: plumbing only, never a measurement.
    Stop it with Ctrl-C, or with `kill PID` when started with background=true (it prints the PID).
    A port already taken is an error here, in the foreground (exit 2).
    Writes no file: it prints its base URL and serves until stopped."""

    name = "serve-fake-judge"
    summary = "a local OpenAI-protocol judge for trying the pipeline (judge=fake)"
    port: int = setting(8765, "0 = a free port (then pass judge.base_url=URL, the URL it prints)", integer(0, 65535))
    latency: float = setting(0.0, "seconds before each answer, to mimic a remote endpoint", number(0))
    background: bool = setting(
        False, "true: serve from a detached process and return; stdout is the base URL alone", boolean()
    )
