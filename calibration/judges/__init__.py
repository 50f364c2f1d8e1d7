"""`role-rubric compare-judges`: several judges (models, prompts) of the same labelled turns, each calibrated
on the same folds of conversations, compared by how well the calibrated judge agrees with the reviewers,
question by question (the command: calibration/commands/compare_judges.py)."""

from calibration.judges.stage import compare_judges

__all__ = ["compare_judges"]
