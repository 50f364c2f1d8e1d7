"""The schema of `publish`: results written back where the traces are (MLflow, Phoenix, OpenTelemetry)."""

from __future__ import annotations

from dataclasses import dataclass

from calibration.schema.base import Command, KeyRule, excludes, given, needs
from calibration.schema.keys import OVERWRITE, PROGRESS, required
from rubric.config.settings import choice, env_name, http_url, number, path, setting, text


@dataclass(frozen=True)
class Publish(Command):
    """role-rubric publish target=otel scores=SCORES.csv out=EVALUATIONS.jsonl   (or endpoint=http://HOST:4318/v1/logs)
    role-rubric publish target=mlflow scores=SCORES.csv tracking_uri=URL   (estimate=DIR, cv=DIR: a run)
    role-rubric publish target=phoenix scores=SCORES.csv url=URL
    Writes what `score` computed for conversations imported from traces back beside those traces: one value per
    judged turn on the span of its reply (MLflow feedback, Phoenix span annotation, OTel gen_ai.evaluation.result
    event) and one per conversation (MLflow feedback on its first trace, Phoenix annotation of its `session.id`).
    Publishing again updates the same values; an interrupted publish resumes. target=mlflow also logs an
    `estimate` output or a `cv` output as a run. Tokens come from the environment (MLFLOW_TRACKING_TOKEN,
    token_env=, OTEL_EXPORTER_OTLP_HEADERS) and are never printed: docs/how-to/traces.md."""

    name = "publish"
    summary = "calibrated scores, release estimates and agreement back to MLflow, Phoenix or OpenTelemetry"
    rules = (
        needs("target", "tracking_uri", value="mlflow", fix="pass tracking_uri=http://HOST:5000 (the MLflow server)."),
        needs("target", "url", value="phoenix", fix="pass url=http://HOST:6006 (the Phoenix server)."),
        needs("target", "scores", value="phoenix", fix="pass scores= the out= file of `role-rubric score`."),
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
            lambda v: v.get("target") == "mlflow" and not any(given(v, k) for k in ("scores", "estimate", "cv")),
            "target=mlflow needs scores=, estimate= or cv=.",
            "pass scores= the out= file of `role-rubric score` (estimate= and cv=: their out= folders).",
            "target=mlflow needs scores=, estimate= or cv=",
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
    )
    target: str = required("otel | mlflow | phoenix", choice("otel", "mlflow", "phoenix"))
    scores: str | None = setting(
        None, "the out= of `role-rubric score` (its _turns.csv and _shift.json beside it)", path(optional=True)
    )
    conversations: str | None = setting(
        None, "the conversations.jsonl that `score` read; default: the one the scores record", path(optional=True)
    )
    model: str | None = setting(
        None, "the calibrator that `score` used; default: the one the scores record (checked)", path(optional=True)
    )
    estimate: str | None = setting(
        None,
        "the out= folder of `role-rubric estimate`: target=mlflow -> one run; target=otel -> the release's rate "
        "and interval as events",
        path(optional=True),
    )
    cv: str | None = setting(None, "target=mlflow: the out= folder of `role-rubric cv` -> one run", path(optional=True))
    out: str | None = setting(None, "target=otel: the OTLP JSON file to write", path(optional=True))
    overwrite: bool = OVERWRITE()
    endpoint: str | None = setting(
        None, "target=otel: an OTLP/HTTP logs endpoint to post to, e.g. http://localhost:4318/v1/logs", http_url()
    )
    tracking_uri: str | None = setting(
        None,
        "target=mlflow: the tracking server, e.g. http://localhost:5000 (token: MLFLOW_TRACKING_TOKEN)",
        http_url(),
    )
    experiment: str | None = setting(
        None,
        "target=mlflow: the experiment of the estimate= and cv= runs (default: the one the traces were imported from)",
        text(optional=True),
    )
    run_name: str | None = setting(None, "target=mlflow: the run's name (default: the folder's)", text(optional=True))
    url: str | None = setting(None, "target=phoenix: the Phoenix server, e.g. http://localhost:6006", http_url())
    token_env: str = setting(
        "PHOENIX_API_KEY",
        "target=phoenix: environment variable holding the API key (never written anywhere)",
        env_name(),
    )
    timeout: float = setting(10, "seconds to wait for each request", number(above=0))
    progress: bool = PROGRESS()
