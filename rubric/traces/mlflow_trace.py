"""One MLflow trace (as MLflow's client returns it: `trace.info`, `trace.data.spans`) -> `Span`s, and the
reviewers' `Annotation`s on it. calibration/connectors/mlflow/source.py reads an experiment's traces with it; the MLflow scorers
(calibration/connectors/mlflow/scorer.py) read the traces they are given with it, so both rebuild a conversation
alike.

Conversations are MLflow sessions: the trace metadata `mlflow.trace.session` (set by
`mlflow.update_current_trace(session_id=...)`, or taken by the server from an OTLP span's `session.id` /
`gen_ai.conversation.id`) is put on each span of the trace as the attribute `mlflow.trace.session`, one of
the conversation keys assemble.py tries. The trace's other tags and metadata (those not under `mlflow.`, and
`service.name` of spans that came over OTLP) are the spans' `resource`, for `conversation_key=`,
`role_from=` and `service=`.

Reviewers' labels are the traces' feedback whose source type is HUMAN (LLM_JUDGE and CODE feedback, and
expectations, are not labels); a feedback overridden by a later one is left out (MLflow marks it invalid).
The reviewer is the source's `source_id`. A feedback whose metadata names a session (`mlflow.trace.session`,
where MLflow puts session-level assessments, on the session's first trace) is an annotation of the whole
conversation.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import re
from typing import Any

from rubric.errors import InputError
from rubric.traces.spans import Annotation, Span, SpanEvent

SESSION_KEY = "mlflow.trace.session"
"""MLflow's trace metadata naming the session (the conversation), and the span attribute it becomes."""

HUMAN = "HUMAN"

_TR_ID = re.compile(r"tr-([0-9a-f]{32})")


def spans_of_trace(trace: Any, annotations: list[Annotation] | None = None) -> list[Span]:
    """The spans of one MLflow trace, OTLP's trace id on each, MLflow's in `source_ids["mlflow_trace_id"]`, its
    session as the attribute SESSION_KEY and its other tags and metadata as the resource. annotations: a list
    the trace's HUMAN feedback is appended to (None: not read)."""
    info = trace.info
    mlflow_id = str(info.trace_id)
    where = f"MLflow trace {mlflow_id}"
    metadata = dict(info.trace_metadata or {})
    session = metadata.get(SESSION_KEY)
    resource = {k: v for k, v in {**dict(info.tags or {}), **metadata}.items() if not str(k).startswith("mlflow.")}
    otlp_id = _otlp_trace_id(mlflow_id, trace.data.spans, where)
    source_ids = {"mlflow_trace_id": mlflow_id}
    spans = []
    for span in trace.data.spans:
        attributes = dict(span.attributes or {})
        if session:
            attributes[SESSION_KEY] = session
        start = int(span.start_time_ns or 0)
        spans.append(
            Span(
                trace_id=otlp_id,
                span_id=str(span.span_id),
                parent_span_id=str(span.parent_id) if span.parent_id else None,
                name=str(span.name or ""),
                start_ns=start,
                end_ns=int(span.end_time_ns or start),
                attributes=attributes,
                resource=resource,
                events=tuple(
                    SpanEvent(str(e.name), int(e.timestamp or 0), dict(e.attributes or {})) for e in span.events
                ),
                where=where,
                source_ids=source_ids,
            )
        )
    if annotations is not None:
        annotations.extend(_human_feedback(info, otlp_id, where))
    return spans


def _human_feedback(info: Any, otlp_id: str, where: str) -> list[Annotation]:
    """The trace's feedback given by people, as annotations of the trace, of one of its spans, or of its session."""
    from mlflow.entities import Feedback

    found = []
    for assessment in info.assessments or []:
        if not isinstance(assessment, Feedback):
            continue  # an expectation (a ground truth), not a reviewer's answer
        source = assessment.source
        if source is None or str(source.source_type).upper() != HUMAN:
            continue
        if assessment.valid is False or assessment.error is not None or assessment.value is None:
            continue  # overridden by a later value, or no value at all
        here = f"{where} feedback {assessment.assessment_id}"
        session = (assessment.metadata or {}).get(SESSION_KEY)
        reviewer = str(source.source_id or "")
        if session:
            found.append(Annotation(assessment.name, assessment.value, reviewer, None, None, str(session), here))
        else:
            span_id = str(assessment.span_id) if assessment.span_id else None
            found.append(Annotation(assessment.name, assessment.value, reviewer, otlp_id, span_id, where=here))
    return found


def _otlp_trace_id(mlflow_id: str, spans: list[Any], where: str) -> str:
    """OTLP's trace id (32 hex) of an MLflow trace: its "tr-" id spells it, else its spans carry it."""
    match = _TR_ID.fullmatch(mlflow_id)
    if match:
        return match.group(1)
    for span in spans[:1]:
        raw = span.to_dict().get("trace_id")
        with contextlib.suppress(binascii.Error, ValueError, TypeError):
            decoded = base64.b64decode(str(raw), validate=True)
            if len(decoded) == 16:
                return decoded.hex()
    raise InputError(f"{where} has no OpenTelemetry trace id.", fix="check tracking_uri= (an MLflow server).")
