"""Calibration of LLM-judge answer distributions to human judges (the LLM-Rubric network).

Stages: `dataset` (native files -> arrays), `network` (the batched personalised network), `train`
(pretrain + fine-tune with early stopping), `crossval` (+ `baselines`), `search` (Optuna), `predict`,
`metrics`, `modelio` (safetensors + JSON), `importers` (LLM-Rubric files), `cli` (the dispatcher).
Heavy modules are imported on first use so `import calibration` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Dataset": "calibration.dataset",
    "load_dataset": "calibration.dataset",
    "dataset_from_frames": "calibration.dataset",
    "CalibrationNet": "calibration.network",
    "Settings": "calibration.train",
    "fit_models": "calibration.train",
    "train_ensemble": "calibration.train",
    "cross_validate": "calibration.crossval",
    "CVResult": "calibration.crossval",
    "search": "calibration.search",
    "ensemble_proba": "calibration.predict",
    "predictions_frame": "calibration.predict",
    "agreement": "calibration.metrics",
    "mean_nll": "calibration.metrics",
    "save_model": "calibration.modelio",
    "load_model": "calibration.modelio",
    "import_llm_rubric": "calibration.importers",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'calibration' has no attribute {name!r}")
