"""Answers checked against the rubric, and the labelled dataset folder that `import` writes.

An imported label is only kept if its answer is one of its question's option values; a labelling tool
that validates nothing (Label Studio accepts an answer "7") must not put one into training. The output
folder is a complete dataset: the source folder's rubric.yaml, conversations.jsonl, llm.csv and
gather_summary.json (the judge's identity), and a
labels.csv holding the source's labels plus the imported ones (an imported answer replaces an earlier one
by the same judge to the same question of the same turn), so `train data=OUT` runs as it is, and the
sampling plan the labelled conversations were drawn with (sample_plan.csv), so `estimate data=OUT` weights
them as drawn.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from calibration.data.reading import LABEL_COLUMNS, as_text_ids, find_table, read_table
from rubric.errors import InputError
from rubric.files import atomic_to_csv, ensure_out_dir, out_lock
from rubric.schema import Question, Rubric, format_value

# gather_summary.json holds the judge's identity: without it the imported labels' distributions have no judge,
# and a calibrator of another judge could not be refused on them (rubric/judge/identity.py).
COPIED = ("rubric.yaml", "conversations.jsonl", "llm.csv", "llm.parquet", "gather_summary.json")
KEY = ["conversation_id", "turn", "judge_id", "question_id"]


def option_key(question: Question, raw: object) -> str | None:
    """The option as written in labels.csv ("3") if `raw` names one of the question's option values, else
    None. Accepts 3, "3", "3.0" and a copied option text "3: Fully in scope"."""
    if isinstance(raw, bool) or raw is None:
        return None
    text = str(raw).strip()
    if ":" in text:
        text = text.split(":", 1)[0].strip()
    try:
        value = float(text)
    except ValueError:
        return None
    if not math.isfinite(value) or question.option_index(value) is None:
        return None
    return format_value(value)


def options_text(question: Question) -> str:
    """'1, 2, 3 or 4': the values a fix tells the user to choose from."""
    keys = [o.key for o in question.options]
    return ", ".join(keys[:-1]) + f" or {keys[-1]}"


def unknown_questions(names: set[str], rubric: Rubric) -> list[str]:
    return sorted(n for n in names if n not in set(rubric.ids))


def write_labelled_dataset(
    data: str | Path, out: str | Path, labels: pd.DataFrame, *, also: Mapping[str, Path] | None = None
) -> dict[str, int]:
    """Write OUT as a dataset: the source's files copied and labels.csv = its labels + `labels` (which win
    on the same key), and each file of `also` (name in OUT -> the file, checked by the caller: the sampling
    plan) copied under its name. Returns counts for the summary line."""
    data, out = Path(data), Path(out)
    same = out.resolve() == data.resolve()
    existing = existing_labels(data)
    if same and existing is not None:
        raise InputError(
            "out= is the dataset folder, which already has labels; they are never overwritten.",
            path=out,
            fix="choose a new out= folder: it gets the dataset with the old and the new labels together.",
        )
    ensure_out_dir(out)
    labels = labels[list(LABEL_COLUMNS)].astype(str)
    kept = replaced = 0
    if existing is not None:
        new_keys = set(map(tuple, labels[KEY].to_numpy()))
        clash = existing[KEY].apply(tuple, axis=1).isin(new_keys)
        replaced, kept = int(clash.sum()), int((~clash).sum())
        labels = pd.concat([existing[~clash], labels], ignore_index=True)
    if not same:
        _refuse_dropping(out, labels)
    with out_lock(out):
        if not same:
            for name in COPIED:
                if (data / name).exists():
                    shutil.copyfile(data / name, out / name)
        for name, source in (also or {}).items():
            if source.resolve() != (out / name).resolve():
                shutil.copyfile(source, out / name)
        atomic_to_csv(labels, out / "labels.csv")
    return {"labels_written": len(labels), "earlier_labels_kept": kept, "earlier_labels_replaced": replaced}


def _refuse_dropping(out: Path, labels: pd.DataFrame) -> None:
    """An out= folder that already holds labels (an earlier import, or another team's folder) is rewritten only
    if every label it holds is still in the new labels.csv (perhaps corrected): an import never drops a
    reviewer's answer."""
    there = existing_labels(out)
    if there is None:
        return
    # by key: a corrected answer (same reviewer, question and turn) replaces the earlier one, as documented
    lost = there[KEY].merge(labels[KEY].drop_duplicates(), how="left", indicator=True)["_merge"].eq("left_only")
    if lost.any():
        raise InputError(
            f"out= already holds {int(lost.sum())} label(s) that the new labels.csv would not keep (its "
            f"row {int(lost.to_numpy().argmax()) + 1} first).",
            path=out / "labels.csv",
            fix="import into a new out= folder, or pass data= the folder those labels belong to.",
        )


def existing_labels(data: Path) -> pd.DataFrame | None:
    """The dataset folder's labels (labels.csv or .parquet) as text columns, or None where it has none."""
    path = find_table(data, "labels", required=False)
    if path is None:
        return None
    return as_text_ids(read_table(path, LABEL_COLUMNS))[list(LABEL_COLUMNS)].astype(str)


def copied_names(data: str | Path) -> list[str]:
    return [name for name in COPIED if (Path(data) / name).exists()]
