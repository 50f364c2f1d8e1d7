"""Agreement between predicted expected answers and human answers: pure functions, and what `evaluate` reads
and scores (its command: calibration/commands/evaluate.py)."""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from rubric.errors import InputError
from rubric.jsonfile import jsonable  # noqa: F401  (importable here as before)


def agreement(expected, answers) -> dict[str, float]:
    """RMSE, Pearson, Spearman and Kendall (tau-b) of predictions against answers; NaN where undefined
    (a correlation with a constant side).

    >>> agreement([1.0, 2.0, 3.0], [1, 2, 3])["rmse"]
    0.0
    >>> round(agreement([1.0, 2.0, 4.0], [1, 2, 3])["pearson"], 4)
    0.982
    """
    x = np.asarray(expected, dtype=np.float64)
    y = np.asarray(answers, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"expected and answers must be 1-D of equal length, got {x.shape} and {y.shape}.")
    n = len(x)
    out = {"rmse": float(np.sqrt(np.mean((x - y) ** 2))) if n else math.nan, "n": n}
    constant = n < 2 or np.ptp(x) == 0 or np.ptp(y) == 0
    with warnings.catch_warnings():  # nearly constant inputs (tiny ablation runs) still have a correlation
        warnings.simplefilter("ignore", stats.NearConstantInputWarning)
        out["pearson"] = math.nan if constant else float(stats.pearsonr(x, y)[0])
        out["spearman"] = math.nan if constant else float(stats.spearmanr(x, y)[0])
        out["kendall"] = math.nan if constant else float(stats.kendalltau(x, y)[0])
    return {k: out[k] for k in ("rmse", "pearson", "spearman", "kendall", "n")}


def mean_nll(probs: np.ndarray, answer_index: np.ndarray) -> float:
    """Mean negative log-likelihood of the observed answers: probs (R, K), answer_index (R,) in [0, K).

    >>> round(mean_nll(np.array([[0.5, 0.5], [0.25, 0.75]]), np.array([0, 1])), 4)
    0.4904
    """
    picked = probs[np.arange(len(answer_index)), answer_index]
    return float(-np.mean(np.log(np.clip(picked, 1e-12, None))))


def evaluate_predictions(predictions: pd.DataFrame, labels: pd.DataFrame, question: str) -> dict[str, float]:
    """Join predictions of `question` to the human labels and score the expected answer: per-judge rows
    against that judge's answer; without any, population rows (empty judge_id) against every human answer
    of their item."""
    pred = predictions[predictions["question_id"] == question]
    truth = labels[labels["question_id"] == question]
    keys = ["conversation_id", "turn", "judge_id"]
    joined = pred[pred["judge_id"].astype(str) != ""].merge(truth[keys + ["answer"]], on=keys, how="inner")
    if joined.empty:
        population = pred[pred["judge_id"].astype(str) == ""].drop(columns="judge_id")
        joined = population.merge(truth[keys + ["answer"]], on=keys[:2], how="inner")
    if joined.empty:
        raise InputError(
            f"no prediction of question {question!r} matches a human label.",
            fix="predict on the items of the labelled data (data=the dir holding labels.csv).",
        )
    return agreement(joined["expected"].to_numpy(float), joined["answer"].to_numpy(float))


def target_labels(ds) -> pd.DataFrame:
    """The dataset's validated human answers to its target, long form (labels.csv or .parquet alike): the
    columns conversation_id, turn, judge_id, question_id, answer that `evaluate_predictions` joins on."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    keys = ds.items.iloc[ds.label_item[rows]].reset_index(drop=True)
    return keys.assign(
        judge_id=[ds.judges[j] for j in ds.label_judge[rows]],
        question_id=ds.rubric.target,
        answer=ds.option_values()[t][ds.answers[rows, t]],
    )


def read_predictions(path: Path, rubric) -> pd.DataFrame:
    """A predictions.csv, checked: the columns, one row per (item, judge, question), and every `expected`
    a number within its question's option values (the row and the fix named otherwise)."""
    from rubric.errors import read_text_file

    if not path.is_file():
        raise InputError("predictions file not found.", path=path, fix="run `role-rubric predict` first.")
    read_text_file(path)  # not UTF-8: one line naming the file and line
    ids = {c: str for c in ("conversation_id", "turn", "judge_id", "question_id")}
    fix = "pass a file written by `role-rubric predict`."
    try:
        predictions = pd.read_csv(path, dtype=ids, keep_default_na=False, na_values={"expected": [""]})
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty.", path=path, fix=fix) from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"cannot be read ({str(exc).splitlines()[0]}).", path=path, fix=fix) from None
    for column in ("conversation_id", "turn", "judge_id", "question_id", "expected"):
        if column not in predictions.columns:
            raise InputError(f"missing column {column}.", path=path, fix=fix)
    if predictions.empty:
        raise InputError("the file has a header but no rows.", path=path, fix=fix)
    from rubric.ids import clean_id_columns

    predictions = clean_id_columns(predictions)  # " 21" is judge "21" (rubric/ids.py)
    expected = pd.to_numeric(predictions["expected"], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(expected))
    if bad.size:
        raw = predictions["expected"].iloc[bad[0]]
        what = "is empty" if pd.isna(raw) or str(raw).strip() == "" else f"is not a finite number ({raw!r})"
        raise InputError(
            f"expected {what}.",
            path=path,
            row=int(bad[0]) + 1,
            fix="every row needs the expected answer; rerun `role-rubric predict`.",
        )
    predictions["expected"] = expected
    for question in rubric.questions:
        rows = np.flatnonzero(predictions["question_id"].to_numpy() == question.id)
        low, high = min(question.values), max(question.values)
        outside = rows[(expected[rows] < low - 1e-9) | (expected[rows] > high + 1e-9)]
        if outside.size:
            raise InputError(
                f"expected {expected[outside[0]]:g} of question {question.id!r} is outside its scale [{low:g}, {high:g}].",
                path=path,
                row=int(outside[0]) + 1,
                fix="predict with a model trained on this rubric.",
            )
    keys = ["conversation_id", "turn", "judge_id", "question_id"]
    dup = np.flatnonzero(predictions.duplicated(keys).to_numpy())
    if dup.size:
        key = ", ".join(f"{k}={predictions[k].iloc[dup[0]]!r}" for k in keys)
        raise InputError(
            f"duplicate prediction ({key}).",
            path=path,
            row=int(dup[0]) + 1,
            fix="keep one row per (item, judge, question); do not concatenate prediction files.",
        )
    return predictions
