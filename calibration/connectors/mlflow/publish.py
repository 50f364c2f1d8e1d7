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

`estimate=DIR` and `cv=DIR` become runs (publish_runs.py); compare-judges' `disagreements=` rows feedback on
their turns' spans (publish_disagreements.py). `MlflowTarget` is this module's `PublishTarget`
(calibration/connectors/targets.py).

The token (MLFLOW_TRACKING_TOKEN, or a user and password in MLFLOW_TRACKING_USERNAME/PASSWORD) is read by the
client from the environment and never printed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.connectors.mlflow.publish_client import existing, probe, put, trace_infos, tracing
from calibration.connectors.targets import Job, PublishTarget
from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, SessionScore, TurnScore
from calibration.publish.state import mask_url
from calibration.schema.commands_publish import MlflowKeys
from rubric.errors import InputError

SESSION_KEY = "mlflow.trace.session"
MODEL_SOURCE_PREFIX = "role-rubric/model-"
"""The source id of every role-rubric model's feedback (results.py ModelInfo.source_id): another model's is superseded."""


class MlflowTarget(PublishTarget[MlflowKeys]):
    """target=mlflow: the scores as feedback, an estimate= and a cv= folder as runs (experiment: the runs';
    default the one the conversations were imported from; the model's checksum a param of an estimate's run),
    compare-judges' disagreements as feedback on their turns' spans; progress: a bar or status lines over the
    traces looked up and the feedbacks written."""

    address_key = "tracking_uri"

    def publish(self, job: Job) -> dict[str, Any]:
        from calibration.connectors.mlflow.publish_disagreements import publish_disagreements
        from calibration.connectors.mlflow.publish_runs import publish_cv, publish_estimate

        keys = self.keys
        uri = str(keys.tracking_uri).rstrip("/")
        no_credentials(uri)
        probe(uri, float(keys.timeout))
        out: dict[str, Any] = {}
        # MLflow's client logs "Response is not a valid JSON object" before it raises: the command says it
        rest = logging.getLogger("mlflow.utils.rest_utils")
        level = rest.level
        rest.setLevel(logging.ERROR)
        try:
            if job.scored is not None:
                out["feedback"] = publish_scores(uri, job.scored, say=self.say, progress=self.progress)
            if job.estimate is not None:
                out["estimate_run"] = publish_estimate(
                    uri, Path(job.estimate), experiment=keys.experiment, run_name=keys.run_name, model=job.model,
                    scored=job.scored, say=self.say,
                )  # fmt: skip
            if job.cv is not None:
                out["cv_run"] = publish_cv(
                    uri, Path(job.cv), experiment=keys.experiment, run_name=keys.run_name, say=self.say
                )
            for rows in job.disagreement_lists():
                out[rows.result_key] = publish_disagreements(uri, rows, say=self.say, progress=self.progress)
        finally:
            rest.setLevel(level)
        return out


def no_credentials(uri: str) -> None:
    """A user and password in tracking_uri= (http://user:pass@host) are refused: MLflow's client reads them
    from its own variables, and on the command line they would stay in the shell's history."""
    from urllib.parse import urlsplit

    parts = urlsplit(str(uri))
    if parts.username is not None or parts.password is not None:
        raise InputError(
            f"tracking_uri= {mask_url(str(uri))} carries a user name or password; publish does not read "
            "credentials from the address.",
            fix="export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) and pass "
            f"tracking_uri={parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}.",
        )


# ---- per-turn and session feedback -------------------------------------------------------------------------


def trace_id_of(t: TurnScore) -> str:
    """The MLflow trace of a turn: the one it was imported from, else the id MLflow gives an OTel trace."""
    return t.mlflow_trace_id or f"tr-{t.trace_id}"


def publish_scores(uri: str, scored: Scored, *, say: Callable[[str], None], progress: bool = False) -> dict[str, int]:
    """Log or update one feedback per turn and per conversation: counts of created, updated, unchanged."""
    from mlflow.entities import AssessmentSource, Feedback

    from rubric.progress import progress_iter

    client = tracing(uri)
    ids = [trace_id_of(t) for t in scored.turns]
    infos = trace_infos(client, uri, ids, what="scores", path=scored.scores, progress=progress)
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
        found = existing(infos[tid], EVALUATION_NAME, scored.model.source_id, same_span)
        counts[put(client, uri, tid, wanted, found, _earlier_model(infos[tid], wanted, same_span))] += 1
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
        found = existing(infos[tid], SESSION_NAME, scored.model.source_id, same_session)
        counts[put(client, uri, tid, wanted, found, _earlier_model(infos[tid], wanted, same_session))] += 1
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


def _first_trace(s: SessionScore, infos: dict[str, Any]) -> str:
    """The session's first trace by request time: where MLflow keeps a session's assessments."""
    ids = list(dict.fromkeys(trace_id_of(t) for t in s.turns))
    return min(ids, key=lambda tid: (infos[tid].request_time or 0, ids.index(tid)))
