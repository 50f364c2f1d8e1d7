"""The documented path of role-rubric's MLflow scorers; the code lives in calibration/connectors/mlflow/scorer.py
(MLflow's folder: its import, publish and scorer code together)."""

from calibration.connectors.mlflow.scorer import RoleAdherenceScorer, SessionAdherenceScorer

__all__ = ["RoleAdherenceScorer", "SessionAdherenceScorer"]
