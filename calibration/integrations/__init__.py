"""role-rubric inside other evaluation frameworks.

`calibration.integrations.deepeval.RoleRubricMetric`: a deepeval conversational metric (the
`role-rubric[deepeval]` extra; docs/how-to/deepeval.md). `calibration.integrations.mlflow.RoleAdherenceScorer` and
`SessionAdherenceScorer`: MLflow scorers for `mlflow.genai.evaluate` (the `role-rubric[mlflow]` extra;
docs/how-to/traces.md). These are the documented paths; the code lives in the backends' folders,
calibration/connectors/deepeval/metric.py and calibration/connectors/mlflow/scorer.py. Nothing here imports
a framework until its integration is used, so `import calibration` never pays for (or needs) deepeval.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "RoleRubricMetric": "calibration.connectors.deepeval.metric",
    "RoleAdherenceScorer": "calibration.connectors.mlflow.scorer",
    "SessionAdherenceScorer": "calibration.connectors.mlflow.scorer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    from rubric.plugins import lazy_attribute  # here, so that importing the package imports nothing more

    return lazy_attribute(__name__, _EXPORTS, name)
