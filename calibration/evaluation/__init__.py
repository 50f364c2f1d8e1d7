"""Evaluation: metrics, baselines, significance, cross-validation, hyperparameter search, adherence analysis."""
