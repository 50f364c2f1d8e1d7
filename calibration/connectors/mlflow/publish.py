"""target=mlflow: the calibrated scores as feedback on the traces, a release estimate and the reviewers'
agreement as runs, on an MLflow tracking server (the mlflow-skinny client).

Per judged turn, one feedback on the turn's trace, attached to the span of the reply: name
`role_rubric/adherence`, value the calibrated adherence, source LLM_JUDGE with the source id
`role-rubric/model-<checksum>`, a one-line rationale, and metadata (each question's calibrated and raw expected
answer, the shift check, the judge). Per conversation, one feedback `role_rubric/session_adherence` where MLflow
keeps session assessments: on the session's first trace (by request time), with `mlflow.trace.session` in its
metadata, as `mlflow.genai.evaluate` logs a session-level scorer's. A value already there from the same source
is updated in place (or left alone when equal), so publishing twice gives the same state and a stopped
publish resumes by running it again. A value there from another role-rubric model (a calibrator since
retrained) is overridden the way MLflow overrides feedback: the new one is logged with `overrides` naming it,
and MLflow marks the old one invalid and keeps it as the new one's history, so each turn and conversation
has one current score. Every trace is looked up before anything is written: traces deleted
since the import are one line, with nothing published.

`estimate=DIR` and `cv=DIR` become runs (mlflow_runs.py).

The token (MLFLOW_TRACKING_TOKEN, or a user and password in MLFLOW_TRACKING_USERNAME/PASSWORD) is read by the
client from the environment and never printed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.connectors.mlflow.publish_client import connected, server_error, tracing
from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, SessionScore, TurnScore
from calibration.publish.state import mask_url
from rubric.errors import InputError

SESSION_KEY = "mlflow.trace.session"
MODEL_SOURCE_PREFIX = "role-rubric/model-"
"""The source id of every role-rubric model's feedback (results.py ModelInfo.source_id): another model's is superseded."""


def publish(
    tracking_uri: str,
    *,
    scored: Scored | None = None,
    estimate: str | Path | None = None,
    cv: str | Path | None = None,
    experiment: str | None = None,
    run_name: str | None = None,
    model: str | Path | None = None,
    timeout: float = 10.0,
    say: Callable[[str], None] = print,
    progress: bool = False,
) -> dict[str, Any]:
    """The scores as feedback, an estimate= and a cv= folder as runs (experiment: the runs'; default the one
    the conversations were imported from; model: the calibrator an estimate used, its checksum a param;
    progress: a bar or status lines over the traces looked up and the feedbacks written)."""
    from calibration.connectors.mlflow.publish_runs import publish_cv, publish_estimate

    uri = str(tracking_uri).rstrip("/")
    out: dict[str, Any] = {}
    with connected(uri, float(timeout)):
        if scored is not None:
            out["feedback"] = publish_scores(uri, scored, say=say, progress=progress)
        if estimate is not None:
            out["estimate_run"] = publish_estimate(
                uri, Path(estimate), experiment=experiment, run_name=run_name, model=model, scored=scored, say=say
            )
        if cv is not None:
            out["cv_run"] = publish_cv(uri, Path(cv), experiment=experiment, run_name=run_name, say=say)
    return out


# ---- per-turn and session feedback -------------------------------------------------------------------------


def trace_id_of(t: TurnScore) -> str:
    """The MLflow trace of a turn: the one it was imported from, else the id MLflow gives an OTel trace."""
    return t.mlflow_trace_id or f"tr-{t.trace_id}"


def publish_scores(uri: str, scored: Scored, *, say: Callable[[str], None], progress: bool = False) -> dict[str, int]:
    """Log or update one feedback per turn and per conversation: counts of created, updated, unchanged."""
    from mlflow.entities import AssessmentSource, Feedback

    from rubric.progress import progress_iter

    client = tracing(uri)
    infos = _trace_infos(client, uri, scored, progress=progress)
    source = AssessmentSource(source_type="LLM_JUDGE", source_id=scored.model.source_id)
    counts = {"created": 0, "updated": 0, "unchanged": 0, "superseded": 0}
    for t in progress_iter(scored.turns, progress, desc="publish: turn feedback", unit="turn"):
        tid = trace_id_of(t)
        wanted = Feedback(
            name=EVALUATION_NAME,
            value=t.adherence,
            source=source,
            rationale=scored.rationale(t),
            metadata=scored.metadata(t),
            span_id=t.span_id,
        )
        same_span = lambda a, t=t: a.span_id == t.span_id  # noqa: E731
        found = _existing(infos[tid], EVALUATION_NAME, source.source_id, same_span)
        counts[_put(client, uri, tid, wanted, found, _earlier_model(infos[tid], wanted, same_span))] += 1
    for s in progress_iter(scored.sessions, progress, desc="publish: conversation feedback", unit="conversation"):
        if not s.turns:
            continue
        tid = _first_trace(s, infos)
        metadata = {**scored.session_metadata(s), "success": str(s.success).lower(), SESSION_KEY: s.conversation_id}
        wanted = Feedback(
            name=SESSION_NAME,
            value=s.score,
            source=source,
            rationale=scored.session_rationale(s),
            metadata=metadata,
        )
        same_session = lambda a, s=s: (a.metadata or {}).get(SESSION_KEY) == s.conversation_id  # noqa: E731
        found = _existing(infos[tid], SESSION_NAME, source.source_id, same_session)
        counts[_put(client, uri, tid, wanted, found, _earlier_model(infos[tid], wanted, same_session))] += 1
    superseded = counts.pop("superseded")
    counts["created"] += superseded  # a superseding feedback is a new one too
    say(
        f"publish: {len(scored.turns)} turn and {len(scored.sessions)} session feedbacks on {mask_url(uri)}: "
        f"{counts['created']} created, {counts['updated']} updated, {counts['unchanged']} unchanged "
        f"(source {scored.model.source_id})"
        + (
            f"; {superseded} of the created override an earlier model's, kept by MLflow as their history"
            if superseded
            else ""
        )
    )
    counts["superseded"] = superseded
    return counts


def _trace_infos(client: Any, uri: str, scored: Scored, *, progress: bool = False) -> dict[str, Any]:
    """Every trace of the scores, looked up before anything is written (a deleted one stops the publish)."""
    from mlflow.exceptions import MlflowException

    from rubric.progress import progress_iter

    infos, missing = {}, []
    ids = dict.fromkeys(trace_id_of(t) for t in scored.turns)
    for tid in progress_iter(ids, progress, desc="publish: looking up traces", unit="trace"):
        try:
            infos[tid] = client.get_trace_info(tid)
        except MlflowException as exc:
            if exc.error_code not in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND", "INVALID_PARAMETER_VALUE"):
                raise server_error(uri, exc, "a trace look-up") from None
            missing.append(tid)
    if missing:
        raise InputError(
            f"{len(missing)} of the {len(infos) + len(missing)} traces of these scores are not on {mask_url(uri)} "
            f"(deleted since the import, or another server): {', '.join(missing[:3])}"
            + (", ..." if len(missing) > 3 else "")
            + "; nothing was published.",
            path=scored.scores,
            fix="publish to the server the conversations were imported from, or import and score them again.",
        )
    return infos


def _existing(info: Any, name: str, source_id: str, same: Callable[[Any], bool]) -> Any | None:
    """This source's valid assessment `name` on the trace that `same` picks, if there is one."""
    for a in info.assessments or []:
        if (
            a.name == name
            and a.source is not None
            and a.source.source_id == source_id
            and a.valid is not False
            and same(a)
        ):
            return a
    return None


def _earlier_model(info: Any, wanted: Any, same: Callable[[Any], bool]) -> Any | None:
    """The current assessment of the same name and place from another role-rubric model (the latest, where
    several are still valid from before publish overrode them), if any."""
    others = [
        a
        for a in info.assessments or []
        if a.name == wanted.name
        and a.source is not None
        and str(a.source.source_id).startswith(MODEL_SOURCE_PREFIX)
        and a.source.source_id != wanted.source.source_id
        and a.valid is not False
        and same(a)
    ]
    return max(others, key=lambda a: a.create_time_ms or 0, default=None)


def _put(client: Any, uri: str, trace_id: str, wanted: Any, found: Any | None, earlier: Any | None = None) -> str:
    """Create, update or leave one assessment (a new one overriding `earlier`, another model's): which it was."""
    from mlflow.exceptions import MlflowException

    try:
        if found is None and earlier is not None:
            wanted.overrides = earlier.assessment_id  # MLflow marks `earlier` invalid and keeps it as history
            client.log_assessment(trace_id, wanted)
            return "superseded"
        if found is None:
            client.log_assessment(trace_id, wanted)
            return "created"
        same = (
            found.value == wanted.value
            and found.rationale == wanted.rationale
            and (found.metadata or {}) == (wanted.metadata or {})
        )
        if same:
            return "unchanged"
        client.update_assessment(trace_id=trace_id, assessment_id=found.assessment_id, assessment=wanted)
        return "updated"
    except MlflowException as exc:
        raise server_error(uri, exc, f"a feedback on trace {trace_id}") from None


def _first_trace(s: SessionScore, infos: dict[str, Any]) -> str:
    """The session's first trace by request time: where MLflow keeps a session's assessments."""
    ids = list(dict.fromkeys(trace_id_of(t) for t in s.turns))
    return min(ids, key=lambda tid: (infos[tid].request_time or 0, ids.index(tid)))
