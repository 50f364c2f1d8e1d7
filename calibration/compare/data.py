"""What `compare` reads: the turns (reply, reference, role), their adherent/violation labels, and per-turn
scores of other methods (an LLM judge's llm.csv, `role-rubric cv` predictions, or a plain score CSV).

Labels file: CSV with `conversation_id, turn` and either `design` (`adherent`, or the violation type, as
in the bundled benchmark's turn_designs.csv) or `adherent` (1/0, with an optional `violation_type`).
Turns without a label, and labels of turns not in the conversations (e.g. a subset of them), are left
out and counted.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from rubric.conversations import load_conversations
from rubric.errors import InputError
from rubric.ids import clean_id_columns

KEY = ["conversation_id", "turn"]


def load_turns(conversations: str | Path, labels: str | Path) -> tuple[pd.DataFrame, dict[str, int]]:
    """One row per labelled assistant turn: conversation_id, turn, role (the role definition), reply,
    reference, label (adherent or the violation type), adherent (0/1). And counts of what was left out."""
    rows = [
        {
            "conversation_id": c.conversation_id,
            "turn": i,
            "role": c.chatbot_role,
            "reply": t.assistant,
            "reference": t.reference,
        }
        for c in load_conversations(conversations)
        for i, t in enumerate(c.turns)
    ]
    turns = pd.DataFrame(rows)
    labelled = _read_labels(labels)
    merged = turns.merge(labelled, on=KEY, how="left", validate="one_to_one")
    outside = labelled.merge(turns[KEY], on=KEY, how="left", indicator=True)["_merge"] == "left_only"
    report = {
        "turns": len(turns),
        "unlabelled_turns": int(merged["label"].isna().sum()),
        "labels_for_other_turns": int(outside.sum()),
    }
    merged = merged.dropna(subset=["label"]).reset_index(drop=True)
    report["no_reference"] = int(merged["reference"].isna().sum())
    merged["adherent"] = (merged["label"] == "adherent").astype(int)
    if merged["adherent"].nunique() < 2:
        raise InputError(
            "the labels need both adherent and violation turns.", path=labels, fix="check the labels file."
        )
    return merged, report


def _read_labels(path: str | Path) -> pd.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise InputError(
            "labels file not found.",
            path=path,
            fix="pass labels=turn_designs.csv (or a CSV with design or adherent).",
        )
    frame = clean_id_columns(pd.read_csv(path, dtype={"conversation_id": str}), ["conversation_id", "question_id"])
    missing = [c for c in KEY if c not in frame.columns]
    if missing:
        raise InputError(
            f"no column(s) {missing}.", path=path, fix="give conversation_id, turn and design (or adherent)."
        )
    if "design" in frame.columns:
        label = frame["design"].astype(str)
    elif "adherent" in frame.columns:
        bad = ~frame["adherent"].isin([0, 1])
        if bad.any():
            raise InputError(
                "adherent must be 0 or 1.",
                path=path,
                row=int(np.flatnonzero(bad)[0]) + 1,
                fix="write 1 (adherent) or 0.",
            )
        kind = frame["violation_type"].fillna("violation").astype(str) if "violation_type" in frame else "violation"
        label = pd.Series(np.where(frame["adherent"] == 1, "adherent", kind), index=frame.index)
    else:
        raise InputError(
            "no design or adherent column.",
            path=path,
            fix="add design (adherent / violation type) or adherent (1/0).",
        )
    out = pd.DataFrame({"conversation_id": frame["conversation_id"], "turn": frame["turn"].astype(int), "label": label})
    if out.duplicated(KEY).any():
        raise InputError("a turn is labelled twice.", path=path, fix="keep one row per (conversation_id, turn).")
    return out


def read_extra_scores(
    path: str | Path, *, target: str = "overall", adheres_at: float = 3.0, method: str = "calibrated"
) -> pd.Series:
    """Per-turn scores in [0, 1] of another method, indexed by (conversation_id, turn):
    - an llm.csv: the judge's P(target answer >= adheres_at);
    - a `role-rubric cv` predictions.csv: rows of `method`, P(answer >= adheres_at) averaged over the
      human judges the turn was predicted for (out-of-fold);
    - any CSV with conversation_id, turn, score."""
    path = Path(path)
    if path.is_dir():
        path = next((path / n for n in ("predictions.csv", "llm.csv") if (path / n).is_file()), path / "llm.csv")
    if not path.is_file():
        raise InputError(
            "score file not found.",
            path=path,
            fix="pass an llm.csv, a cv predictions.csv or a CSV with a score column.",
        )
    frame = clean_id_columns(pd.read_csv(path, dtype={"conversation_id": str}), ["conversation_id", "question_id"])
    if {"question_id", "option", "prob"} <= set(frame.columns):
        rows = frame[(frame["question_id"] == target) & (frame["option"].astype(float) >= adheres_at)]
        score = rows.groupby(KEY)["prob"].sum()
    elif "method" in frame.columns and any(c.startswith("p_") for c in frame.columns):
        rows = frame[frame["method"] == method]
        above = [c for c in frame.columns if c.startswith("p_") and float(c[2:]) >= adheres_at]
        score = rows.assign(score=rows[above].sum(axis=1)).groupby(KEY)["score"].mean()
    elif "score" in frame.columns:
        score = frame.set_index(KEY)["score"].astype(float)
    else:
        raise InputError(
            "cannot read scores from this file.",
            path=path,
            fix="pass an llm.csv, a cv predictions.csv or a CSV with a score column.",
        )
    if score.empty:
        raise InputError(
            f"no scores for target {target!r} / method {method!r}.",
            path=path,
            fix="check extra_target / extra_method.",
        )
    score = score.rename("score").reset_index()
    score["turn"] = score["turn"].astype(int)
    return score.set_index(KEY)["score"].astype(float).clip(0.0, 1.0)
