"""target=otel: the calibrated scores as OpenTelemetry GenAI `gen_ai.evaluation.result` events.

One event per judged turn, carried by a log record whose trace id and span id are those of the LLM call that
produced the reply (the event's parent, as the GenAI semantic conventions ask), and one per conversation on
its first turn's span. The conventions' attributes (`gen_ai.evaluation.name`, `gen_ai.evaluation.score.value`,
`gen_ai.evaluation.score.label`, `gen_ai.evaluation.explanation`) hold the value; what only role-rubric has
(each question's calibrated expected answer, the judge's own, the model's checksum, the shift check, an
interval where there is one) sits under `role_rubric.*`.

Written as OTLP JSON (one ExportLogsServiceRequest per line, the OTLP protobuf encoder and protobuf's JSON
mapping with hex trace and span ids, as an OpenTelemetry Collector's file exporter writes it) or posted to an
OTLP/HTTP logs endpoint (opentelemetry-exporter-otlp-proto-http; headers such as an API key come from
OTEL_EXPORTER_OTLP_HEADERS / OTEL_EXPORTER_OTLP_LOGS_HEADERS and are never printed). A post that stops midway
resumes: the turns already accepted are recorded in the scores' folder (calibration/publish/state.py).
`OtelTarget` is this module's `PublishTarget` (calibration/connectors/targets.py).
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from calibration.connectors.targets import Job, PublishTarget
from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored
from calibration.publish.state import PublishState, mask_url
from calibration.schema.commands_publish import OtelKeys
from rubric.errors import InputError

RELEASE_NAME = "role_rubric/release_adherence_rate"
"""The name of a release's rate (`estimate`'s), published with its interval."""

EVENT_NAME = "gen_ai.evaluation.result"
BATCH = 512
"""Events per OTLP request (one line of the file, one POST)."""

Event = tuple[str, str | None, str | None, dict[str, Any]]
"""(key, trace id, span id, attributes) of one event (no trace id: a release's, in no trace)."""


def score_events(scored: Scored) -> list[Event]:
    """(key, trace id, span id, attributes) of every event: each turn's, then each conversation's."""
    out: list[Event] = []
    for t in scored.turns:
        attrs = {
            "gen_ai.evaluation.name": EVALUATION_NAME,
            "gen_ai.evaluation.score.value": t.adherence,
            "gen_ai.evaluation.score.label": "adheres" if t.adheres else "violates",
            "gen_ai.evaluation.explanation": scored.rationale(t),
            "gen_ai.conversation.id": t.conversation_id,
            "role_rubric.turn": t.turn,
        }
        attrs |= _common(scored)
        attrs |= {f"role_rubric.expected.{q}": v for q, v in t.expected.items()}
        attrs |= {f"role_rubric.judge_expected.{q}": v for q, v in t.judge_expected.items()}
        out.append((t.key, t.trace_id, t.span_id, attrs))
    for s in scored.sessions:
        if not s.turns:
            continue
        first = s.turns[0]
        attrs = {
            "gen_ai.evaluation.name": SESSION_NAME,
            "gen_ai.evaluation.score.value": s.score,
            "gen_ai.evaluation.score.label": "pass" if s.success else "fail",
            "gen_ai.evaluation.explanation": scored.session_rationale(s),
            "gen_ai.conversation.id": s.conversation_id,
            "role_rubric.turns": len(s.turns),
            "role_rubric.min_adherence": s.min_adherence,
            "role_rubric.violating_turn_indices": s.violating_turns,
        }
        out.append((f"{s.conversation_id}/session", first.trace_id, first.span_id, attrs | _common(scored)))
    return out


def estimate_events(result: dict, *, name: str) -> list[Event]:
    """A release's adherence rate (estimate.json), overall and per role, with its PPI interval: events of the
    release, in no trace (no span to hang them on). name: the release's name (its folder)."""
    level = 1 - float(result.get("alpha", 0.1))
    gate = result.get("gate") or {}
    scopes = [("overall", None, result.get("rate") or {})]
    scopes += [(f"role {role}", role, (b or {}).get("rate") or {}) for role, b in (result.get("by_role") or {}).items()]
    out: list[Event] = []
    for key, role, block in scopes:
        ppi = block.get("ppi") or {}
        if ppi.get("estimate") is None:
            continue
        attrs: dict[str, Any] = {
            "gen_ai.evaluation.name": RELEASE_NAME,
            "gen_ai.evaluation.score.value": ppi["estimate"],
            "gen_ai.evaluation.explanation": (
                f"Release {name}{f', role {role}' if role else ''}: adherence rate {ppi['estimate']:.3f} "
                f"[{ppi['low']:.3f}, {ppi['high']:.3f}] ({level:.0%} prediction-powered interval) from "
                f"{block.get('n_labelled_conversations')} labelled of {block.get('n_conversations')} conversations."
            ),
            "role_rubric.release": name,
            "role_rubric.interval.low": ppi["low"],
            "role_rubric.interval.high": ppi["high"],
            "role_rubric.interval.level": level,
            "role_rubric.interval.method": "ppi",
            # the interval as proposed to the GenAI semantic conventions (role_rubric.interval.* kept beside it)
            "gen_ai.evaluation.score.ci.lower": ppi["low"],
            "gen_ai.evaluation.score.ci.upper": ppi["high"],
            "gen_ai.evaluation.score.ci.level": level,
            "role_rubric.n_labelled_conversations": int(block.get("n_labelled_conversations") or 0),
            "role_rubric.n_conversations": int(block.get("n_conversations") or 0),
        }
        if role is not None:
            attrs["role_rubric.role"] = role
        elif gate.get("fail_under") is not None or gate.get("fail_if_worse"):
            attrs["gen_ai.evaluation.score.label"] = "gate passed" if gate.get("passed") else "gate failed"
        out.append((f"release {name} {key}", None, None, attrs))
    return out


def _common(scored: Scored) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "role_rubric.model.sha256": scored.model.checksum,
        "role_rubric.source_id": scored.model.source_id,
        "role_rubric.judge": scored.model.judge_line,
        "role_rubric.judges": scored.judges,
        "role_rubric.shift_check": scored.shift_line,
    }
    if scored.threshold is not None:
        attrs["role_rubric.threshold"] = scored.threshold
    if scored.adheres_at is not None:
        attrs["role_rubric.adheres_at"] = scored.adheres_at
    if scored.target:
        attrs["role_rubric.target"] = scored.target
    return attrs


def log_records(items: Sequence[tuple[str, str, str, dict[str, Any]]], *, time_unix_nano: int) -> list[Any]:
    """The SDK's readable log records of the events, each in its turn's span context."""
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    # no Resource.create: its random service.instance.id would make every publish a different file
    resource = Resource({"service.name": "role-rubric", "service.version": _version()})
    scope = InstrumentationScope("role_rubric", _version())
    records = []
    for _, trace_id, span_id, attrs in items:
        context = None  # a release's event belongs to no trace
        if trace_id is not None and span_id is not None:
            parent = trace.SpanContext(
                trace_id=int(trace_id, 16), span_id=int(span_id, 16), is_remote=True, trace_flags=trace.TraceFlags(1)
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        record = LogRecord(
            timestamp=time_unix_nano,
            observed_timestamp=time_unix_nano,
            context=context,
            event_name=EVENT_NAME,
            attributes=attrs,
        )
        records.append(ReadableLogRecord(log_record=record, resource=resource, instrumentation_scope=scope))
    return records


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("role-rubric")
    except PackageNotFoundError:  # a checkout that was never installed
        return "unknown"


def otlp_json(records: Sequence[Any]) -> dict[str, Any]:
    """One ExportLogsServiceRequest in OTLP JSON: protobuf's JSON mapping, trace and span ids in hex."""
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    data = MessageToDict(encode_logs(records), use_integers_for_enums=True)
    for resource_logs in data.get("resourceLogs", []):
        for scope_logs in resource_logs.get("scopeLogs", []):
            for record in scope_logs.get("logRecords", []):
                if not record.get("body"):  # an event with no body: the collector writes none
                    record.pop("body", None)
                for key in ("traceId", "spanId"):
                    if key in record:  # protobuf maps bytes to base64; OTLP JSON wants hex
                        record[key] = base64.b64decode(record[key]).hex()
    return data


def _batches(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


def write_file(items: Sequence[Any], out: Path, *, time_unix_nano: int) -> int:
    """Write the events to out (replaced whole, atomically: a second publish writes the same file)."""
    from rubric.files import atomic_write_text

    lines = [json.dumps(otlp_json(log_records(batch, time_unix_nano=time_unix_nano))) for batch in _batches(items)]
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, "".join(line + "\n" for line in lines))
    return len(items)


def post(
    items: Sequence[Any],
    endpoint: str,
    *,
    time_unix_nano: int,
    timeout: float,
    state: PublishState,
    progress: bool = False,
) -> tuple[int, int]:
    """POST the events not yet accepted to an OTLP/HTTP logs endpoint: (sent now, already there); progress: a
    bar or status lines over the events posted."""
    import requests
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    from rubric.progress import progress_bar

    todo = [item for item in items if not state.done(item[0])]
    session, answered = requests.Session(), []  # each answer's Content-Type: the exporter takes any 2xx
    session.hooks["response"].append(lambda reply, *args, **kwargs: answered.append(reply.headers.get("Content-Type")))
    exporter = OTLPLogExporter(endpoint=endpoint, timeout=timeout, session=session)
    sent = 0
    said = _ExporterLines()  # the exporter's own log lines, kept for the one error line instead of printed
    bar = progress_bar(len(todo), progress, desc="publish", unit="event")
    try:
        for batch in _batches(todo):
            with said:
                result = exporter.export(log_records(batch, time_unix_nano=time_unix_nano))
            if result is not LogRecordExportResult.SUCCESS:
                raise InputError(
                    f"the OTLP endpoint {mask_url(endpoint)} did not accept the evaluations (unreachable, or it "
                    f"refused them{said.last()}); {sent + len(items) - len(todo)} of {len(items)} are there.",
                    fix="check endpoint= (the logs path, e.g. http://HOST:4318/v1/logs) and the headers in "
                    "OTEL_EXPORTER_OTLP_HEADERS, then run the same publish again: it resumes.",
                )
            if answered and str(answered[-1] or "").lower().startswith("text/"):  # an OTLP answer is protobuf/JSON
                raise InputError(
                    f"the server at {mask_url(endpoint)} answered with text ({answered[-1]}), not as an OTLP "
                    f"collector does; {sent + len(items) - len(todo)} of {len(items)} events are known to be there.",
                    fix="check endpoint= (the collector's OTLP/HTTP logs path, e.g. http://HOST:4318/v1/logs).",
                )
            state.mark([item[0] for item in batch])
            sent += len(batch)
            bar.update(len(batch))
    finally:
        bar.close()
        exporter.shutdown()
    return sent, len(items) - len(todo)


class _ExporterLines(logging.Handler):
    """While in a `with`: the OTLP exporter's log lines are kept here, not printed (a refused post is one
    error line, which quotes the last of them, secrets masked)."""

    LOGGER = "opentelemetry.exporter.otlp"

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage().splitlines()[0] if record.getMessage() else "")

    def __enter__(self) -> _ExporterLines:
        logger = logging.getLogger(self.LOGGER)
        self._propagate = logger.propagate
        logger.addHandler(self)
        logger.propagate = False
        return self

    def __exit__(self, *exc: object) -> None:
        logger = logging.getLogger(self.LOGGER)
        logger.removeHandler(self)
        logger.propagate = self._propagate

    def last(self) -> str:
        from rubric.secrets import mask_secrets

        return f": {mask_secrets(self.lines[-1])[:200].rstrip('.')}" if self.lines and self.lines[-1] else ""


class OtelTarget(PublishTarget[OtelKeys]):
    """target=otel: the scores' events (each turn's and conversation's) and an estimate's (the release's rate
    and interval), written to out= or posted to endpoint= (resumed from the scores' publish state)."""

    address_key = "endpoint"

    def publish(self, job: Job) -> dict[str, Any]:
        from calibration.publish.results import read_output
        from calibration.publish.state import state_path

        items: list[Event] = []
        what: list[str] = []
        stamp_of, state_file, model = Path(), Path(), ""
        if job.scored is not None:
            scored = job.scored
            items += score_events(scored)
            assert scored.scores is not None  # read from a file: publish's scores are
            stamp_of, state_file, model = scored.scores, state_path(scored.scores), scored.model.checksum
            what.append(f"{len(scored.turns)} turns, {len(scored.sessions)} conversations")
        if job.estimate is not None:
            file, result = read_output(job.estimate, "estimate.json", command="estimate", key="estimate", needs="rate")
            found = estimate_events(result, name=file.parent.name)
            items += found
            what.append(f"the release's rate, {len(found)} scopes")
            if job.scored is None:
                stamp_of, state_file, model = file, file.with_name("estimate_published.json"), ""
        stamp = int(stamp_of.stat().st_mtime_ns)  # when score / estimate wrote it: the same on every publish
        keys = self.keys
        if keys.out is not None:
            n = write_file(items, Path(keys.out), time_unix_nano=stamp)
            self.say(f"publish: wrote {n} gen_ai.evaluation.result events ({'; '.join(what)}) to {keys.out}")
            return {"events": n, "out": str(keys.out)}
        endpoint = str(keys.endpoint)
        state = PublishState(state_file, f"otel {mask_url(endpoint)}", model)
        sent, before = post(
            items, endpoint, time_unix_nano=stamp, timeout=float(keys.timeout), state=state, progress=self.progress
        )
        self.say(
            f"publish: posted {sent} gen_ai.evaluation.result events to {mask_url(endpoint)}"
            + (f" ({before} already there)" if before else "")
            + f"; progress kept in {state.path}"
        )
        return {"events": sent, "already": before, "endpoint": mask_url(endpoint)}
