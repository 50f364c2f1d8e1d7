"""Results written back where the traces are: `role-rubric publish` (calibration/commands/publish.py).

results.py reads what `score` wrote and joins each turn with the trace and span ids its conversation was
imported with (rubric/traces/); state.py keeps an interrupted publish resumable and secrets out of messages.
One module per target: otel.py (gen_ai.evaluation.result events as OTLP JSON or over OTLP/HTTP), mlflow.py
(feedback on each turn's trace and on the session; mlflow_runs.py: `estimate` and `cv` outputs as runs) and phoenix.py (span
and session annotations). Nothing here imports a target's client until that target is used.
"""

from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, read_scored

__all__ = ["EVALUATION_NAME", "SESSION_NAME", "Scored", "read_scored"]
