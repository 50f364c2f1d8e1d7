"""The documented path of role-rubric's deepeval metric; the code lives in
calibration/connectors/deepeval/metric.py (deepeval's folder)."""

from calibration.connectors.deepeval.metric import RoleRubricMetric, conversation_from_test_case

__all__ = ["RoleRubricMetric", "conversation_from_test_case"]
