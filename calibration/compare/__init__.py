"""`role-rubric compare`: the role-adherence paper's evaluation of reference-based scorers (and any judge's
scores) on one scale: AUC, AP, separation, F1 and kappa with conversation-bootstrap intervals, per corpus
size and per violation type -> compare.json, compare.html, scores.csv (the command:
calibration/commands/compare.py)."""

from calibration.compare.stage import compare
from calibration.compare.tables import per_type_table, unified_table

__all__ = ["compare", "per_type_table", "unified_table"]
