"""What `role-rubric publish` writes back where the traces are, whichever the target (calibration/commands/publish.py).

results.py reads what `score` wrote and joins each turn with the trace and span ids its conversation was
imported with (rubric/traces/); disagreements.py reads compare-judges' disagreement list; consistency.py checks
score's tables against each other and the conversations; state.py keeps an interrupted publish resumable and
secrets out of messages. The targets that write it (OpenTelemetry, MLflow, Phoenix) are modules of their
backends' folders, behind one interface: calibration/connectors/targets.py. Nothing here imports a target's
client.
"""

from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored, read_scored

__all__ = ["EVALUATION_NAME", "SESSION_NAME", "Scored", "read_scored"]
