"""The out-of-fold predictions frame that `role-rubric cv` writes, as the report reads it.

One row per (conversation_id, turn, judge_id, method) with p_<value> columns (the predicted distribution
over the target's options), `expected` (its mean) and the human `answer`. This module names the methods,
reads the frame from a cv output folder, and hands out one method's rows sorted by
(conversation_id, turn, judge_id) so that two methods can be compared row by row; `check_aligned` refuses
a pair that does not predict the same rows.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rubric.config.command_line import override
from rubric.errors import InputError
from rubric.ids import clean_id_columns

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

KEYS = ["conversation_id", "turn", "judge_id"]
REFERENCE = "calibrated"
METHOD_LABELS = {
    "calibrated": "calibrated (ours)",
    "constant": "constant (training mean)",
    "judge_mean": "per-judge mean",
    "random": "random answer",
    "argmax_llm": "argmax LLM",
    "expected_llm": "expected LLM",
    "calibrated_llm": "calibrated LLM (target only)",
    "linear": "personalised logistic (expected answers)",
    "ordinal": "personalised ordinal (expected answers)",
}


def option_values(predictions: pd.DataFrame) -> list[float]:
    """Option values of the target, read from the p_<value> columns in their order."""
    columns = [c for c in predictions.columns if c.startswith("p_")]
    if not columns:
        raise ValueError("predictions have no p_<value> columns; pass the frame written by `role-rubric cv`.")
    return [float(c[2:]) for c in columns]


def method_rows(predictions: pd.DataFrame, method: str) -> pd.DataFrame:
    """The rows of one method, sorted by (conversation_id, turn, judge_id) so methods align row by row."""
    rows = predictions[predictions["method"] == method]
    if rows.empty:
        present = sorted(predictions["method"].unique())
        raise ValueError(f"no predictions for method {method!r}; methods present: {present}.")
    return rows.sort_values(KEYS, kind="stable").reset_index(drop=True)


TRAINABLE = {"calibrated": "network", "linear": "linear", "ordinal": "ordinal"}
"""cv's methods that `role-rubric train model=...` trains and ships, by their model= name."""


def best_trainable(
    rmse: dict[str, float], data: Any, target: str | None = None, weights: Any = None
) -> dict[str, Any] | None:
    """Of the methods in TRAINABLE that `rmse` (method -> out-of-fold RMSE) scores, the one with the lowest
    RMSE (the network on a tie: it comes first), with the command that trains it on `data` (the dataset
    directory, or a list of them) with `weights` (one per directory; None: none) for `target` (None: the
    rubric's)."""
    found = {m: float(rmse[m]) for m in TRAINABLE if m in rmse and np.isfinite(rmse[m])}
    if not found:
        return None
    best = min(found, key=found.__getitem__)
    model = TRAINABLE[best]
    where = override("data", data if isinstance(data, str | Path) else list(data))
    if weights is not None:
        where += f" weights=[{','.join(f'{float(w):g}' for w in weights)}]"
    option = ("" if model == "network" else f" model={model}") + (f" {override('target', target)}" if target else "")
    return {
        "method": best,
        "model": model,
        "rmse": found[best],
        "command": f"role-rubric train {where}{option} out=MODEL_DIR",
    }


def method_arrays(predictions: pd.DataFrame, method: str = REFERENCE) -> dict[str, np.ndarray]:
    """One method's arrays: probs (n, K), expected (n,), answers (n,), groups (n,) conversation ids,
    judges (n,), values (K,)."""
    rows = method_rows(predictions, method)
    values = option_values(predictions)
    return {
        "probs": rows[[c for c in rows.columns if c.startswith("p_")]].to_numpy(float),
        "expected": rows["expected"].to_numpy(float),
        "answers": rows["answer"].to_numpy(float),
        "groups": rows["conversation_id"].astype(str).to_numpy(),
        "judges": rows["judge_id"].astype(str).to_numpy(),
        "values": np.asarray(values),
    }


def ordered_methods(predictions: pd.DataFrame) -> list[str]:
    """The methods present, those of METHOD_LABELS first in its order, then the others as they appear."""
    present = list(dict.fromkeys(predictions["method"]))
    known = [m for m in METHOD_LABELS if m in present]
    return known + [m for m in present if m not in known]


def check_aligned(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    """Refuse two sorted method frames (`method_rows`) that do not predict the same rows; `what` names them."""
    if len(a) != len(b) or not (a[KEYS].astype(str).to_numpy() == b[KEYS].astype(str).to_numpy()).all():
        raise ValueError(f"{what} do not predict the same (conversation, turn, judge) rows; cannot pair them.")


def read_cv_folder(
    folder: str | Path, target: str, *, reader: str = "the report's", target_fix: str | None = None
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """predictions.csv (and metrics.json, if present) of a `role-rubric cv` output folder; `reader` and
    `target_fix` word the refusal of a folder for another question than `target`."""
    folder = Path(folder)
    path = folder / "predictions.csv"
    if not path.exists():
        raise InputError(
            "no predictions.csv in the cv folder.",
            path=folder,
            fix="pass cv=DIR written by `role-rubric cv`.",
        )
    predictions = _read_predictions(path, target, reader, target_fix, method=REFERENCE)
    return predictions, _cv_info(folder / "metrics.json")


PREVIOUS_FILE = "previous_predictions.csv"
"""Where `cv` on several directories writes the last directory's rows predicted by the network trained
without it (calibration/evaluation/crossval.py `previous_predictions`), beside predictions.csv."""


def read_previous(folder: str | Path, target: str, info: dict[str, Any]) -> pd.DataFrame | None:
    """A cv folder's PREVIOUS_FILE (None where cv wrote none: one directory, baselines off, or a cv of an
    earlier version). info: the folder's metrics.json (`_cv_info`); where it scores method PREVIOUS on the last
    directory, the file was written and is missing now: refused, since the deploy line cannot then decide as
    cv's did."""
    path = Path(folder) / PREVIOUS_FILE
    if path.exists():
        return _read_predictions(path, target, "the report's", None)
    by_dataset = info.get("metrics_by_dataset") or {}
    last = list(by_dataset.values())[-1] if isinstance(by_dataset, dict) and by_dataset else {}
    if isinstance(last, dict) and "previous" in last:
        raise InputError(
            "is missing, though metrics.json scores the model trained without the last directory from it: the "
            "deploy line cannot be chosen as cv's was.",
            path=path,
            fix="put the file back, or run `role-rubric cv` on these directories again.",
        )
    return None


def check_previous(previous: pd.DataFrame, predictions: pd.DataFrame, last: str, folder: str | Path) -> None:
    """PREVIOUS_FILE must predict exactly the network's rows of the last directory (`last`; both frames keyed
    as `union.qualified_predictions` keys them, "new/c001"), each once: rows removed, added or repeated would
    change the deploy line silently. Paired by (conversation, turn, judge), so their order is free."""
    path = Path(folder) / PREVIOUS_FILE
    fix = "put back the file cv wrote, or run `role-rubric cv` on these directories again."
    ours = predictions[(predictions["method"] == REFERENCE) & predictions["conversation_id"].str.startswith(f"{last}/")]
    theirs = pd.MultiIndex.from_frame(previous[KEYS].astype(str))
    if theirs.has_duplicates:
        n = int(theirs.duplicated().argmax())
        raise InputError(f"{_row_key(previous, n)} has two rows.", path=path, row=n + 1, fix=fix)
    wanted = pd.MultiIndex.from_frame(ours[KEYS].astype(str))
    extra = ~theirs.isin(wanted)
    if extra.any():
        n = int(extra.argmax())
        raise InputError(
            f"{_row_key(previous, n)} is not a row the network predicts in the last directory {last!r}.",
            path=path,
            row=n + 1,
            fix=fix,
        )
    lacking = ~wanted.isin(theirs)
    if lacking.any():
        n = int(lacking.argmax())
        raise InputError(
            f"{_row_key(ours, n)} has no row here ({int(lacking.sum())} of the last directory's {len(ours)} rows "
            "are missing).",
            path=path,
            fix=fix,
        )


def _row_key(frame: pd.DataFrame, n: int) -> str:
    row = frame.iloc[n]
    return f"conversation {row['conversation_id']!r}, turn {row['turn']!r}, judge {row['judge_id']!r}"


def _read_predictions(
    path: Path, target: str, reader: str, target_fix: str | None, method: str | None = None
) -> pd.DataFrame:
    """A predictions file of cv, its ids as text and its numbers checked; refused for another question, or
    without rows of `method` where one is named."""
    ids = {c: str for c in ("conversation_id", "turn", "judge_id", "question_id", "method")}
    try:
        predictions = pd.read_csv(path, dtype=ids, keep_default_na=False)
        predictions = clean_id_columns(predictions, ids)  # one rule for ids (rubric/ids.py)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(
            f"cannot be read ({str(exc).splitlines()[0][:120]}).",
            path=path,
            fix="pass a predictions.csv written by `role-rubric cv`.",
        ) from None
    missing = [c for c in [*KEYS, "question_id", "method", "expected", "answer"] if c not in predictions.columns]
    if missing:
        raise InputError(
            f"missing column(s) {missing}.",
            path=path,
            fix="pass a predictions.csv written by `role-rubric cv`.",
        )
    if method is not None and method not in set(predictions["method"]):
        raise InputError(f"no rows of method {method!r}.", path=path, fix="rerun `role-rubric cv` on this dataset.")
    found = sorted(set(predictions["question_id"]))
    if found != [target]:
        raise InputError(
            f"predictions are for question(s) {found}, {reader} target is {target!r}.",
            path=path,
            fix=target_fix or f"pass target={found[0]} or a cv folder for {target}.",
        )
    for column in ("expected", "answer"):
        values = pd.to_numeric(predictions[column], errors="coerce").to_numpy(dtype=float)
        bad = np.flatnonzero(~np.isfinite(values))
        if bad.size:
            raise InputError(
                f"{column} {predictions[column].iloc[bad[0]]!r} is not a number.",
                path=path,
                row=int(bad[0]) + 1,
                fix="pass a predictions.csv written by `role-rubric cv`.",
            )
        predictions[column] = values
    return predictions


def _cv_info(path: Path) -> dict[str, Any]:
    """The settings, folds and seeds a cv folder's metrics.json records ({} without one), checked."""
    if not path.exists():
        return {}
    fix = "pass a cv folder written by `role-rubric cv`, or delete its metrics.json to use this report's settings."
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc}).", path=path, fix=fix) from None
    if not isinstance(info, dict) or not isinstance(info.get("settings", {}), dict):
        raise InputError("is not the metrics.json of a cv run (no settings object).", path=path, fix=fix)
    for key in ("folds", "seed", "fold_seed"):
        value = info.get(key, 2)
        if isinstance(value, bool) or not isinstance(value, int) or value < (2 if key == "folds" else 0):
            raise InputError(f"{key}={value!r} is not valid.", path=path, fix=fix)
    from calibration.schema import check_settings

    check_settings(info.get("settings", {}), source=path)
    return info


def previous_for_report(
    folder: Any, target: str, info: dict[str, Any], predictions: pd.DataFrame, labels: list[str]
) -> pd.DataFrame | None:
    """cv's previous_predictions.csv, keyed as the report keys rows and checked against the network's rows of
    the last directory; without it (one directory, or a cv that wrote none), the deploy line says so."""
    from calibration.data.union import qualified_predictions

    previous = read_previous(folder, target, info)
    if previous is None:
        if len(labels) > 1:
            log.info(
                f"report: {Path(folder) / PREVIOUS_FILE} is not there (a cv without baselines, or of an earlier "
                "version): the deploy line is chosen without the model trained without the last directory"
            )
        return None
    previous = qualified_predictions(previous)
    check_previous(previous, predictions, labels[-1], folder)
    return previous
