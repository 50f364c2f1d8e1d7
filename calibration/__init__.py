"""Calibration of LLM-judge answer distributions to human judges (the LLM-Rubric network).

Sub-packages, each importing only the ones below it in docs/design.md's drawing (tests/test_layout.py holds
the order): `data` (dataset dirs -> arrays, splits, importers), `pages` (page templating), `schema` (each
command's keys), `labelling`, `model` (network, settings, training loop, ensemble, model files, predict),
`evaluation` (metrics, baselines, significance, cross-validation, search, adherence), `release` (release
estimates, decisions at a guaranteed risk), `report` and `compare` (their pages), `judges`, `publish`,
`connectors` (one folder per backend); on top the entry points `api` (RoleAdherence), `monitor`, `demo`,
`commands` and `cli` (the dispatcher). The public names below are re-exported here and imported on first
use, so `import calibration` stays fast.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Dataset": "calibration.data.dataset",
    "load_dataset": "calibration.data.dataset",
    "dataset_from_frames": "calibration.data.dataset",
    "load_training_data": "calibration.data.union",
    "import_llm_rubric": "calibration.data.importers",
    "CalibrationNet": "calibration.model.network",
    "Settings": "calibration.model.settings",
    "fit_models": "calibration.model.train",
    "train_models": "calibration.model.train",
    "train_ensemble": "calibration.model.ensemble",
    "ensemble_proba": "calibration.model.ensemble",
    "save_model": "calibration.model.files",
    "load_model": "calibration.model.files",
    "predictions_frame": "calibration.model.predict",
    "agreement": "calibration.evaluation.metrics",
    "mean_nll": "calibration.evaluation.metrics",
    "cross_validate": "calibration.evaluation.crossval",
    "CVResult": "calibration.evaluation.crossval",
    "search": "calibration.evaluation.search",
    "run_report": "calibration.report.build",
    "RoleAdherence": "calibration.api",
    "results_frames": "calibration.api.frames",
    "estimate_release": "calibration.release.estimate",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    from rubric.plugins import lazy_attribute  # here, so that importing the package imports nothing more

    return lazy_attribute(__name__, _EXPORTS, name)
