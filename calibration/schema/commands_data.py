"""The schemas of the commands that make and label datasets: gather, import, label-studio, compare and serve-fake-judge
(the `judge` group is rubric/judge/settings.py `JudgeConfig`; `rubric` and `scorer` are data, in conf/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.schema.base import Command, KeyRule, block, config_group, given, needs
from calibration.schema.keys import (
    GRANULARITY,
    LABEL_STUDIO_TIMEOUT,
    LABEL_STUDIO_TOKEN_ENV,
    LIMIT,
    PROGRESS,
    required,
)
from rubric.config.settings import (
    anything,
    boolean,
    choice,
    either,
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
    rubric_file: str | None = setting(None, "a rubric.yaml of your own; overrides rubric=", path(optional=True))
    target: str | None = setting(None, "training target question; null keeps the rubric's own", text(optional=True))
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
    results: str | None = setting(
        None,
        "mode=batch: a results file (or a folder of them) made elsewhere, e.g. by vLLM's run_batch",
        path(optional=True),
    )
    batch: BatchOptions = block(BatchOptions, "mode=batch: the batch files")
    judge: JudgeConfig = config_group("judge")
    rubric: dict[str, Any] | None = config_group("rubric")
    scorer: dict[str, Any] | None = config_group("scorer")


@dataclass(frozen=True)
class Import(Command):
    """role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR   (or url=URL project=ID, no export=)
    role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
    role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR
    role-rubric import source=otel files=EXPORT.jsonl|DIR|GLOB out=DIR
    role-rubric import source=mlflow tracking_uri=URL experiment=NAME out=DIR
    role-rubric import source=phoenix url=URL project=NAME out=DIR
    Conversations come from a chatbot's traces (OTLP JSON exports, an MLflow or a Phoenix server), reviewers'
    labels with them (MLflow HUMAN feedback, Phoenix HUMAN annotations): docs/how-to/traces.md.
    Labels come back from Label Studio (its JSON export, or pulled through its API) or from a filled labelling
    sheet; every answer is checked against data=DIR's rubric.yaml and each labelled turn against its
    conversations.jsonl. out=DIR gets the dataset (rubric.yaml, conversations.jsonl, llm.csv copied) with
    labels.csv = data's labels plus the imported ones, ready for `role-rubric train data=OUT` (docs/reference/files.md),
    and the sampling plan the labelled conversations were drawn with (sample_plan.csv), for `role-rubric estimate`."""

    name = "import"
    summary = "conversations from traces (OTLP, MLflow, Phoenix), labels from reviewers -> a native dataset dir"
    rules = (
        needs(
            "source",
            "evaluations",
            "judgments",
            value="llm-rubric",
            fix="pass evaluations=PATH and judgments=PATH (labels from reviewers: source=label-studio or source=sheet).",
        ),
        needs(
            "source",
            "files",
            value="otel",
            fix="pass files= (an OTLP JSON export, a folder or a glob); see docs/how-to/traces.md.",
        ),
        needs(
            "source",
            "tracking_uri",
            value="mlflow",
            fix="pass tracking_uri= and experiment=; see docs/how-to/traces.md.",
        ),
        needs(
            "source", "experiment", value="mlflow", fix="pass tracking_uri= and experiment=; see docs/how-to/traces.md."
        ),
        needs("source", "url", value="phoenix", fix="pass url= and project=; see docs/how-to/traces.md."),
        needs("source", "project", value="phoenix", fix="pass url= and project=; see docs/how-to/traces.md."),
        needs("source", "data", value="label-studio", fix="pass data=DIR, the folder the tasks were made from."),
        needs("source", "data", value="sheet", fix="pass data=DIR, the folder the sheet was made from."),
        needs("source", "sheet", value="sheet", fix="pass sheet=FILLED.csv (the sheet with its answer column filled)."),
        KeyRule(
            lambda v: v.get("source") == "label-studio" and given(v, "export") and given(v, "url"),
            "both export= and url= given.",
            "pass export=FILE.json, or url= and project=, not both.",
            "source=label-studio: export= and url= exclude each other",
        ),
        KeyRule(
            lambda v: (
                v.get("source") == "label-studio"
                and not given(v, "export")
                and not (given(v, "url") and v.get("project") is not None)
            ),
            "source=label-studio needs export=FILE.json, or url= and project=.",
            "pass export= a JSON export of the project, or url=URL project=ID (the token in the variable token_env= names).",
            "source=label-studio needs export=, or url= and project=",
        ),
    )
    source: str = setting(
        "llm-rubric",
        "otel | mlflow | phoenix (a chatbot's traces) | label-studio | sheet | llm-rubric (the LLM-Rubric "
        "paper's TSV files)",
        choice("llm-rubric", "label-studio", "sheet", "otel", "mlflow", "phoenix"),
    )
    data: str | None = setting(
        None, "source=label-studio|sheet: the dataset folder the tasks or the sheet were made from", path(optional=True)
    )
    export: str | None = setting(
        None, "source=label-studio: the project's JSON export (Label Studio: Export -> JSON)", path(optional=True)
    )
    url: str | None = setting(
        None,
        "source=label-studio: pull the export from this server instead, e.g. http://localhost:8080; "
        "source=phoenix: the Phoenix server, e.g. http://localhost:6006",
        http_url(),
    )
    project: int | str | None = setting(
        None,
        "source=label-studio with url=: the project's id (the number in its address); source=phoenix: the "
        "project's name",
        either(integer(1), text(optional=True)),
    )
    token_env: str = LABEL_STUDIO_TOKEN_ENV()
    timeout: float = LABEL_STUDIO_TIMEOUT()
    judge_map: str | None = setting(
        None,
        "source=label-studio: CSV annotator,judge_id renaming reviewers (email or user id); null: judge_id = email",
        path(optional=True),
    )
    sheet: str | None = setting(
        None, "source=sheet: the filled sheet (rows with an answer are read, the rest skipped)", path(optional=True)
    )
    plan: str | None = setting(
        None,
        "source=sheet|label-studio: the sampling plan carried into out= for `estimate` (sample_plan.csv of "
        "`suggest purpose=estimate`), checked against the labels; null: sample_plan.csv beside sheet= or export= "
        "(label-studio select= writes it there) or in data=, where there is one; none: carry no plan",
        path(optional=True),
    )
    evaluations: str | None = setting(
        None, "source=llm-rubric: llm_evaluations.tsv (the LLM's answer distributions)", path(optional=True)
    )
    judgments: str | None = setting(
        None, "source=llm-rubric: human_judgments.tsv (the human judges' answers)", path(optional=True)
    )
    files: str | None = setting(
        None,
        "source=otel: OTLP JSON traces as an OpenTelemetry Collector's file exporter writes them (a file, "
        "a folder of them, or a glob)",
        path(optional=True),
    )
    tracking_uri: str | None = setting(
        None, "source=mlflow: the tracking server, e.g. http://localhost:5000", http_url()
    )
    experiment: str | None = setting(None, "source=mlflow: the experiment's name", text(optional=True))
    conversation_key: str | None = setting(
        None,
        "the span or resource attribute that names a conversation; null: the conventions' own "
        "(gen_ai.conversation.id, session.id, MLflow's mlflow.trace.session)",
        text(optional=True),
    )
    role: str | None = setting(
        None, "the chatbot's role for every conversation; null: its system message or instructions", text(optional=True)
    )
    role_from: str | None = setting(
        None,
        "a span or resource attribute holding the chatbot's role (instead of the system message)",
        text(optional=True),
    )
    roles: str | None = setting(
        None, "CSV text,role: a short name per role whose prompt is or holds `text` (kept as role)", path(optional=True)
    )
    since: str | None = setting(
        None, "only conversations that started at or after this time (ISO 8601, e.g. 2026-11-01)", text(optional=True)
    )
    until: str | None = setting(
        None, "only conversations that started before this time (ISO 8601)", text(optional=True)
    )
    service: str | None = setting(None, "only spans of this service.name", text(optional=True))
    sample: int | None = setting(
        None, "a random sample of this many conversations (seeded by seed=)", integer(1, optional=True)
    )
    seed: int = setting(0, "seeds sample=", integer(0, 2**32 - 1))
    rubric_file: str | None = setting(
        None,
        "source=otel|mlflow|phoenix: the rubric.yaml written into out= (reviewers' labels are checked against "
        "it); null: the packaged role-adherence rubric",
        path(optional=True),
    )
    label_map: str | None = setting(
        None,
        "source=mlflow|phoenix: CSV name,question_id mapping feedback or annotation names to rubric questions; "
        "null: names equal to a question id (or role_rubric/QUESTION) are labels",
        path(optional=True),
    )
    progress: bool = PROGRESS()
    out: str = required("native dataset dir to write")


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
    select: Path | None = setting(
        None,
        "null: every turn | a CSV naming the turns: a suggest sheet, an estimate sheet, a sample_plan.csv",
        path(optional=True),
    )
    predictions: str | None = setting(
        None,
        "null | predictions.csv from `predict judges=population`: its most probable option per question is pre-filled",
        path(optional=True),
    )
    out: Path | None = setting(
        None, "folder for label_config.xml and tasks.json (needed unless url= is given)", path(optional=True)
    )
    url: str | None = setting(
        None, "Label Studio's address, e.g. http://localhost:8080: add the tasks to a project there", http_url()
    )
    project: int | None = setting(
        None,
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
