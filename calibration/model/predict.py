"""Predicted answer distributions: per judge, averaged over trusted judges, or population.

`predict` writes one row per (item, judge, question) with the probability of every option (`p_<value>`,
empty where a question lacks that value) and the `expected` value; `judge_id` is empty for the
population (judge-independent) prediction. Seed-ensemble members' distributions are pooled (by default their
normalised geometric mean) and the target's is recalibrated (see calibration/model/ensemble.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rubric.errors import InputError
from rubric.ids import clean_id_list
from rubric.schema import Rubric, format_value


def expected_values(probs: np.ndarray, values: np.ndarray) -> np.ndarray:
    """(B, Q) expected answer: probs (B, Q, K) times option values (Q, K), summed over options."""
    return (probs * values[None]).sum(-1)


def predictions_frame(
    keys: pd.DataFrame, judge_ids: list[str], probs: np.ndarray, rubric: Rubric, questions: list[str] | None = None
) -> pd.DataFrame:
    """Long predictions table: one row per (key row, question) with p_<value> columns and `expected`.

    keys: (B,) rows with conversation_id and turn; judge_ids: (B,) ("" = population); probs: (B, Q, K).
    """
    all_values = sorted({v for q in rubric.questions for v in q.values})
    frames = []
    for q, question in enumerate(rubric.questions):
        if questions is not None and question.id not in questions:
            continue
        frame = pd.DataFrame(
            {
                "conversation_id": keys["conversation_id"].to_numpy(),
                "turn": keys["turn"].to_numpy(),
                "judge_id": judge_ids,
                "question_id": question.id,
            }
        )
        for value in all_values:
            k = question.option_index(value)
            frame[f"p_{format_value(value)}"] = probs[:, q, k] if k is not None else np.nan
        frame["expected"] = probs[:, q, : len(question.options)] @ np.asarray(question.values)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def prediction_pairs(ds, judges, data_dir) -> tuple[np.ndarray, list[str]]:
    """Which (item, judge) pairs to predict (`predict judges=`): every labelled pair (None or "labelled"), the
    population ("population": judge id ""), or the judges named; as (item index per pair, judge id per pair)."""
    if judges in (None, "labelled"):
        if len(ds.label_item) == 0:
            raise InputError(
                "there are no labels to take judges from.",
                path=data_dir,
                fix="pass judges=population or judges=[id,...].",
            )
        return ds.label_item.copy(), [ds.judges[j] for j in ds.label_judge]
    n = len(ds.items)
    if judges == "population":
        return np.arange(n), [""] * n
    chosen = clean_id_list(judges)
    return np.tile(np.arange(n), len(chosen)), [j for j in chosen for _ in range(n)]
