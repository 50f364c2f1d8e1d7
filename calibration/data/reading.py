"""Reading and checking the native dataset files: llm.csv and labels.csv (or .parquet) -> the aligned arrays
of a `Dataset` (calibration/data/dataset.py).

Every bad input stops here as one `InputError` naming the file, the 1-based data row and the fix, so the
Dataset and its loaders only ever see checked tables. Kept apart from the Dataset class: what a file may hold
(and what each mistake in it is told) changes for other reasons than what the network is fed.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Literal, overload

import numpy as np
import pandas as pd

from rubric.errors import InputError
from rubric.ids import clean_id_columns
from rubric.judge.health import health_of_llm
from rubric.schema import Rubric, format_value

log = logging.getLogger(__name__)  # warnings about the run (stderr); calibration/cli.py prints them (rubric/notices.py)

LLM_COLUMNS = ("conversation_id", "turn", "question_id", "option", "prob")
LABEL_COLUMNS = ("conversation_id", "turn", "judge_id", "question_id", "answer")
PROB_SUM_TOLERANCE = 1e-3


def warn_if_unreliable(llm: pd.DataFrame, path: Path) -> None:
    """A judge that mostly named no option (median coverage < 0.5 or > 5% fallbacks) gives distributions that
    are renormalised noise: train, cv and the rest say so (rubric/judge/health.py), and go on."""
    health = health_of_llm(llm)
    if health is not None and health.warning():
        log.warning(f"{path}: {health.warning()} ({health.describe()})")


def as_text_ids(df: pd.DataFrame) -> pd.DataFrame:
    """Id columns as plain strings ("" for a missing turn), whatever types the caller used."""
    return clean_id_columns(df.reset_index(drop=True))


@overload
def find_table(root: Path, stem: str, *, required: Literal[True]) -> Path: ...
@overload
def find_table(root: Path, stem: str, *, required: bool) -> Path | None: ...
def find_table(root: Path, stem: str, *, required: bool) -> Path | None:
    """ROOT/STEM.csv or ROOT/STEM.parquet; where neither is there, None, or with `required` one InputError."""
    for suffix in (".csv", ".parquet"):
        if (root / f"{stem}{suffix}").exists():
            return root / f"{stem}{suffix}"
    if required:
        raise InputError(f"no {stem}.csv or {stem}.parquet in the dataset directory.", path=root, fix=_FIXES[stem])
    return None


_FIXES = {
    "llm": "run `role-rubric gather` (or `role-rubric import`) to write the judge distributions.",
    "labels": "add labels.csv with conversation_id,turn,judge_id,question_id,answer.",
}


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """Read a CSV/parquet with id columns as strings; check it is non-empty and has the columns."""
    try:
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        else:
            # Everything as text: ids stay exact ("007" is not 7) and errors quote what the user wrote.
            df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty.", path=path, fix=f"write a header row: {','.join(columns)}.") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError, ValueError) as exc:
        raise InputError(
            f"cannot be read ({str(exc).splitlines()[0]}).", path=path, fix="write a valid CSV/parquet file."
        ) from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}.", path=path, fix=f"the header must include {','.join(columns)}."
        )
    if df.empty:
        failures = path.parent / "failures.csv"  # an all-failed gather writes a header-only llm.csv beside it
        fix = (
            f"every request of the gather that wrote it failed: see {failures}, fix the cause and rerun gather."
            if failures.exists()
            else "add data rows."
        )
        raise InputError("the file has a header but no rows.", path=path, fix=fix)
    return clean_id_columns(df.reset_index(drop=True))  # " 21" is judge "21" (rubric/ids.py)


def _row(index: int) -> int:
    """1-based data row number (header excluded) of a 0-based frame index."""
    return int(index) + 1


def _numeric(df: pd.DataFrame, column: str, path: Path) -> np.ndarray:
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(np.isnan(values))
    if bad.size:
        raw = df[column].iloc[bad[0]]
        what = (
            "is empty/NaN" if pd.isna(raw) or str(raw).strip().lower() in {"", "nan"} else f"is not a number ({raw!r})"
        )
        raise InputError(
            f"{column} {what}.",
            path=path,
            row=_row(bad[0]),
            fix="write a number; leave out the row entirely for an unanswered question."
            if column == "answer"
            else "write a number in [0, 1].",
        )
    return values


def _turns(df: pd.DataFrame, path: Path) -> pd.Series:
    turn = df["turn"].astype(str).str.strip()
    ok = (turn == "") | turn.str.fullmatch(r"\d+")
    if not ok.all():
        bad = int(np.flatnonzero(~ok.to_numpy())[0])
        raise InputError(
            f"turn {df['turn'].iloc[bad]!r} is not a non-negative integer.",
            path=path,
            row=_row(bad),
            fix="turn is the 0-based index of the assistant message, or empty for a whole conversation.",
        )
    return turn


def _check_questions(df: pd.DataFrame, rubric: Rubric, path: Path) -> None:
    unknown = ~df["question_id"].isin(rubric.ids)
    if unknown.any():
        bad = int(np.flatnonzero(unknown.to_numpy())[0])
        raise InputError(
            f"unknown question {df['question_id'].iloc[bad]!r}.",
            path=path,
            row=_row(bad),
            fix=f"use a question id of the rubric ({', '.join(rubric.ids)}) or add the question to rubric.yaml.",
        )


def _option_indices(df: pd.DataFrame, column: str, values: np.ndarray, rubric: Rubric, path: Path) -> np.ndarray:
    """Option index of each row's value within its question; error on a value the question lacks."""
    out = np.full(len(df), -1, dtype=np.int64)
    qids = df["question_id"].to_numpy()
    for question in rubric.questions:
        rows = np.flatnonzero(qids == question.id)
        if rows.size == 0:
            continue
        opts = np.asarray(question.values)
        match = values[rows, None] == opts[None, :]
        found = match.any(axis=1)
        if not found.all():
            bad = rows[np.flatnonzero(~found)[0]]
            raise InputError(
                f"{column} {df[column].iloc[bad]!r} is not an option of question {question.id!r}.",
                path=path,
                row=_row(bad),
                fix=f"use one of {[o.key for o in question.options]} or add the option to rubric.yaml.",
            )
        out[rows] = match.argmax(axis=1)
    return out


def _check_duplicates(df: pd.DataFrame, keys: list[str], path: Path) -> None:
    dup = df.duplicated(keys, keep="first")
    if dup.any():
        bad = int(np.flatnonzero(dup.to_numpy())[0])
        key = ", ".join(f"{k}={df[k].iloc[bad]!r}" for k in keys)
        raise InputError(f"duplicate key ({key}).", path=path, row=_row(bad), fix="keep one row per key.")


def distribution_arrays(llm: pd.DataFrame, rubric: Rubric, path: Path):
    llm = llm.copy()
    llm["turn"] = _turns(llm, path)
    _check_questions(llm, rubric, path)
    prob = _numeric(llm, "prob", path)
    outside = np.flatnonzero((prob < 0) | (prob > 1))
    if outside.size:
        raise InputError(
            f"prob {prob[outside[0]]} is outside [0, 1].",
            path=path,
            row=_row(outside[0]),
            fix="write probabilities in [0, 1].",
        )
    option_value = _numeric(llm, "option", path)
    option = _option_indices(llm, "option", option_value, rubric, path)
    # by option index, not text: "3" and "3.0" are one option written twice
    canonical = pd.Series(option_value, index=llm.index).map(format_value)
    _check_duplicates(llm.assign(option=canonical), ["conversation_id", "turn", "question_id", "option"], path)

    keys = llm[["conversation_id", "turn"]].drop_duplicates()
    items = _sort_items(keys)
    item_of = pd.MultiIndex.from_frame(items).get_indexer(pd.MultiIndex.from_frame(llm[["conversation_id", "turn"]]))
    q_of = np.array([rubric.ids.index(q) for q in llm["question_id"]], dtype=np.int64)
    n_opts = max(len(q.options) for q in rubric.questions)
    probs = np.zeros((len(items), len(rubric.ids), n_opts), dtype=np.float64)
    probs[item_of, q_of, option] = prob
    present = np.zeros((len(items), len(rubric.ids)), dtype=bool)
    present[item_of, q_of] = True

    sums = probs.sum(axis=2)
    off = present & (np.abs(sums - 1.0) > PROB_SUM_TOLERANCE)
    if off.any():
        i, q = map(int, np.argwhere(off)[0])
        first = np.flatnonzero((item_of == i) & (q_of == q))[0]
        raise InputError(
            f"probabilities of question {rubric.ids[q]!r} for item {tuple(items.iloc[i])} sum to {sums[i, q]:.4f}, not 1.",
            path=path,
            row=_row(first),
            fix="normalise each (conversation_id, turn, question_id) distribution to sum to 1.",
        )
    probs[present] /= sums[present][:, None]  # remove rounding drift within the tolerance
    coverage = _coverage(llm, item_of, q_of, items, rubric, path)
    return items, probs.astype(np.float32), present, coverage


def _coverage(llm, item_of, q_of, items, rubric, path) -> np.ndarray | None:
    if "coverage" not in llm.columns:
        return None
    values = _numeric(llm, "coverage", path)
    outside = np.flatnonzero((values < 0) | (values > 1 + PROB_SUM_TOLERANCE))
    if outside.size:
        raise InputError(
            f"coverage {llm['coverage'].iloc[outside[0]]!r} is outside [0, 1].",
            path=path,
            row=_row(outside[0]),
            fix="coverage is the probability mass the judge put on the options: write a number in [0, 1] "
            "(or drop the column).",
        )
    cov = np.ones((len(items), len(rubric.ids)), dtype=np.float32)
    cov[item_of, q_of] = values
    return cov


def _sort_items(keys: pd.DataFrame) -> pd.DataFrame:
    """Items in a stable order: by conversation id, then turn number (conversation-level items first)."""
    order = keys.assign(_t=keys["turn"].map(lambda t: -1 if t == "" else int(t)))
    order = order.sort_values(["conversation_id", "_t"], kind="stable")
    return order[["conversation_id", "turn"]].reset_index(drop=True).astype(object)


def label_arrays(labels, rubric, items, path, unmatched, report):
    labels = labels.copy()
    labels["turn"] = _turns(labels, path)
    _check_questions(labels, rubric, path)
    if (labels["judge_id"].astype(str).str.strip() == "").any():
        bad = int(np.flatnonzero((labels["judge_id"].astype(str).str.strip() == "").to_numpy())[0])
        raise InputError("judge_id is empty.", path=path, row=_row(bad), fix="name the human judge of every label.")
    value = _numeric(labels, "answer", path)
    option = _option_indices(labels, "answer", value, rubric, path)
    _check_duplicates(labels, ["conversation_id", "turn", "judge_id", "question_id"], path)

    item_of = pd.MultiIndex.from_frame(items).get_indexer(pd.MultiIndex.from_frame(labels[["conversation_id", "turn"]]))
    orphan = item_of < 0
    if orphan.any():
        if unmatched != "skip":
            bad = int(np.flatnonzero(orphan)[0])
            raise InputError(
                f"label for item ({labels['conversation_id'].iloc[bad]!r}, turn {labels['turn'].iloc[bad]!r}) "
                "has no judge distributions in llm.csv.",
                path=path,
                row=_row(bad),
                fix="gather distributions for that item or remove its labels, or pass unmatched_labels=skip "
                "(train, cv, search, evaluate, report; load_dataset(..., unmatched_labels='skip') from Python) "
                "to skip and count them.",
            )
        report["labels_without_distributions"] = int(orphan.sum())
        labels, item_of, option = labels[~orphan], item_of[~orphan], option[~orphan]

    pair = pd.DataFrame({"item": item_of, "judge": labels["judge_id"].to_numpy()})
    pairs = pair.drop_duplicates().sort_values(["item", "judge"], kind="stable").reset_index(drop=True)
    row_of = pd.MultiIndex.from_frame(pairs).get_indexer(pd.MultiIndex.from_frame(pair))
    judges = sorted(pairs["judge"].unique().tolist())
    answers = np.full((len(pairs), len(rubric.ids)), -1, dtype=np.int64)
    q_of = np.array([rubric.ids.index(q) for q in labels["question_id"]], dtype=np.int64)
    answers[row_of, q_of] = option
    judge_index = {judge: j for j, judge in enumerate(judges)}
    label_judge = pairs["judge"].map(judge_index).to_numpy(np.int64)
    return pairs["item"].to_numpy(np.int64), label_judge, answers, judges
