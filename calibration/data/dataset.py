"""The native dataset directory, validated, and the tensors the calibration network trains on.

A dataset directory holds rubric.yaml, llm.csv (or .parquet) and, for training, labels.csv (or .parquet);
see DESIGN.md. Items are assistant turns keyed by (conversation_id, turn); `turn` is "" for a whole
conversation. Every problem raises `InputError` naming the file, the 1-based data row and the fix; the
reading and checking of the files is in calibration/data/reading.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.data.reading import (
    LABEL_COLUMNS,
    LLM_COLUMNS,
    as_text_ids,
    distribution_arrays,
    find_table,
    label_arrays,
    read_table,
    warn_if_unreliable,
)
from rubric.errors import InputError
from rubric.schema import Rubric, load_rubric, note_default_target


@dataclass
class Dataset:
    """Judge distributions and human labels as arrays, aligned on items and questions.

    Shapes: N items, Q questions (rubric order), K = the largest number of options, R label rows
    (one per (item, human judge) pair).
    """

    rubric: Rubric
    items: pd.DataFrame
    """(N,) columns conversation_id, turn (strings; turn "" for whole conversations)."""
    probs: np.ndarray
    """(N, Q, K) float32 judge distributions; zero on padded options and on missing questions."""
    present: np.ndarray
    """(N, Q) bool: the judge answered this question for this item."""
    coverage: np.ndarray | None
    """(N, Q) float32 probability mass the judge put on the options before normalising, if recorded."""
    label_item: np.ndarray
    """(R,) int64 item index of each label row."""
    label_judge: np.ndarray
    """(R,) int64 index into `judges`."""
    answers: np.ndarray
    """(R, Q) int64 option index of each human answer, -1 where not answered."""
    judges: list[str]
    """Human judge ids, sorted."""
    report: dict[str, int] = field(default_factory=dict)
    """Counts of anything skipped while loading (nothing is dropped silently)."""
    label_weight: np.ndarray | None = None
    """(R,) float64 how much each label row counts in training (its directory's `weights=`); None: 1 each."""

    @property
    def n_options(self) -> np.ndarray:
        """(Q,) number of options of each question."""
        return np.array([len(q.options) for q in self.rubric.questions])

    @property
    def target_index(self) -> int:
        return self.rubric.ids.index(self.rubric.target)

    @property
    def groups(self) -> np.ndarray:
        """(N,) conversation index of each item, for splits that keep a conversation together."""
        return pd.factorize(self.conversation_keys(), sort=True)[0]

    def conversation_keys(self) -> np.ndarray:
        """(N,) what tells conversations apart: the id, qualified by the item's directory where several were
        read as one ("new/c001": items' `dataset` column, calibration/data/union.py), so ids may repeat across
        them."""
        ids = self.items["conversation_id"].astype(str)
        if "dataset" not in self.items:
            return ids.to_numpy()
        return (self.items["dataset"].astype(str) + "/" + ids).to_numpy()

    def with_label_rows(self, rows: np.ndarray) -> Dataset:
        """This data with only the label rows `rows` (their weights too)."""
        weight = None if self.label_weight is None else self.label_weight[rows]
        return dataclasses.replace(
            self,
            label_item=self.label_item[rows],
            label_judge=self.label_judge[rows],
            answers=self.answers[rows],
            label_weight=weight,
        )

    def only_target(self) -> Dataset:
        """This data with the target question alone (its distributions and answers; the same label rows), for
        a model of the target from its own distribution: the other questions' outputs would be dead weight."""
        t = [self.target_index]
        rubric = dataclasses.replace(self.rubric, questions=(self.rubric.question(self.rubric.target),))
        return dataclasses.replace(
            self,
            rubric=rubric,
            probs=self.probs[:, t],
            present=self.present[:, t],
            coverage=None if self.coverage is None else self.coverage[:, t],
            answers=self.answers[:, t],
        )

    def option_values(self) -> np.ndarray:
        """(Q, K) numeric value of each option, 0 on padding."""
        values = np.zeros((len(self.rubric.questions), int(self.n_options.max())), dtype=np.float64)
        for q, question in enumerate(self.rubric.questions):
            values[q, : len(question.options)] = question.values
        return values

    def feature_spec(self, *, drop_questions: tuple[str, ...] = ()) -> dict:
        """What the network input holds for this data (the coverage wherever the data has it); saved with a
        model so prediction rebuilds it."""
        unknown = set(drop_questions) - set(self.rubric.ids)
        if unknown:
            raise InputError(
                f"drop_questions names unknown question(s) {sorted(unknown)}.", fix=f"use ids from {self.rubric.ids}."
            )
        keep = [qid for qid in self.rubric.ids if qid not in drop_questions]
        if not keep:
            raise InputError("drop_questions removes every question.", fix="keep at least one input question.")
        keep_idx = [self.rubric.ids.index(q) for q in keep]
        return {
            "questions": keep,
            "coverage": self.coverage is not None,
            "mask": bool(not self.present[:, keep_idx].all()),
        }

    def features(self, spec: dict) -> np.ndarray:
        """(N, D) network input: the distributions of the spec's questions concatenated, then their
        coverage (1 where not recorded) and a question-missing mask, if the spec has them."""
        keep = [self.rubric.ids.index(q) for q in spec["questions"]]
        parts = [self.probs[:, q, : self.n_options[q]] for q in keep]
        if spec["coverage"]:
            coverage = self.coverage if self.coverage is not None else np.ones(self.present.shape, np.float32)
            parts.append(coverage[:, keep])
        if spec["mask"]:
            parts.append((~self.present[:, keep]).astype(np.float32))
        if spec.get("expected"):  # last, where the network's base reads them
            parts.append(self.expected_inputs(spec["expected"]))
        return np.concatenate(parts, axis=1).astype(np.float32)

    def expected_spec(self, questions: list[str]) -> dict:
        """The questions (of `questions`, those the judge answered at least once) whose expected answers
        feed a linear model, with their mean and scale over this data's items (no labels are used)."""
        idx = [q for q in (self.rubric.ids.index(i) for i in questions) if self.present[:, q].any()]
        raw = self._expected_answers()
        return {
            "questions": [self.rubric.ids[q] for q in idx],
            "mean": [float(raw[self.present[:, q], q].mean()) for q in idx],
            "scale": [float(max(raw[self.present[:, q], q].std(), 1e-3)) for q in idx],
        }

    def expected_inputs(self, expected: dict) -> np.ndarray:
        """(N, E) expected answers standardised with the spec's own mean and scale (fixed when the model was
        trained, so new data is placed on the training scale, not its own); a question the judge did not
        answer for an item sits at the training mean (0)."""
        idx = [self.rubric.ids.index(q) for q in expected["questions"]]
        z = (self._expected_answers()[:, idx] - np.asarray(expected["mean"])) / np.asarray(expected["scale"])
        return np.where(self.present[:, idx], z, 0.0).astype(np.float32)

    def _expected_answers(self) -> np.ndarray:
        """(N, Q) the judge's expected answer to every question (0 where it gave no distribution)."""
        return (self.probs.astype(np.float64) * self.option_values()[None]).sum(-1)

    def item_keys(self) -> list[tuple[str, str]]:
        return list(zip(self.items["conversation_id"], self.items["turn"], strict=True))


def load_dataset(
    path: str | Path,
    *,
    rubric: Rubric | None = None,
    target: str | None = None,
    require_labels: bool = True,
    unmatched_labels: str = "error",
) -> Dataset:
    """Load and validate a native dataset directory.

    Args:
        path: the directory (rubric.yaml, llm.csv|parquet, labels.csv|parquet).
        rubric: use this rubric instead of the directory's rubric.yaml.
        target: the training target question (default: the rubric's).
        require_labels: fail if there is no labels file (training needs one, prediction does not).
        unmatched_labels: "error" (default) or "skip" labels of items without judge distributions;
            skipped rows are counted in `Dataset.report`.
    """
    root = Path(path)
    if not root.is_dir():
        raise InputError("dataset directory not found.", path=root, fix="pass data=DIR with rubric.yaml and llm.csv.")
    rubric = (rubric or load_rubric(root / "rubric.yaml")).with_target(target)
    note_default_target(rubric)  # once per command: which question became the target, when none was chosen
    llm_path = find_table(root, "llm", required=True)
    label_path = find_table(root, "labels", required=require_labels)
    llm = read_table(llm_path, LLM_COLUMNS)
    ds = dataset_from_frames(
        rubric,
        llm,
        None if label_path is None else read_table(label_path, LABEL_COLUMNS),
        llm_source=llm_path,
        labels_source=label_path,
        unmatched_labels=unmatched_labels,
    )
    warn_if_unreliable(llm, llm_path)
    return ds


def dataset_from_frames(
    rubric: Rubric,
    llm: pd.DataFrame,
    labels: pd.DataFrame | None = None,
    *,
    llm_source: str | Path = "<llm>",
    labels_source: str | Path | None = "<labels>",
    unmatched_labels: str = "error",
) -> Dataset:
    """Validate in-memory tables in the native long formats (ids as strings) and build a Dataset."""
    llm = as_text_ids(llm)
    items, probs, present, coverage = distribution_arrays(llm, rubric, Path(str(llm_source)))
    report: dict[str, int] = {}
    if labels is None:
        empty = np.zeros(0, dtype=np.int64)
        answers = np.zeros((0, len(rubric.ids)), np.int64)
        return Dataset(rubric, items, probs, present, coverage, empty, empty, answers, [], report)
    labels = as_text_ids(labels)
    label_item, label_judge, answers, judges = label_arrays(
        labels, rubric, items, Path(str(labels_source)), unmatched_labels, report
    )
    return Dataset(rubric, items, probs, present, coverage, label_item, label_judge, answers, judges, report)
