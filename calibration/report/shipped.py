"""`role-rubric report model=MODEL_DIR`: the report of the model you will ship, whatever its kind.

The report's sections (verdict, reliability diagrams, metrics, per-turn table, release summary) describe the
method named `calibrated` in the out-of-fold predictions. For a network that is the network; for a model
trained with `train model=linear|ordinal` the out-of-fold rows of that kind take the name, and the network's
rows are shown as `network` beside the baselines, so every section describes the model to be shipped, each
row of it predicted by that kind of model trained on the other folds.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.evaluation.cv_predictions import METHOD_LABELS, REFERENCE, TRAINABLE

METHOD_OF = {kind: method for method, kind in TRAINABLE.items()}  # network -> calibrated, linear -> linear, ...
NETWORK = "network"  # the network's rows when another kind is the model shipped
METHOD_LABELS.setdefault(NETWORK, "calibration network")


def shipped_model(path: str | Path, data: Any = None, *, allow_judge_mismatch: bool = False) -> dict[str, Any]:
    """What the report needs of a model directory: its kind ("network", "linear", "ordinal"), its settings
    (a network's, for the cross-validation) and where it is. Bad directories are refused by load_model; a
    model of another rubric or judge than the report's data= directories is refused as `predict` refuses it
    (a page presenting it as the model shipped would describe a model that does not apply to this data)."""
    from calibration.data.union import data_paths
    from calibration.model.files import load_model

    loaded = load_model(path)
    for folder in data_paths(data) if data is not None else []:
        loaded.check_data(folder, command="report", model_dir=path, allow_judge_mismatch=allow_judge_mismatch)
    kind = loaded.record.kind
    return {
        "dir": str(path),
        "kind": kind,
        "method": METHOD_OF[kind],
        "settings": loaded.settings if kind == "network" else None,
        "shift_reference": loaded.record.shift_summary(),
    }


def as_shipped(predictions: pd.DataFrame, kind: str) -> pd.DataFrame:
    """The out-of-fold predictions with the shipped kind's rows as `calibrated` (the network's as `network`)."""
    method = METHOD_OF[kind]
    if method == REFERENCE:
        return predictions
    if method not in set(predictions["method"]):
        raise_missing(method)
    renamed = {method: REFERENCE, REFERENCE: NETWORK}
    return predictions.assign(method=predictions["method"].map(lambda m: renamed.get(m, m)))


def raise_missing(method: str) -> None:
    from rubric.errors import InputError

    raise InputError(
        f"the cross-validation has no {method!r} predictions to report the {method} model with.",
        fix="rerun `role-rubric cv` (it cross-validates the linear and ordinal models too), or leave cv= out.",
    )


def shipped_verdict(verdict: dict[str, Any], shipped: dict[str, Any]) -> dict[str, Any]:
    """The verdict of the shipped model: its Deploy line says whether that model is the one to ship, and else
    which to train (calibration/report/verdict.py reads each model under its own name)."""
    verdict = dict(verdict)
    verdict["shipped"] = {k: shipped[k] for k in ("dir", "kind")}
    return verdict


def shipped_shift(shipped: dict[str, Any], data: Any) -> dict[str, Any]:
    """Do the report's conversations look like the shipped model's training data? The shift check of score
    and estimate (calibration/model/shift.py), its warning a data warning of the report."""
    from calibration.model.shift import handle_shift, roles_of

    return handle_shift(shipped["shift_reference"], data.ds, roles_of([s.path for s in data.sources]), "warn", "report")


def shipped_html(shipped: dict[str, Any], shift: dict[str, Any] | None = None) -> str:
    """One line under the verdict: which model the page is about (and whether this data is like its own)."""
    kind = shipped["kind"]
    label = "calibration network" if kind == "network" else METHOD_LABELS[METHOD_OF[kind]]
    other = "" if kind == "network" else "; the network's own out-of-fold predictions are the row `network`"
    return (
        f"<p><b>Model shipped</b>: <code>{html.escape(shipped['dir'])}</code>, a {html.escape(kind)} model "
        f"({html.escape(label)}). Every section reports its kind, trained on the other folds and predicting "
        f"the held-out conversations, under the name <i>calibrated</i>{other}.{_shift_sentence(shift)}</p>"
    )


def _shift_sentence(shift: dict[str, Any] | None) -> str:
    if not shift or not shift.get("checked"):
        return ""
    if not shift.get("fired"):
        return " These conversations look like the model's training data (shift check: no difference found)."
    return (
        " <b>These conversations differ from the model's training data</b> (shift check): its calibrated "
        "numbers on them may be biased; label a sample and run <code>role-rubric estimate</code>."
    )
