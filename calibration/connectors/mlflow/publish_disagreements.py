"""target=mlflow disagreements=: compare-judges' ranked rows as feedback on their turns' traces.

Each row with a trace id becomes one feedback on the trace of its turn, attached to the span of the reply:
name `role_rubric/disagreement/<question_id>`, value the gap (calibrated - the reviewer's answer), source
LLM_JUDGE with the source id `role-rubric/compare-judges/<llm judge>`, the rank, both answers and the gap in
the rationale and the metadata (with the reviewer). The reviewers' own disagreements (reviewer_disagreements.csv)
the same way: name `role_rubric/reviewer_disagreement/<question_id>`, value the spread (a share of the
question's range), source CODE `role-rubric/compare-judges/reviewers`, the answers in the rationale and the
metadata. A row is found again by its name, source, span and (a judge's row) reviewer, so publishing the list
again updates each entry in place (a new rank, a new gap) instead of adding one beside it; a stopped publish
resumes by running it again. Every trace is looked up before anything is
written: traces deleted since the import are one line, with nothing published. Rows without a trace id are
counted and named (calibration/publish/disagreements.py).
"""

from __future__ import annotations

from collections.abc import Callable

from calibration.connectors.mlflow.publish_client import existing, put, trace_infos, tracing
from calibration.publish.disagreements import Disagreements, Row
from calibration.publish.state import mask_url


def mlflow_trace_id(row: Row) -> str:
    """The MLflow id of the row's trace: MLflow names a trace `tr-` and its OpenTelemetry trace id."""
    return row.trace_id if row.trace_id.startswith("tr-") else f"tr-{row.trace_id}"


def publish_disagreements(
    uri: str, rows: Disagreements, *, say: Callable[[str], None], progress: bool = False
) -> dict[str, int]:
    """Log or update one feedback per row with a trace id: counts of created, updated, unchanged, untraced."""
    from mlflow.entities import AssessmentSource, Feedback

    from rubric.progress import progress_iter

    client = tracing(uri)
    infos = trace_infos(client, uri, [mlflow_trace_id(r) for r in rows.rows], what=f"{rows.kind} rows",
                        path=rows.path, progress=progress)  # fmt: skip
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for row in progress_iter(rows.rows, progress, desc=f"publish: {rows.kind}s", unit="row"):
        tid = mlflow_trace_id(row)
        wanted = Feedback(
            name=row.name,
            value=row.value,
            source=AssessmentSource(source_type=row.source_type, source_id=row.source_id),
            rationale=row.rationale(),
            metadata=row.metadata(),
            span_id=row.span_id or None,
        )
        same = lambda a, r=row: a.span_id == (r.span_id or None) and r.same_entry(a.metadata or {})  # noqa: E731
        counts[put(client, uri, tid, wanted, existing(infos[tid], row.name, row.source_id, same))] += 1
    untraced = rows.untraced_line()
    say(
        f"publish: {len(rows.rows)} {rows.kind} feedbacks on {mask_url(uri)}: {counts['created']} created, "
        f"{counts['updated']} updated, {counts['unchanged']} unchanged" + (f"; {untraced}" if untraced else "")
    )
    return {**counts, "untraced": len(rows.untraced)}
