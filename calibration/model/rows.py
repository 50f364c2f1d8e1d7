"""What training works on: the label rows as tensors (`Rows`), what each model fits and validates on
(`Plan`) and what `train_models` returns (`Trained`). calibration/model/train.py re-exports all three."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from calibration.data.dataset import Dataset
from calibration.model.network import CalibrationNet
from calibration.model.recalibrate import Recalibration

__all__ = ["Plan", "Rows", "Trained"]


@dataclass
class Rows:
    """Label rows as tensors: the item, judge and answers (option index, -1 = none) of each."""

    item: torch.Tensor  # (R,)
    judge: torch.Tensor  # (R,)
    answers: torch.Tensor  # (R, Q)
    weight: torch.Tensor | None = None  # (R,) float32 each row's weight in the losses (None: 1 each)

    @classmethod
    def of(cls, ds: Dataset) -> Rows:
        weight = None if ds.label_weight is None else torch.tensor(ds.label_weight, dtype=torch.float32)
        item, judge, answers = (torch.tensor(a, dtype=torch.long) for a in (ds.label_item, ds.label_judge, ds.answers))
        return cls(item, judge, answers, weight)

    def weight_at(self, idx: torch.Tensor) -> torch.Tensor | None:
        """The weights of the rows idx (any shape), or None where rows are unweighted."""
        return None if self.weight is None else self.weight[idx]


@dataclass
class Plan:
    """What each of the M models trains and validates on, and its seed."""

    fit_rows: list[np.ndarray]
    val_rows: list[np.ndarray]
    seeds: list[int]
    history: dict = field(default_factory=dict)
    recalibration: Recalibration | None = None  # train_ensemble's, fitted after training

    def subset(self, models: np.ndarray) -> Plan:
        """The plan of some of the models (a fresh history)."""
        return Plan(
            [self.fit_rows[m] for m in models], [self.val_rows[m] for m in models], [self.seeds[m] for m in models]
        )


@dataclass
class Trained:
    """The models `train_models` trained, with the inputs they read and their plan."""

    net: CalibrationNet
    X: torch.Tensor  # (N, D) every item's inputs (`model_inputs`)
    spec: dict  # what X holds; saved with a model so prediction rebuilds it
    plan: Plan  # each model's fit and validation rows, seed, and training history
