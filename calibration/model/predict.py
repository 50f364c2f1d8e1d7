"""Predicted answer distributions: per judge, averaged over trusted judges, or population.

`predict` writes one row per (item, judge, question) with the probability of every option (`p_<value>`,
empty where a question lacks that value) and the `expected` value; `judge_id` is empty for the
population (judge-independent) prediction. Seed-ensemble members' distributions are pooled (by default their
normalised geometric mean) and the target's is recalibrated (see calibration/model/ensemble.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from calibration.data.dataset import load_dataset
from calibration.model.files import load_model
from calibration.model.shift import handle_shift, roles_of
from rubric.errors import InputError
from rubric.files import atomic_to_csv
from rubric.identity import check_same_judge, dataset_judge_identity
from rubric.ids import clean_id_list
from rubric.jsonfile import write_json
from rubric.schema import Rubric, format_value

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


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


def run_predict(cfg) -> Path:
    """CLI: `role-rubric predict model=DIR data=DIR out=predictions.csv [judges=labelled|population|[ids]]`."""
    model = load_model(cfg.model)
    check_same_judge(
        model.judge_identity,
        dataset_judge_identity(cfg.data),
        allow=bool(cfg["allow_judge_mismatch"]),
        command="predict",
        where=cfg.data,
    )
    ds = load_dataset(cfg.data, rubric=model.check_rubric(Path(cfg.data) / "rubric.yaml"), require_labels=False)
    shift = handle_shift(model.record.shift_summary(), ds, roles_of([Path(cfg.data)]), str(cfg["on_shift"]), "predict")
    X = torch.from_numpy(ds.features(model.spec))
    item, judge_names = _pairs(ds, cfg["judges"], cfg.data)
    judge = np.array([model.judge_index(j) for j in judge_names], dtype=np.int64)
    unseen = sorted({j for j in judge_names if j and model.judge_index(j) < 0})
    if unseen:
        log.info(
            f"predict: {len(unseen)} judge(s) not seen in training, predicted by the population model: {unseen[:5]}"
        )
    frame = predictions_frame(ds.items.iloc[item], judge_names, model.proba(X, item, judge), ds.rubric)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_to_csv(frame, out)
    shift_out = out.with_name(out.stem + "_shift.json")  # the shift check (calibration/model/shift.py)
    write_json(shift_out, {"shift": shift})
    log.info(f"predict: {len(frame)} rows ({len(item)} item-judge pairs x {len(ds.rubric.ids)} questions)")
    log.info(f"predict: wrote {out} and {shift_out} (shift check)")
    return out


def _pairs(ds, judges, data_dir) -> tuple[np.ndarray, list[str]]:
    """Which (item, judge) pairs to predict: every labelled pair, the population, or chosen judges."""
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
