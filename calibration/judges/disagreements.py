"""The turns a reviewer should open: where a calibrated judge and a reviewer disagree most, and where the
reviewers disagree with each other, ranked, with the trace and span ids of the turn where its conversation
came from traces (conversations.jsonl written by `import source=otel|mlflow|phoenix`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["judge_disagreements", "reviewer_disagreements", "roles_of", "trace_ids", "with_traces"]


def roles_of(data: Path) -> dict[str, str]:
    """conversation_id -> the chatbot role's short name (rubric/conversations.py `role_name`) of every
    conversation in DATA/conversations.jsonl; empty where there is none."""
    from rubric.conversations import role_name

    path = Path(data) / "conversations.jsonl"
    if not path.is_file():
        return {}
    out = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                cid = str(record.get("conversation_id", record.get("id", "")))
                out[cid] = role_name(record.get("chatbot_role"), record)
    return out


def trace_ids(data: Path) -> pd.DataFrame:
    """conversation_id, turn, trace_id, span_id of every turn of DATA/conversations.jsonl that carries them
    (empty frame where there is no such file or no turn does)."""
    path = Path(data) / "conversations.jsonl"
    rows = []
    if path.is_file():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                record = json.loads(line)
                cid = str(record.get("conversation_id", record.get("id", "")))
                for i, turn in enumerate(record.get("turns") or []):
                    if isinstance(turn, dict) and turn.get("trace_id"):
                        rows.append((cid, str(i), str(turn["trace_id"]), str(turn.get("span_id") or "")))
    return pd.DataFrame(rows, columns=["conversation_id", "turn", "trace_id", "span_id"])


def with_traces(frame: pd.DataFrame, traces: pd.DataFrame) -> pd.DataFrame:
    """frame (with conversation_id and turn) with each turn's trace_id and span_id appended (empty where none)."""
    if traces.empty:
        return frame.assign(trace_id="", span_id="")
    return frame.merge(traces, on=["conversation_id", "turn"], how="left").fillna({"trace_id": "", "span_id": ""})


def judge_disagreements(rows: pd.DataFrame, traces: pd.DataFrame) -> pd.DataFrame:
    """rows: one per (LLM judge, question, label row) with llm_judge, question_id, conversation_id, turn,
    reviewer_id, answer, calibrated (the calibrated expected answer) and scale (the question's range).
    Ranked per LLM judge by the gap as a share of the question's range, largest first."""
    frame = rows.assign(gap=rows["calibrated"] - rows["answer"])
    frame["gap_share"] = (frame["gap"].abs() / frame.pop("scale")).round(6)
    frame = frame.sort_values(
        ["llm_judge", "gap_share", "conversation_id", "turn", "question_id", "reviewer_id"],
        ascending=[True, False, True, True, True, True],
        kind="stable",
    )
    frame.insert(1, "rank", frame.groupby("llm_judge").cumcount() + 1)
    return with_traces(frame.reset_index(drop=True), traces)


def reviewer_disagreements(
    keys: pd.DataFrame, answer_value: np.ndarray, question: str, scale: float, traces: pd.DataFrame
) -> pd.DataFrame:
    """Per turn with two or more reviewers of `question`: their answers, and the spread (highest - lowest,
    as a share of the question's range). keys: conversation_id, turn, judge_id of each label row."""
    frame = keys.assign(answer=answer_value)
    grouped = frame.groupby(["conversation_id", "turn"], sort=True)
    out = grouped.agg(
        reviewers=("judge_id", "size"),
        answers=("answer", lambda a: " ".join(f"{v:g}" for v in a)),
        low=("answer", "min"),
        high=("answer", "max"),
    ).reset_index()
    out = out[out["reviewers"] > 1]
    out = out.assign(question_id=question, spread_share=((out["high"] - out["low"]) / scale).round(6))
    out = out[out["spread_share"] > 0].drop(columns=["low", "high"])
    return with_traces(out, traces)
