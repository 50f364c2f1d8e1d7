"""The one shape every trace source is read into: a `Span` with its attributes decoded to plain Python values.

OTLP JSON, MLflow's traces and Phoenix's spans differ in how they spell a span; the readers (otlp.py here,
calibration/connectors/mlflow/source.py, calibration/connectors/phoenix/source.py: each a `SpanReader` of
calibration/connectors/sources.py) turn each into a `Span`, so that reading messages (messages.py) and
rebuilding conversations (assemble.py) are written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """An event on a span (the older GenAI conventions put each message on one: `gen_ai.user.message`)."""

    name: str
    time_ns: int
    attributes: Mapping[str, Any]


EVENTS_ONLY = "(log records)"
"""The name of a `Span` record that carries only events of the span with the same span_id: OTLP log
records tied to a span (older GenAI instrumentations log each message as an event record, apart from the
span). assemble.py adds them to that span's events."""


@dataclass(frozen=True, slots=True)
class Span:
    """One span, as the source stored it.

    Ids are lower-case hex as OTLP JSON spells them (trace 32 characters, span 16); `attributes` and
    `resource` map dotted keys to values decoded from OTLP's AnyValue (str, int, float, bool, list, dict).
    `where` names the span's origin for error messages ("export.jsonl line 12", "MLflow trace tr-...").
    `source_ids` holds the source's own ids where they differ from OTLP's (MLflow's request id "tr-..."),
    so that results can be written back to the same trace.
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Any]
    resource: Mapping[str, Any] = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    where: str = ""
    source_ids: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Annotation:
    """A reviewer's answer stored beside a trace: MLflow feedback whose source is HUMAN, or a Phoenix span
    or session annotation whose annotator kind is HUMAN.

    `span_id` is None for an annotation on a whole trace; `session_id` is set (and both ids None) for an
    annotation on a whole conversation. `value` is as stored (number, bool or text); `reviewer` is the
    source's own name for who gave it (MLflow `source_id`, Phoenix identifier or user).
    """

    name: str
    value: Any
    reviewer: str
    trace_id: str | None
    span_id: str | None
    session_id: str | None = None
    where: str = ""
