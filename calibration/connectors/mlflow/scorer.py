"""role-rubric as MLflow scorers: calibrated role adherence inside `mlflow.genai.evaluate`.

    import mlflow
    from calibration.connectors.mlflow.scorer import RoleAdherenceScorer, SessionAdherenceScorer

    traces = mlflow.search_traces(locations=[experiment_id])
    mlflow.genai.evaluate(
        data=traces,
        scorers=[RoleAdherenceScorer(calibrator="runs/model", judge="openai"),
                 SessionAdherenceScorer(calibrator="runs/model", judge="openai")],
    )

`RoleAdherenceScorer` scores one trace: the reply of its LLM call, judged with the conversation so far as
history (the earlier traces of its session, `mlflow.trace.session`, read from the tracking server);
`SessionAdherenceScorer` is session-level (`is_session_level_scorer`) and scores the whole conversation.
Both rebuild the conversation as `role-rubric import source=mlflow` does (rubric/traces/), measure it with
`RoleAdherence` (calibration/api/role_adherence.py, the numbers `score` writes) and return a `Feedback` whose value is the
calibrated adherence (per trace) or the conversation's score (per session), with the rationale and metadata
`publish target=mlflow` writes (calibration/publish/results.py) and the source LLM_JUDGE
`role-rubric/model-<checksum>`.

Needs the `[mlflow]` extra (mlflow-skinny, whose `mlflow.genai.evaluate` runs these scorers).
"""

from __future__ import annotations

from typing import Any

try:
    from mlflow.entities import AssessmentSource, Feedback
    from mlflow.genai.scorers import Scorer
except ModuleNotFoundError as exc:  # only mlflow itself missing gets the hint; a broken install shows as is
    from rubric.extras import missing_module

    raise missing_module("mlflow", by="the MLflow scorers (calibration.connectors.mlflow.scorer)", cause=exc) from exc
from pydantic import PrivateAttr

from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, SessionScore, TurnScore, model_info

SESSION_KEY = "mlflow.trace.session"


class _RoleRubricScorer(Scorer):
    """What both scorers share: the measurement's settings (as `score` takes them) and the conversation
    rebuilt from traces."""

    calibrator: str
    """The model folder from `role-rubric train`."""
    judge: Any = "embedding"
    """conf/judge/NAME (a name) or a judge mapping, as `score judge=`; the calibrator's own judge."""
    threshold: float = 0.5
    judges: Any = None
    adheres_at: float | None = None
    cache: str | None = None
    """The judge's request cache (SQLite): scoring the same turns again asks the judge nothing."""
    _metric: Any = PrivateAttr(default=None)
    _model: Any = PrivateAttr(default=None)

    def metric(self) -> Any:
        """The `RoleAdherence` measurement, made once."""
        if self._metric is None:
            from calibration.api import RoleAdherence

            self._metric = RoleAdherence(
                calibrator=self.calibrator,
                judge=self.judge,
                threshold=self.threshold,
                judges=self.judges,
                adheres_at=self.adheres_at,
                cache=self.cache,
            )
            self._model = model_info(self.calibrator)
        return self._metric

    def conversation(self, traces: list[Any]) -> Any:
        """The traces (of one session) rebuilt into one role-rubric conversation, as an import does."""
        from rubric.conversations import conversations_from_records
        from rubric.traces.assemble import TraceSelection, assemble
        from rubric.traces.mlflow_trace import spans_of_trace

        spans = [span for trace in traces for span in spans_of_trace(trace)]  # the importer's own reading
        found = assemble(spans, TraceSelection(), source={"kind": "mlflow"}, description="the scored traces")
        (conversation,) = conversations_from_records(found.records[:1], source="the scored traces")
        return conversation

    def scored(self, conversation: Any, result: Any) -> Scored:
        """The measurement as `publish` reads it from `score`'s files (the same rationale and metadata)."""
        metric = self.metric()
        turns = tuple(
            TurnScore(
                conversation_id=conversation.conversation_id,
                turn=t.turn,
                trace_id=conversation.record["turns"][t.turn]["trace_id"],
                span_id=conversation.record["turns"][t.turn]["span_id"],
                mlflow_trace_id=conversation.record["turns"][t.turn].get("mlflow_trace_id"),
                adherence=round(t.adherence, 4),
                adheres=bool(t.adheres),
                expected={q: round(v, 3) for q, v in t.expected.items()},
                judge_expected={
                    q: round(sum(v * p for v, p in d.items()), 3) for q, d in t.judge_distributions.items()
                },
            )
            for t in result.turns
        )
        session = SessionScore(
            conversation_id=conversation.conversation_id,
            score=round(result.score, 4),
            success=bool(result.success),
            min_adherence=round(min(t.adherence for t in turns), 4),
            violating_turns=" ".join(str(i) for i in result.violating_turn_indices if i is not None),
            turns=turns,
        )
        return Scored(
            model=self._model,
            turns=turns,
            sessions=(session,),
            shift=metric.shift or {},
            threshold=metric.threshold,
            adheres_at=metric.adheres_at,
            target=metric.rubric.target,
            judges=result.judges,
            scores=None,
        )

    def source(self) -> Any:
        return AssessmentSource(source_type="LLM_JUDGE", source_id=self._model.source_id)


def _session_traces(trace: Any) -> list[Any]:
    """The trace and the earlier traces of its session, oldest first (the trace alone without a session)."""
    import mlflow

    session = (trace.info.trace_metadata or {}).get(SESSION_KEY)
    if not session:
        return [trace]
    quoted = str(session).replace("'", "\\'")
    found = mlflow.search_traces(
        locations=[trace.info.experiment_id],
        filter_string=f"metadata.`{SESSION_KEY}` = '{quoted}'",
        return_type="list",
    )
    earlier = [
        t for t in found if t.info.request_time <= trace.info.request_time and t.info.trace_id != trace.info.trace_id
    ]
    return sorted(earlier, key=lambda t: t.info.request_time) + [trace]


class RoleAdherenceScorer(_RoleRubricScorer):
    """Per trace: the calibrated adherence of the reply its LLM call wrote, the session's earlier traces as
    the history the judge sees."""

    name: str = EVALUATION_NAME

    def __call__(self, *, trace: Any = None, **_: Any) -> Feedback:
        metric = self.metric()
        conversation = self.conversation(_session_traces(trace))
        result = metric.measure(conversation)
        scored = self.scored(conversation, result)
        mine = trace.info.trace_id
        turns = [t for t in scored.turns if (t.mlflow_trace_id or f"tr-{t.trace_id}") == mine] or list(scored.turns)
        turn = turns[-1]  # the reply of this trace (an agent's several calls are one turn)
        return Feedback(
            name=self.name,
            value=turn.adherence,
            rationale=scored.rationale(turn),
            metadata=scored.metadata(turn),
            source=self.source(),
        )


class SessionAdherenceScorer(_RoleRubricScorer):
    """Per session (`mlflow.trace.session`): the conversation's score (the mean turn score) and success."""

    name: str = SESSION_NAME

    @property
    def is_session_level_scorer(self) -> bool:
        return True

    def __call__(self, *, session: list[Any] | None = None, **_: Any) -> Feedback:
        metric = self.metric()
        traces = sorted(session or [], key=lambda t: t.info.request_time)
        conversation = self.conversation(traces)
        scored = self.scored(conversation, metric.measure(conversation))
        (s,) = scored.sessions
        return Feedback(
            name=self.name,
            value=s.score,
            rationale=scored.session_rationale(s),
            metadata={**scored.session_metadata(s), "success": str(s.success).lower()},
            source=self.source(),
        )
