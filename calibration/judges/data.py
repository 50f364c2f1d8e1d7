"""What `compare-judges` reads: one dataset directory per judge (or prompt variant), the same turns and the
same reviewers' labels in each, and the folds of conversations every judge is calibrated on.

The label rows are put in one order (the first directory's) and every judge's predictions are placed in it,
so that each comparison is paired: the same reviewer's answer to the same turn, predicted by each judge's
calibrator trained on the same conversations.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.data.dataset import Dataset, load_dataset
from calibration.data.splits import group_folds
from rubric.errors import InputError

KEY = ["conversation_id", "turn", "judge_id"]


@dataclass
class Judge:
    """One judge's gathered directory."""

    name: str
    path: Path
    ds: Dataset
    rows: np.ndarray
    """(R,) its own label row of each row of the shared order (label rows sorted by conversation, turn and
    reviewer)."""
    summary: dict[str, Any] | None
    """Its gather_summary.json (None: not gathered by role-rubric, e.g. imported)."""

    def subset(self, shared_rows: np.ndarray) -> Judge:
        """This judge with only the label rows `shared_rows` of the shared order (kept in that order)."""
        return Judge(
            self.name,
            self.path,
            self.ds.with_label_rows(self.rows[shared_rows]),
            np.arange(len(shared_rows)),
            self.summary,
        )


def judge_names(paths: list[Path], names: list[str] | None) -> list[str]:
    """`names=` where given (one per directory), else each directory's name (its path where two share one)."""
    if names is not None:
        if len(names) != len(paths) or len(set(map(str, names))) != len(names):
            raise InputError(
                f"names= gives {len(names)} name(s) for {len(paths)} data directories (or repeats one).",
                fix="give one distinct name per directory, in data='s order, or leave names= out.",
            )
        return [str(n) for n in names]
    short = [p.name for p in paths]
    return short if len(set(short)) == len(short) else [str(p) for p in paths]


def load_judges(paths: list[Path], names: list[str] | None = None, *, unmatched_labels: str = "error") -> list[Judge]:
    """Each directory as a Judge, checked: at least two, the same rubric, the same label rows and answers."""
    if len(paths) < 2:
        raise InputError(
            "compare-judges needs at least two data directories.",
            fix="pass data=[DIR_A,DIR_B]: the same turns and labels gathered by each judge.",
        )
    names = judge_names(paths, names)
    sets = [load_dataset(p, unmatched_labels=unmatched_labels) for p in paths]
    first = sets[0]
    for path, ds in zip(paths[1:], sets[1:], strict=True):
        _check_rubric(first, ds, paths[0], path)
    compared = labelled_questions(first)
    reference = _label_frame(first, compared)
    order = reference.sort_values(KEY).index.to_numpy()  # the shared order: label rows by their keys
    judges = []
    for name, path, ds in zip(names, paths, sets, strict=True):
        frame = _label_frame(ds, compared)
        rows = frame.sort_values(KEY).index.to_numpy()
        if len(rows) != len(order) or not _same_labels(frame.loc[rows], reference.loc[order]):
            raise InputError(
                f"the labels of {name} are not those of {names[0]} ({len(rows)} label rows against {len(order)}).",
                path=path / "labels.csv",
                fix="gather every judge on the same conversations and copy the same labels.csv into each directory.",
            )
        judges.append(Judge(name, path, ds, rows, _summary(path)))
    return judges


def _check_rubric(first: Dataset, ds: Dataset, first_path: Path, path: Path) -> None:
    """The same labelled questions (ids and options, in order); a question only one of them has must be an input
    no reviewer answers (a reference scorer's, `gather scorer= scorer.beside=`), so it is read, never compared."""
    labelled_mine, labelled_theirs = set(labelled_questions(ds)), set(labelled_questions(first))
    mine = [(q.id, tuple(q.values)) for q in ds.rubric.questions if q.id in labelled_mine]
    theirs = [(q.id, tuple(q.values)) for q in first.rubric.questions if q.id in labelled_theirs]
    inputs_only = set(ds.rubric.ids) ^ set(first.rubric.ids)
    answered_extra = sorted(inputs_only & (labelled_mine | labelled_theirs))
    if mine != theirs or answered_extra:
        raise InputError(
            f"its rubric's questions or options differ from {first_path}'s"
            + (
                f" (the reviewers answer {', '.join(answered_extra)}, which only one of them has)."
                if answered_extra
                else "."
            ),
            path=path / "rubric.yaml",
            fix="compare judges of one rubric: gather each with the same rubric.yaml (a question only one judge "
            "has is allowed where no reviewer answers it, such as a reference scorer's).",
        )


def labelled_questions(ds: Dataset) -> list[str]:
    """The questions some reviewer answered, in rubric order."""
    return [qid for q, qid in enumerate(ds.rubric.ids) if (ds.answers[:, q] >= 0).any()]


def _label_frame(ds: Dataset, questions: list[str]) -> pd.DataFrame:
    """(R,) the label rows' keys and their answers to `questions` (one column each, -1: not answered)."""
    frame = ds.items.iloc[ds.label_item][["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    frame["judge_id"] = [ds.judges[j] for j in ds.label_judge]
    for qid in questions:
        frame[f"a:{qid}"] = ds.answers[:, ds.rubric.ids.index(qid)]
    return frame


def _same_labels(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    return bool((a.to_numpy() == b.to_numpy()).all())


def _summary(path: Path) -> dict[str, Any] | None:
    file = path / "gather_summary.json"
    if not file.is_file():
        return None
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except ValueError:
        return None


def shared_folds(judges: list[Judge], folds: int, fold_seed: int) -> tuple[np.ndarray, np.ndarray]:
    """((R,) fold, (R,) conversation code) of every label row in the shared order. Folds are dealt over the
    labelled conversations (`group_folds`, balanced in label rows), so they are the same for every judge
    whatever else its directory holds."""
    ds = judges[0].ds
    conversation = ds.items["conversation_id"].astype(str).to_numpy()[ds.label_item[judges[0].rows]]
    code = pd.factorize(conversation, sort=True)[0]
    return group_folds(code, folds, fold_seed), code


def fold_of_rows(judge: Judge, fold: np.ndarray) -> np.ndarray:
    """(judge's R,) the shared fold of each of the judge's own label rows."""
    out = np.empty(len(fold), dtype=np.int64)
    out[judge.rows] = fold
    return out


def cost_per_1000_turns(summary: dict[str, Any] | None) -> dict[str, float] | None:
    """Tokens (and dollars, where priced) per 1,000 judged turns, as the last gather recorded them; None
    where it recorded no tokens (an offline judge, imported data, or every answer read from the cache).

    >>> cost_per_1000_turns({"items": 200, "prompt_tokens": 90000, "completion_tokens": 1000, "cost_usd": 0.05})
    {'tokens': 455000.0, 'usd': 0.25}
    >>> cost_per_1000_turns({"items": 200, "prompt_tokens": 0, "completion_tokens": 0}) is None
    True
    """
    if not summary or not summary.get("items"):
        return None
    tokens = int(summary.get("prompt_tokens") or 0) + int(summary.get("completion_tokens") or 0)
    if tokens <= 0:
        return None
    per = 1000 / int(summary["items"])
    out = {"tokens": round(tokens * per, 1)}
    if summary.get("cost_usd") is not None:
        out["usd"] = round(float(summary["cost_usd"]) * per, 4)
    return out
