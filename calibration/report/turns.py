"""The report's per-turn drill-down: every turn with its text, the judge's answers, the calibrated
distribution and the human answers, in a sortable, filterable table inside the self-contained page.

`prepare_turns(...)` returns one row per item (the data) and `turns_payload(...)` what the page reads;
`turns_html(...)` (in calibration/report/turns_html.py, with its TURNS_CSS) renders the
section: the rows and the conversations go into the page as JSON, and a small script draws one page of the
table at a time, so 5,000 turns open and filter fast (measured in tests/calibration/test_report_turns.py).
Clicking a row shows the conversation so far; `report.html#turn=CONVERSATION/TURN` opens a turn directly.
`turn_sections(...)` puts it together for the report, with the per-role and per-violation tables.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.evaluation.cv_predictions import KEYS, REFERENCE, option_values
from calibration.report.turns_html import turns_html


def read_conversations(path: str | Path) -> dict[str, dict[str, Any]]:
    """conversation_id -> {role, chatbot_role, turns: [[user, assistant], ...]} from a conversations.jsonl,
    or {} when there is none. `role` is the role's short name, as every output shows it
    (rubric.conversations.role_name: the record's `role` field where it has one, as the bundled data does)."""
    from rubric.conversations import load_conversations, role_name

    path = Path(path)
    if not path.exists():
        return {}
    return {
        conv.conversation_id: {
            "role": role_name(conv.chatbot_role, conv.record),
            "chatbot_role": conv.chatbot_role,
            "turns": [[t.user, t.assistant] for t in conv.turns],
        }
        for conv in load_conversations(path)
    }


def _conversations_with_roles(data_dir: Path) -> dict[str, dict[str, Any]]:
    """read_conversations of a dataset directory, with the benchmark's short role names where it has them."""
    conversations = read_conversations(data_dir / "conversations.jsonl")
    designs = read_designs(data_dir)
    if designs is not None and "role" in designs.columns:
        for cid, role in designs.drop_duplicates("conversation_id")[["conversation_id", "role"]].itertuples(
            index=False
        ):
            if cid in conversations:
                conversations[cid]["role"] = role
    return conversations


def prepare_turns(
    ds: Any,
    predictions: pd.DataFrame | None,
    conversations: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    adheres_at: float | None = None,
    method: str = REFERENCE,
) -> pd.DataFrame:
    """One row per item of `ds`: ids, role, the judge's expected answer per question (`judge <q>`), the
    calibrated (out-of-fold) target distribution averaged over the item's labelled judges (`p_<value>`,
    `calibrated`, `adherence` = P(answer >= adheres_at)), the human answers (`humans`, `human mean`) and
    `disagreement` = RMSE over the item's judges between each human answer and the calibrated expected
    answer for that judge. Items without out-of-fold predictions (no labels) have NaN there.
    """
    conversations = conversations or {}
    items = ds.items[["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    values = ds.option_values()
    frame = items.copy()
    frame["role"] = [conversations.get(c, {}).get("role", "") for c in items["conversation_id"]]
    expected = (ds.probs * values[None]).sum(axis=2)  # (N, Q) judge's expected answer per question
    for q, qid in enumerate(ds.rubric.ids):
        frame[f"judge {qid}"] = np.where(ds.present[:, q], expected[:, q], np.nan)
    t = ds.target_index
    at = ds.rubric.questions[t].default_adheres_at if adheres_at is None else float(adheres_at)
    frame["judge adherence"] = (ds.probs[:, t] * (values[t] >= at)[None]).sum(axis=1)
    if predictions is None or predictions.empty:
        for column in ("calibrated", "adherence", "human mean", "human adherence", "disagreement"):
            frame[column] = np.nan
        frame["humans"] = ""
        return frame
    rows = predictions[predictions["method"] == method]
    p_cols = [c for c in rows.columns if c.startswith("p_")]
    target_values = np.asarray(option_values(predictions))
    keys = rows[KEYS[:2]].astype(str)
    err = (rows["answer"].to_numpy(float) - rows["expected"].to_numpy(float)) ** 2
    per_item = (
        rows[p_cols + ["expected", "answer"]]
        .assign(
            conversation_id=keys["conversation_id"].to_numpy(),
            turn=keys["turn"].to_numpy(),
            sq=err,
            up=(rows["answer"].to_numpy(float) >= at).astype(float),
        )
        .groupby(["conversation_id", "turn"], sort=False)
        .agg({**{c: "mean" for c in p_cols}, "expected": "mean", "answer": "mean", "sq": "mean", "up": "mean"})
    )
    humans = (
        rows.assign(
            label=rows["judge_id"].astype(str) + ": " + rows["answer"].map(lambda v: f"{v:g}"),
            conversation_id=keys["conversation_id"].to_numpy(),
            turn=keys["turn"].to_numpy(),
        )
        .groupby(["conversation_id", "turn"], sort=False)["label"]
        .agg(", ".join)
    )
    joined = frame.join(per_item, on=["conversation_id", "turn"]).join(humans, on=["conversation_id", "turn"])
    frame[p_cols] = joined[p_cols].to_numpy(float)
    frame["calibrated"] = joined["expected"].to_numpy(float)
    above = [c for c, v in zip(p_cols, target_values, strict=True) if v >= at]
    frame["adherence"] = joined[above].sum(axis=1, min_count=1).to_numpy(float)
    frame["human mean"] = joined["answer"].to_numpy(float)
    frame["human adherence"] = joined["up"].to_numpy(float)
    frame["humans"] = joined["label"].fillna("").to_numpy()
    frame["disagreement"] = np.sqrt(joined["sq"].to_numpy(float))
    return frame


def per_role_table(frame: pd.DataFrame) -> pd.DataFrame | None:
    """Per role: turns, labelled turns, the humans' adherence rate, the calibrated and the raw judge's mean
    adherence probability, and the calibrated model's RMSE against the humans; None for a single role."""
    if frame["role"].nunique() < 2:
        return None
    labelled = frame[frame["disagreement"].notna()]
    grouped = frame.groupby("role")
    out = pd.DataFrame(
        {
            "turns": grouped.size(),
            "labelled": labelled.groupby("role").size(),
            "human adherence rate": labelled.groupby("role")["human adherence"].mean(),
            "calibrated adherence": labelled.groupby("role")["adherence"].mean(),
            "raw judge adherence": labelled.groupby("role")["judge adherence"].mean(),
            "calibrated RMSE": labelled.groupby("role")["disagreement"].apply(lambda d: float(np.sqrt((d**2).mean()))),
        }
    )
    out["labelled"] = out["labelled"].fillna(0).astype(int)
    return out.reset_index()


def violation_table(frame: pd.DataFrame, designs: pd.DataFrame) -> pd.DataFrame:
    """AUC of telling adherent turns from each violation type (turn_designs.csv's `design`), for the
    calibrated adherence (labelled turns, out of fold) and the raw judge's on the same turns."""
    from calibration.evaluation.adherence import violation_aucs

    labelled = frame[frame["adherence"].notna()]
    cal = violation_aucs(labelled, designs, column="adherence")
    raw = violation_aucs(labelled, designs, column="judge adherence")
    return pd.DataFrame(
        [
            {"violation": kind, "adherent turns": v["n_adherent"], "violating turns": v["n_violation"],
             "AUC calibrated": v["auc"], "AUC raw judge": raw[kind]["auc"]}
            for kind, v in cal.items()
        ]
    )  # fmt: skip


def read_designs(data_dir: str | Path) -> pd.DataFrame | None:
    """turn_designs.csv of a benchmark dir (what each turn was built to be), or None."""
    path = Path(data_dir) / "turn_designs.csv"
    if not path.exists():
        return None
    from rubric.ids import clean_id_columns

    return clean_id_columns(pd.read_csv(path, dtype={"conversation_id": str, "turn": str}), ["conversation_id", "turn"])


def _num(value: Any, digits: int = 2) -> float | None:
    """JSON-safe rounded number (None for NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else round(value, digits)


def turns_payload(
    frame: pd.DataFrame,
    conversations: Mapping[str, Mapping[str, Any]],
    *,
    questions: Sequence[str],
    target: str,
    adheres_at: float | None,
) -> dict[str, Any]:
    """What the page's script reads: rows as arrays (columns named once) and the conversations' text."""
    p_cols = [c for c in frame.columns if c.startswith("p_")]
    columns = [
        "conversation_id", "turn", "role", *[f"judge {q}" for q in questions],
        "calibrated", "adherence", "human mean", "disagreement", "humans", "p",
    ]  # fmt: skip
    rows = []
    for rec in frame.to_dict(orient="records"):
        turn = rec["turn"]
        rows.append(
            [
                rec["conversation_id"],
                int(turn) if str(turn).isdigit() else None,
                rec["role"],
                *[_num(rec[f"judge {q}"]) for q in questions],
                _num(rec["calibrated"]),
                _num(rec["adherence"], 3),
                _num(rec["human mean"]),
                _num(rec["disagreement"], 3),
                rec["humans"],
                [_num(rec[c], 3) for c in p_cols],
            ]
        )
    used = set(frame["conversation_id"])
    return {
        "columns": columns,
        "rows": rows,
        "questions": list(questions),
        "target": target,
        "values": [float(c[2:]) for c in p_cols],
        "adheres_at": adheres_at,
        "conversations": {c: dict(v) for c, v in conversations.items() if c in used},
    }


def turn_sections(
    data_dir: str | Path | list[Path], ds: Any, predictions: pd.DataFrame, *, adheres_at: float | None
) -> tuple[dict[str, Any], list[str], str]:
    """The report's per-turn parts: (results for metrics.json, sections per role and per violation type
    (when the data has roles / turn_designs.csv), the drill-down section). data_dir: the dataset directory,
    or the directories `ds` was read from (its conversation ids then prefixed by theirs, "new/c001")."""
    from calibration.data.union import dataset_labels
    from calibration.pages.parts import html_table
    from calibration.report.page import section_html

    dirs = [Path(d) for d in data_dir] if isinstance(data_dir, list) else [Path(data_dir)]
    labels = dataset_labels(dirs) if len(dirs) > 1 else [""]
    conversations: dict[str, Any] = {}
    found: list = []
    for label, folder in zip(labels, dirs, strict=True):
        prefix = f"{label}/" if label else ""
        conversations |= {prefix + cid: conv for cid, conv in _conversations_with_roles(folder).items()}
        designs = read_designs(folder)
        if designs is not None:
            found.append(designs.assign(conversation_id=prefix + designs["conversation_id"]))
    designs = pd.concat(found, ignore_index=True) if found else None
    frame = prepare_turns(ds, predictions, conversations, adheres_at=adheres_at)
    target = ds.rubric.target
    at = "the adherence threshold" if adheres_at is None else f"{adheres_at:g}"
    results: dict[str, Any] = {}
    sections = []
    roles = per_role_table(frame)
    if roles is not None:
        results["per_role"] = roles.to_dict(orient="records")
        sections.append(
            section_html(
                "Per role",
                f"Adherence = P({html.escape(target)} &ge; {at}). Human adherence rate: the share of the human "
                f"answers at or above {at}; calibrated and raw judge: the mean predicted probability (calibrated out "
                "of fold, averaged over each turn's judges); calibrated RMSE against the human answers. Labelled "
                "turns only.",
                None,
                html_table(roles),
            )
        )
    if designs is not None and "design" in designs.columns:
        violations = violation_table(frame, designs)
        results["violation_auc"] = violations.to_dict(orient="records")
        sections.append(
            section_html(
                "Adherent turns against each violation type",
                "AUC = the probability that an adherent turn (as designed in turn_designs.csv) gets a higher adherence "
                "than a violating turn of that type (0.5 = chance, 1 = perfect); calibrated (out of fold) against "
                "the raw judge on the same labelled turns.",
                None,
                html_table(violations),
            )
        )
    payload = turns_payload(frame, conversations, questions=ds.rubric.ids, target=target, adheres_at=adheres_at)
    return results, sections, turns_html(payload)
