"""The schema of `publish`: results written back where the traces are (MLflow, Phoenix, OpenTelemetry).

Each target's own keys are one dataclass (`OtelKeys`, `MlflowKeys`, `PhoenixKeys`: each key's type, default and
description, declared once), the target's shape: the target receives that object (calibration/connectors/
targets.py). The command line stays flat (`publish target=mlflow tracking_uri=URL`): `Publish` declares each
target key with `target_key`, which takes the declaration from the target classes, and refuses a key the chosen
target does not take, naming the keys it does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from calibration.schema.base import Command, KeyRule, excludes, given, needs
from calibration.schema.keys import OVERWRITE, PROGRESS, optional, required
from rubric.config.settings import choice, default_of, env_name, http_url, integer, number, setting, text


@dataclass(frozen=True)
class TargetKeys:
    """What every target takes."""

    publishes: ClassVar[tuple[str, ...]]
    """The inputs it writes (scores, estimate, cv, disagreements): the keys of `Publish` that name them."""
    timeout: float = setting(10, "seconds to wait for each request", number(above=0))


@dataclass(frozen=True)
class OtelKeys(TargetKeys):
    """target=otel: OpenTelemetry GenAI `gen_ai.evaluation.result` events, to a file or an OTLP/HTTP endpoint
    (headers such as an API key from OTEL_EXPORTER_OTLP_HEADERS)."""

    publishes = ("scores", "estimate")
    out: Path | None = optional("the OTLP JSON file to write")
    endpoint: str | None = optional(
        "an OTLP/HTTP logs endpoint to post to, e.g. http://localhost:4318/v1/logs", http_url()
    )


@dataclass(frozen=True)
class MlflowKeys(TargetKeys):
    """target=mlflow: feedback on the traces, runs in an experiment (the token from MLFLOW_TRACKING_TOKEN, read
    by MLflow's client)."""

    publishes = ("scores", "estimate", "cv", "disagreements")
    tracking_uri: str | None = optional(
        "the tracking server, e.g. http://localhost:5000 (token: MLFLOW_TRACKING_TOKEN)", http_url()
    )
    experiment: str | None = optional(
        "the experiment of the estimate= and cv= runs (default: the one the traces were imported from)",
        text(optional=True),
    )
    run_name: str | None = optional("the run's name (default: the folder's)", text(optional=True))


@dataclass(frozen=True)
class PhoenixKeys(TargetKeys):
    """target=phoenix: span and session annotations (the API key from the variable token_env= names)."""

    publishes = ("scores", "disagreements")
    url: str | None = optional("the Phoenix server, e.g. http://localhost:6006", http_url())
    token_env: str = setting(
        "PHOENIX_API_KEY", "environment variable holding the API key (never written anywhere)", env_name()
    )


TARGET_KEYS: dict[str, type[TargetKeys]] = {"otel": OtelKeys, "mlflow": MlflowKeys, "phoenix": PhoenixKeys}
"""target= -> its keys, in the order --help lists the targets (calibration/connectors/targets.py registers the
same names: tests/publish/test_publish_targets.py)."""

COMMON = {f.name for f in dataclasses.fields(TargetKeys)}
"""The keys every target takes (no target= prefix in their description)."""


def _fields(cls: type) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls)}


def takers(key: str) -> list[str]:
    """The targets that take `key`, in TARGET_KEYS's order."""
    return [name for name, cls in TARGET_KEYS.items() if key in _fields(cls)]


def target_key(key: str) -> Any:
    """The flat `publish` key `key` as the targets declare it: their description (prefixed with the targets
    that take it) and rule, and their default where they agree; where their defaults differ, null, which
    means each target's own (`Publish.keys`)."""
    names = takers(key)
    fields = [_fields(TARGET_KEYS[n])[key] for n in names]
    defaults = {repr(default_of(f)) for f in fields}
    doc = fields[0].metadata["doc"]
    if len(defaults) > 1:
        doc += (
            " (default: " + ", ".join(f"target={n}: {default_of(f)}" for n, f in zip(names, fields, strict=True)) + ")"
        )
    if key not in COMMON:
        doc = f"target={'|'.join(names)}: {doc}"
    default = default_of(fields[0]) if len(defaults) == 1 else None
    return setting(default, doc, fields[0].metadata["rule"], shared=True)


def _given_here(values: Mapping[str, Any], key: str) -> bool:
    """Whether a target key is set to something other than its flat default."""
    default = next(default_of(f) for f in dataclasses.fields(Publish) if f.name == key)
    return given(values, key) and values.get(key) != default


def _not_taken(target: str, key: str) -> KeyRule:
    """target=`target` refuses `key`, another target's key, naming the keys it takes."""
    own = [f.name for f in dataclasses.fields(TARGET_KEYS[target])]
    return KeyRule(
        lambda v: v.get("target") == target and _given_here(v, key),
        f"target={target} does not take {key}= (a key of target={'|'.join(takers(key))}); its keys are "
        + ", ".join(f"{k}=" for k in own)
        + ".",
        f"leave {key}= out, or pass the target that takes it.",
        f"target={target} takes its own keys only: " + ", ".join(f"{k}=" for k in own),
    )


def _foreign_key_rules() -> tuple[KeyRule, ...]:
    every = dict.fromkeys(k for cls in TARGET_KEYS.values() for k in _fields(cls))
    return tuple(_not_taken(t, k) for t, cls in TARGET_KEYS.items() for k in every if k not in _fields(cls))


@dataclass(frozen=True)
class Publish(Command):
    """role-rubric publish target=otel scores=SCORES.csv out=EVALUATIONS.jsonl   (or endpoint=http://HOST:4318/v1/logs)
    role-rubric publish target=mlflow scores=SCORES.csv tracking_uri=URL   (estimate=DIR, cv=DIR: a run)
    role-rubric publish target=phoenix scores=SCORES.csv url=URL
    role-rubric publish target=mlflow|phoenix disagreements=COMPARE_DIR tracking_uri=URL|url=URL
    Writes what `score` computed for conversations imported from traces back beside those traces: one value per
    judged turn on the span of its reply (MLflow feedback, Phoenix span annotation, OTel gen_ai.evaluation.result
    event) and one per conversation (MLflow feedback on its first trace, Phoenix annotation of its `session.id`).
    Publishing again updates the same values; an interrupted publish resumes. target=mlflow also logs an
    `estimate` output or a `cv` output as a run. disagreements= (compare-judges' out= folder) puts each ranked
    row where a calibrated judge and a reviewer disagree, and each turn whose reviewers disagree with each other
    (reviewer_disagreements.csv), on its turn's span, for the reviewers to open.
    Each target takes its own keys (below: target=NAME: ...). Tokens come from the environment
    (MLFLOW_TRACKING_TOKEN, token_env=, OTEL_EXPORTER_OTLP_HEADERS) and are never printed: docs/how-to/traces.md."""

    name = "publish"
    summary = "calibrated scores, release estimates and agreement back to MLflow, Phoenix or OpenTelemetry"
    rules = (
        needs("target", "tracking_uri", value="mlflow", fix="pass tracking_uri=http://HOST:5000 (the MLflow server)."),
        needs("target", "url", value="phoenix", fix="pass url=http://HOST:6006 (the Phoenix server)."),
        KeyRule(
            lambda v: v.get("target") == "phoenix" and not (given(v, "scores") or given(v, "disagreements")),
            "target=phoenix needs scores= or disagreements=.",
            "pass scores= the out= file of `role-rubric score` (disagreements=: the out= folder of compare-judges).",
            "target=phoenix needs scores= or disagreements=",
        ),
        KeyRule(
            lambda v: v.get("target") == "otel" and not (given(v, "scores") or given(v, "estimate")),
            "target=otel needs scores= or estimate=.",
            "pass scores= the out= file of `role-rubric score` (estimate=: the out= folder of `estimate`).",
            "target=otel needs scores= or estimate=",
        ),
        excludes(
            "out", "endpoint", fix="target=otel writes a file (out=) or posts to an endpoint (endpoint=): pass one."
        ),
        KeyRule(
            lambda v: v.get("target") == "otel" and not (given(v, "out") or given(v, "endpoint")),
            "target=otel needs out= or endpoint=.",
            "pass out=evaluations.jsonl, or endpoint=http://HOST:4318/v1/logs.",
            "target=otel needs out= or endpoint=",
        ),
        KeyRule(
            lambda v: (
                v.get("target") == "mlflow"
                and not any(given(v, k) for k in ("scores", "estimate", "cv", "disagreements"))
            ),
            "target=mlflow needs scores=, estimate=, cv= or disagreements=.",
            "pass scores= the out= file of `role-rubric score` (estimate=, cv=, disagreements=: the out= folders of "
            "estimate, cv and compare-judges).",
            "target=mlflow needs scores=, estimate=, cv= or disagreements=",
        ),
        KeyRule(
            lambda v: v.get("target") != "mlflow" and given(v, "cv"),
            "cv= is published as an MLflow run.",
            "pass target=mlflow tracking_uri=URL with it.",
            "cv= needs target=mlflow",
        ),
        KeyRule(
            lambda v: v.get("target") == "phoenix" and given(v, "estimate"),
            "estimate= is published to MLflow (a run) or OpenTelemetry (events), not to Phoenix.",
            "pass target=mlflow or target=otel with it.",
            "estimate= needs target=mlflow or target=otel",
        ),
        KeyRule(
            lambda v: v.get("target") == "otel" and given(v, "disagreements"),
            "disagreements= is published to MLflow (feedback on each trace) or Phoenix (span annotations), not as "
            "OpenTelemetry events.",
            "pass target=mlflow tracking_uri=URL or target=phoenix url=URL with it.",
            "disagreements= needs target=mlflow or target=phoenix",
        ),
        needs("top", "disagreements", fix="pass disagreements= the out= folder of compare-judges, or leave top= out."),
        *_foreign_key_rules(),
    )
    target: str = required("otel | mlflow | phoenix", choice(*TARGET_KEYS))
    scores: Path | None = optional("the out= of `role-rubric score` (its _turns.csv and _shift.json beside it)")
    conversations: Path | None = optional(
        "the conversations.jsonl that `score` read; default: the one the scores record"
    )
    model: Path | None = optional("the calibrator that `score` used; default: the one the scores record (checked)")
    estimate: Path | None = optional(
        "the out= folder of `role-rubric estimate`: target=mlflow -> one run; target=otel -> the release's rate "
        "and interval as events"
    )
    cv: Path | None = optional("target=mlflow: the out= folder of `role-rubric cv` -> one run")
    disagreements: Path | None = optional(
        "the out= folder of `role-rubric compare-judges` (or its disagreements.csv alone): each row of "
        "disagreements.csv and of reviewer_disagreements.csv on its turn's span (target=mlflow: feedback; "
        "target=phoenix: span annotation); rows without trace ids are counted and named"
    )
    top: int | None = optional(
        "disagreements=: the first N rows of each LLM judge by rank, and of the reviewers' list (default: every row)",
        integer(1, optional=True),
    )
    out: Path | None = target_key("out")
    overwrite: bool = OVERWRITE()
    endpoint: str | None = target_key("endpoint")
    tracking_uri: str | None = target_key("tracking_uri")
    experiment: str | None = target_key("experiment")
    run_name: str | None = target_key("run_name")
    url: str | None = target_key("url")
    token_env: str = target_key("token_env")
    timeout: float = target_key("timeout")
    progress: bool = PROGRESS()

    def keys(self) -> TargetKeys:
        """The chosen target's own keys (null where its own default differs from another target's: its own)."""
        cls = TARGET_KEYS[self.target]
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None})
