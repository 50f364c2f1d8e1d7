"""The settings of each source of `role-rubric import`: one frozen dataclass per source, each key declared once
there (its type, default, range and description; a required key's fix), with the rules between that source's
keys. calibration/schema/commands_import.py builds the command's keys from them; the sources themselves are
calibration/connectors/sources.py's registry, each naming its class here as `settings`.

A key means one thing per source: token_env='s default is each service's own variable (LABEL_STUDIO_API_KEY,
MLFLOW_TRACKING_TOKEN, PHOENIX_API_KEY).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from calibration.schema.base import KeyRule, given
from calibration.schema.keys import optional, required
from rubric.config.settings import Rule, env_name, http_url, integer, number, path, setting, text

__all__ = [
    "SOURCE_KEYS",
    "LabelStudioKeys",
    "LlmRubricKeys",
    "MlflowKeys",
    "OtelKeys",
    "PhoenixKeys",
    "SheetKeys",
    "SourceKeys",
    "TraceKeys",
]

TRACES = "docs/how-to/traces.md"


def _needed(doc: str, rule: Rule, fix: str, *, with_next: bool = False) -> Any:
    """A key the source cannot do without; `fix`: what to pass, said when it is missing. with_next: one rule
    with the next required key ("needs evaluations= and judgments=")."""
    return required(doc, rule, fix=fix, with_next=with_next)


@dataclass(frozen=True)
class SourceKeys:
    """The settings of one source of `import`: a frozen dataclass of `setting(...)` fields."""

    source: ClassVar[str]
    """The name source= takes."""
    rules: ClassVar[tuple[KeyRule, ...]] = ()
    """Rules between this source's keys (beyond each required key), checked before any work."""


@dataclass(frozen=True)
class LlmRubricKeys(SourceKeys):
    """source=llm-rubric: the LLM-Rubric paper's TSV files."""

    source: ClassVar[str] = "llm-rubric"
    evaluations: Path = _needed(
        "llm_evaluations.tsv (the LLM's answer distributions)",
        path(),
        "pass evaluations=PATH and judgments=PATH (labels from reviewers: source=label-studio or source=sheet).",
        with_next=True,
    )
    judgments: Path = _needed(
        "human_judgments.tsv (the human judges' answers)",
        path(),
        "pass evaluations=PATH and judgments=PATH (labels from reviewers: source=label-studio or source=sheet).",
    )


PLAN_DOC = (
    "the sampling plan carried into out= for `estimate` (sample_plan.csv of `suggest purpose=estimate`), checked "
    "against the labels; null: sample_plan.csv beside sheet= or export= (label-studio select= writes it there) "
    "or in data=, where there is one; none: carry no plan"
)


@dataclass(frozen=True)
class LabelStudioKeys(SourceKeys):
    """source=label-studio: a Label Studio project's export (a file, or pulled through its API)."""

    source: ClassVar[str] = "label-studio"
    rules: ClassVar[tuple[KeyRule, ...]] = (
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
    data: Path = _needed(
        "the dataset folder the tasks were made from", path(), "pass data=DIR, the folder the tasks were made from."
    )
    export: Path | None = optional("the project's JSON export (Label Studio: Export -> JSON)")
    url: str | None = optional(
        "pull the export from this Label Studio server instead, e.g. http://localhost:8080", http_url()
    )
    project: int | None = optional("with url=: the project's id (the number in its address)", integer(1))
    token_env: str = setting(
        "LABEL_STUDIO_API_KEY", "with url=: environment variable holding the API token (never written)", env_name()
    )
    timeout: float = setting(60, "with url=: seconds to wait for each request", number(above=0))
    judge_map: Path | None = optional(
        "CSV annotator,judge_id renaming reviewers (email or user id); null: judge_id = email"
    )
    plan: str | None = optional(PLAN_DOC)


@dataclass(frozen=True)
class SheetKeys(SourceKeys):
    """source=sheet: a filled labelling sheet."""

    source: ClassVar[str] = "sheet"
    data: Path = _needed(
        "the dataset folder the sheet was made from", path(), "pass data=DIR, the folder the sheet was made from."
    )
    sheet: Path = _needed(
        "the filled sheet (rows with an answer are read, the rest skipped)",
        path(),
        "pass sheet=FILLED.csv (the sheet with its answer column filled).",
    )
    plan: str | None = optional(PLAN_DOC)


@dataclass(frozen=True)
class TraceKeys(SourceKeys):
    """What every trace source takes: which conversations, how they are named, the rubric and the labels."""

    conversation_key: str | None = optional(
        "the span or resource attribute that names a conversation; null: the conventions' own "
        "(gen_ai.conversation.id, session.id, MLflow's mlflow.trace.session)",
        text(optional=True),
    )
    role: str | None = optional(
        "the chatbot's role for every conversation; null: its system message or instructions", text(optional=True)
    )
    role_from: str | None = optional(
        "a span or resource attribute holding the chatbot's role (instead of the system message)", text(optional=True)
    )
    roles: Path | None = optional("CSV text,role: a short name per role whose prompt is or holds `text` (kept as role)")
    since: str | None = optional(
        "only conversations that started at or after this time (ISO 8601, e.g. 2026-11-01)", text(optional=True)
    )
    until: str | None = optional("only conversations that started before this time (ISO 8601)", text(optional=True))
    service: str | None = optional("only spans of this service.name", text(optional=True))
    sample: int | None = optional(
        "a random sample of this many conversations (seeded by seed=)", integer(1, optional=True)
    )
    seed: int = setting(0, "seeds sample=", integer(0, 2**32 - 1))
    rubric_file: Path | None = optional(
        "the rubric.yaml written into out= (reviewers' labels are checked against it); null: the packaged "
        "role-adherence rubric"
    )


@dataclass(frozen=True)
class OtelKeys(TraceKeys):
    """source=otel: OTLP JSON files."""

    source: ClassVar[str] = "otel"
    files: str = _needed(
        "OTLP JSON traces as an OpenTelemetry Collector's file exporter writes them (a file, a folder of them, "
        "or a glob)",
        path(),
        f"pass files= (an OTLP JSON export, a folder or a glob); see {TRACES}.",
    )


LABEL_MAP_DOC = (
    "CSV name,question_id mapping feedback or annotation names to rubric questions; null: names equal to a "
    "question id (or role_rubric/QUESTION) are labels"
)


@dataclass(frozen=True)
class MlflowKeys(TraceKeys):
    """source=mlflow: an MLflow tracking server's experiment (traces and HUMAN feedback)."""

    source: ClassVar[str] = "mlflow"
    tracking_uri: str = _needed(
        "the tracking server, e.g. http://localhost:5000",
        http_url(),
        f"pass tracking_uri= and experiment=; see {TRACES}.",
    )
    experiment: str = _needed("the experiment's name", text(), f"pass tracking_uri= and experiment=; see {TRACES}.")
    token_env: str = setting(
        "MLFLOW_TRACKING_TOKEN",
        "environment variable holding the bearer token (MLflow's own; MLFLOW_TRACKING_USERNAME and "
        "MLFLOW_TRACKING_PASSWORD are read too); never written",
        env_name(),
    )
    timeout: float = setting(60, "seconds to wait for each request", number(above=0))
    label_map: Path | None = optional(LABEL_MAP_DOC)


@dataclass(frozen=True)
class PhoenixKeys(TraceKeys):
    """source=phoenix: a Phoenix server's project (spans and HUMAN annotations)."""

    source: ClassVar[str] = "phoenix"
    url: str = _needed(
        "the Phoenix server, e.g. http://localhost:6006", http_url(), f"pass url= and project=; see {TRACES}."
    )
    project: str = _needed("the project's name", text(), f"pass url= and project=; see {TRACES}.")
    token_env: str = setting(
        "PHOENIX_API_KEY",
        "environment variable holding the API key (Phoenix with authentication on; optional by default); never written",
        env_name(),
    )
    timeout: float = setting(60, "seconds to wait for each request", number(above=0))
    label_map: Path | None = optional(LABEL_MAP_DOC)


SOURCE_KEYS: dict[str, type[SourceKeys]] = {
    cls.source: cls for cls in (LlmRubricKeys, LabelStudioKeys, SheetKeys, OtelKeys, MlflowKeys, PhoenixKeys)
}
"""source= -> its settings, in the order --help lists them (calibration/connectors/sources.py registers the
same names; tests/calibration/test_sources.py checks they agree)."""
