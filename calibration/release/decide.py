"""`role-rubric decide`: per-turn decisions (adheres / violates / escalate) at a guaranteed risk.

What is promised, and how the threshold is chosen: calibration/evaluation/risk_control.py. Here: the
adherence probability of a model's turns, the reviewers' votes and the calibration turns stored beside the
model (for `RoleAdherence(risk=...)`); the command: calibration/commands/decide.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from calibration.evaluation.risk_control import Threshold, calibrate
from rubric.errors import InputError
from rubric.jsonfile import jsonable  # noqa: F401  (importable here as before)

CALIBRATION_FILE = "decide_calibration.csv"


def turn_votes(ds, adheres_at: float) -> pd.DataFrame:
    """Per labelled item of `ds`: n_reviewers with a target answer and n_adheres among them."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    value = ds.option_values()[t][ds.answers[rows, t]]
    frame = pd.DataFrame({"item": ds.label_item[rows], "adheres": (value >= adheres_at).astype(int)})
    votes = (
        frame.groupby("item")["adheres"]
        .agg(["sum", "count"])
        .rename(columns={"sum": "n_adheres", "count": "n_reviewers"})
    )
    return votes.reset_index()


def default_adheres_at(question) -> float:
    """The lowest value of the upper half of the options (3 on 1-4): `Question.default_adheres_at`."""
    return question.default_adheres_at


def adherence_probability(model, ds, adheres_at: float) -> np.ndarray:
    """(N,) P(target >= adheres_at) per item of `ds`, the model's distribution averaged over every training
    judge (the population model where it has none or is not personalised)."""
    import torch

    X = torch.from_numpy(ds.features(model.spec))
    items = np.arange(len(ds.items))
    judges = range(len(model.judges)) if model.judges and model.settings.personalised else [-1]
    probs = sum(model.proba(X, items, np.full(len(items), j, dtype=np.int64)) for j in judges) / len(judges)
    t = ds.target_index
    k = int(ds.n_options[t])
    above = ds.option_values()[t, :k] >= adheres_at
    if not above.any():
        raise InputError(
            f"adheres_at={adheres_at:g} is above every option of {ds.rubric.target!r}.",
            fix="pass a value among the target's options.",
        )
    return probs[:, t, :k][:, above].sum(1)


def calibration_table(model, ds, adheres_at: float) -> pd.DataFrame:
    """The calibration turns: ids, p_adheres and the reviewers' votes (turns without a target answer out)."""
    votes = turn_votes(ds, adheres_at)
    p = adherence_probability(model, ds, adheres_at)
    keys = ds.items.iloc[votes["item"]].reset_index(drop=True)
    return keys.assign(
        p_adheres=p[votes["item"]],
        n_adheres=votes["n_adheres"].to_numpy(),
        n_reviewers=votes["n_reviewers"].to_numpy(),
        adheres_at=adheres_at,
    )


def load_calibration(model_dir: str | Path) -> pd.DataFrame:
    """The calibration turns `role-rubric decide` stored beside a model."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.exists():
        raise InputError(
            "the model has no decision calibration.",
            path=path,
            fix="run `role-rubric decide model=DIR calibration=LABELLED_DIR` first.",
        )
    return pd.read_csv(path, dtype={"conversation_id": str, "turn": str}, keep_default_na=False)


def threshold_from(table: pd.DataFrame, *, risk: float, delta: float, against: str = "majority") -> Threshold:
    return calibrate(
        table["p_adheres"].to_numpy(float),
        table["n_adheres"].to_numpy(int),
        table["n_reviewers"].to_numpy(int),
        risk=risk,
        delta=delta,
        against=against,
    )
