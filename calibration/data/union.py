"""Several dataset directories trained on as one: `data=[OLD,NEW] weights=[1,3]`.

A calibrator goes stale when the chatbot, the judge prompt or the reviewers change; a few labelled
conversations of the new release, trained on together with the old labels, help. `load_training_data`
reads each directory as `load_dataset` does, checks that they ask the same rubric of the same judge, and
stacks them into one `Dataset`:
- items keep their directory (the `dataset` column, so "c001" may name different conversations in two
  directories: `Dataset.conversation_keys` tells them apart, and cross-validation folds and validation splits
  keep each conversation whole);
- human reviewers are people: the same judge_id in two directories is one reviewer, with one set of offsets;
- `weights=` gives each directory's label rows a weight (`Dataset.label_weight`) in the training loss, the
  early-stopping loss and the recalibration; equal weights are no weights (bit for bit the same model).
One directory (a plain `data=DIR`) is read exactly as before: no `dataset` column, no weights.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from calibration.data.dataset import Dataset, load_dataset
from calibration.model.provenance import shared_conversation
from rubric.errors import InputError
from rubric.files import file_sha256
from rubric.judge.identity import NO_RECORD, dataset_judge_identity, describe, identity_differences
from rubric.notices import warn_data
from rubric.schema import load_rubric

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


@dataclass
class Source:
    """One directory of the training data: its path as given, its weight and its files' checksums."""

    path: Path
    weight: float
    files: dict[str, str]
    """file name -> SHA-256 of rubric.yaml, llm.* and labels.*, so a model names exactly what it learned from."""
    dataset: Dataset


@dataclass
class TrainingData:
    """The stacked dataset, where it came from, and the judge whose distributions it holds."""

    ds: Dataset
    sources: list[Source]
    judge: dict | None
    """The judge identity gather recorded (the first directory that records one; None: none does)."""

    def summary(self) -> str:
        """'2 directories: old (113 conversations, weight 1), new (20 conversations, weight 3)'."""
        if len(self.sources) == 1:
            return str(self.sources[0].path)
        parts = [
            f"{s.path} ({s.dataset.groups.max() + 1 if len(s.dataset.items) else 0} conversations, weight {s.weight:g})"
            for s in self.sources
        ]
        return f"{len(parts)} directories: " + ", ".join(parts)


def data_paths(data) -> list[Path]:
    """`data=` as a list of directories: one path, or a list of them (`data=[DIR1,DIR2]`)."""
    paths = [Path(data)] if isinstance(data, str | Path) else [Path(str(p)) for p in data]
    if not paths:
        raise InputError("data= names no dataset directory.", fix="pass data=DIR or data=[DIR1,DIR2].")
    seen = set()
    for p in paths:
        key = p.resolve()
        if key in seen:
            raise InputError(f"data= names {p} twice.", path=p, fix="name each dataset directory once.")
        seen.add(key)
    return paths


MIN_WEIGHT, MAX_WEIGHT = 1e-6, 1e6
"""A directory's weight, unless 0: what float32 losses carry without overflowing or vanishing."""


def data_weights(weights, n: int) -> list[float] | None:
    """`weights=` checked against the n directories: one finite non-negative number each, not all zero."""
    if weights is None:
        return None
    given = [weights] if isinstance(weights, str | int | float) else list(weights)
    if any(isinstance(w, bool | np.bool_) for w in given):  # float(True) is 1.0: a typo, never a weight
        raise InputError(
            f"weights={given} holds true/false, not numbers.",
            fix="pass one number per data directory, e.g. weights=[1,3].",
        )
    try:
        values = [float(w) for w in given]
    except (TypeError, ValueError):
        raise InputError(
            f"weights={given} are not numbers.", fix="pass one number per data directory, e.g. weights=[1,3]."
        ) from None
    if len(values) != n:
        raise InputError(
            f"weights= has {len(values)} value(s) for {n} data director{'y' if n == 1 else 'ies'}.",
            fix=f"pass one weight per directory of data=, e.g. weights=[{','.join(['1'] * n)}].",
        )
    if not all(np.isfinite(values)) or min(values) < 0:
        raise InputError(
            f"weights={values} has a negative or non-finite weight.",
            fix="pass finite weights >= 0 (0 leaves a directory's labels out of training).",
        )
    if any(v != 0 and not MIN_WEIGHT <= v <= MAX_WEIGHT for v in values):
        # float32 label weights overflow (1e300 -> inf) or vanish (1e-300 -> 0): training would end in NaN.
        raise InputError(
            f"weights={values} has a weight outside [{MIN_WEIGHT:g}, {MAX_WEIGHT:g}] (besides 0); only "
            "their ratios matter, and these cannot be trained on.",
            fix="pass weights of a similar size, e.g. weights=[1,3].",
        )
    if max(values) == 0:
        raise InputError(
            f"weights={values} are all zero: nothing would be learned.",
            fix="give at least one directory a positive weight.",
        )
    return values


class TrainingKeys(Protocol):
    """The keys that the schemas of the commands that train share (train, cv, search, report)."""

    @property
    def data(self) -> str | list[str]: ...
    @property
    def weights(self) -> list[float] | None: ...
    @property
    def target(self) -> str | None: ...
    @property
    def unmatched_labels(self) -> str: ...
    @property
    def allow_judge_mismatch(self) -> bool: ...


def training_data_of(cfg: TrainingKeys) -> TrainingData:
    """`load_training_data` with the keys every command that trains reads the same way (train, cv, search,
    report: data, weights, target, unmatched_labels, allow_judge_mismatch), from its checked config."""
    return load_training_data(
        cfg.data,
        weights=cfg.weights,
        target=cfg.target,
        unmatched_labels=cfg.unmatched_labels,
        allow_judge_mismatch=cfg.allow_judge_mismatch,
    )


def load_training_data(
    data: str | Path | Sequence[str | Path],
    *,
    weights: Sequence[float] | None = None,
    target: str | None = None,
    unmatched_labels: str = "error",
    allow_judge_mismatch: bool = False,
) -> TrainingData:
    """Read one dataset directory, or several as one training set (see the module docstring).

    Args:
        data: a directory, or a list of them (`data=[OLD,NEW]`).
        weights: one weight per directory for its label rows (`weights=[1,3]`), or None (equal).
        target: the training target question (default: the rubric's).
        unmatched_labels: "error" or "skip", as `load_dataset`.
        allow_judge_mismatch: train on directories gathered from different judges anyway.

    Returns:
        TrainingData: `.ds` the stacked Dataset (items' `dataset` column, `label_weight`), `.sources` each
        directory with its weight and checksums, `.judge` the judge identity they share.
    """
    paths = data_paths(data)
    values = data_weights(weights, len(paths)) or [1.0] * len(paths)
    rubric = _common_rubric(paths)
    judge = _common_judge(paths, allow=allow_judge_mismatch)
    datasets = [load_dataset(p, rubric=rubric, target=target, unmatched_labels=unmatched_labels) for p in paths]
    sources = [Source(p, w, file_checksums(p), d) for p, w, d in zip(paths, values, datasets, strict=True)]
    _refuse_copies(sources)
    _refuse_shared_conversations(sources)
    ds = datasets[0] if len(datasets) == 1 else stack(datasets, dataset_labels(paths), values)
    return TrainingData(ds, sources, judge)


def dataset_labels(paths: list[Path]) -> list[str]:
    """What the `dataset` column calls each directory: its folder name, or the path as given where two
    folders share a name."""
    names = [p.name or str(p) for p in paths]
    return names if len(set(names)) == len(names) else [str(p) for p in paths]


def qualified(ds: Dataset) -> Dataset:
    """`ds` with each conversation id prefixed by its directory ("new/c001"), for outputs that key rows by
    conversation id alone (the report); `ds` itself where it was read from one directory."""
    if "dataset" not in ds.items:
        return ds
    items = ds.items.assign(conversation_id=ds.items["dataset"].astype(str) + "/" + ds.items["conversation_id"])
    return dataclasses.replace(ds, items=items.drop(columns="dataset"))


def _common_rubric(paths: list[Path]):
    """The first directory's rubric, after checking every other directory asks the same questions."""
    for p in paths:
        if not p.is_dir():
            raise InputError("dataset directory not found.", path=p, fix="pass data=DIR with rubric.yaml and llm.csv.")
    first = load_rubric(paths[0] / "rubric.yaml")
    for p in paths[1:]:
        other = load_rubric(p / "rubric.yaml")
        if other.fingerprint() != first.fingerprint():
            raise InputError(
                f"this rubric (questions {other.ids}) differs from {paths[0] / 'rubric.yaml'} (questions "
                f"{first.ids}); directories trained on together must ask the same questions with the same options.",
                path=p / "rubric.yaml",
                fix="gather every directory with one rubric, or train on them separately.",
            )
    return first


def _common_judge(paths: list[Path], *, allow: bool) -> dict | None:
    """The judge identity the directories share (gather_summary.json); refuses two different judges unless
    allow (the first one is then recorded). Directories without a record (imported data) are not compared."""
    known = [(p, identity) for p in paths if (identity := dataset_judge_identity(p))]
    if not known:
        return None
    first_path, first = known[0]
    unknown = [p for p in paths if not dataset_judge_identity(p)]
    if unknown and not allow:
        raise InputError(
            f"{NO_RECORD}, while {first_path} was gathered by the {describe(first)}: a calibrator learns "
            "one judge's habits.",
            path=unknown[0],
            fix="import it again from its gathered folder (import carries gather_summary.json), copy the "
            "gather_summary.json of the folder its llm.csv was gathered in, or pass "
            "allow_judge_mismatch=true if its judge is the same.",
        )
    for p in unknown:
        warn_data("train", [f"{p} {NO_RECORD}; trained on anyway (allow_judge_mismatch=true)"])
    for p, identity in known[1:]:
        diffs = identity_differences(first, identity)
        if diffs and not allow:
            raise InputError(
                f"its distributions come from another judge than {first_path}'s ({'; '.join(diffs)}): a calibrator "
                "learns one judge's habits.",
                path=p / "gather_summary.json",
                fix="gather every directory with one judge, or pass allow_judge_mismatch=true to train on both anyway.",
            )
        if diffs:
            warn_data(
                "train",
                [
                    f"judge mismatch allowed between {first_path} and {p} ({'; '.join(diffs)}); "
                    f"the model records the {describe(first)}"
                ],
            )
    return first


def _refuse_copies(sources: list[Source]) -> None:
    """Two directories with the same rubric, distributions and labels are one dataset named twice (a copy):
    its labels would silently count double."""
    seen: dict[tuple, Path] = {}
    for s in sources:
        key = tuple(sorted(s.files.items()))
        if key in seen:
            raise InputError(
                f"this directory holds the same rubric, distributions and labels as {seen[key]} (a copy): "
                "its labels would count twice.",
                path=s.path,
                fix="name the dataset once (weights= gives a directory more weight).",
            )
        seen[key] = s.path


def _refuse_shared_conversations(sources: list[Source]) -> None:
    """A conversation labelled in two directories (the same dialogue, gathered or imported twice) would count
    twice in training, and cross-validation would put it on both sides of a fold (its directories' rows are
    dealt apart), so cv would measure a model on a conversation it trained on."""
    shared = shared_conversation(sources) if len(sources) > 1 else None
    if shared:
        cid, path, earlier = shared
        raise InputError(
            f"labelled conversation {cid!r} is also labelled in {earlier} (the same dialogue, recognised by its "
            "text or its judge distributions): its labels would count twice, and cv would test on it after "
            "training on it.",
            path=path,
            fix="keep its labels in one directory: merge the two labels.csv files into one directory, or drop "
            "its rows from one of them.",
        )


def file_checksums(path: Path) -> dict[str, str]:
    """SHA-256 of the directory's rubric, distributions and labels (model.json `trained_on` `files`)."""
    files = [path / "rubric.yaml"] + [
        path / f"{stem}{suffix}" for stem in ("llm", "labels") for suffix in (".csv", ".parquet")
    ]
    return {f.name: file_sha256(f) for f in files if f.exists()}


def stack(datasets: list[Dataset], names: list[str], weights: list[float]) -> Dataset:
    """Datasets of one rubric as one: items tagged with their `names`, reviewers merged by id, each label row
    weighted by its dataset's weight (no weights where all are equal)."""
    judges = sorted({j for d in datasets for j in d.judges})
    offsets = np.cumsum([0] + [len(d.items) for d in datasets[:-1]])
    items = pd.concat(
        [d.items.assign(dataset=name) for d, name in zip(datasets, names, strict=True)], ignore_index=True
    )
    coverage = None
    if any(d.coverage is not None for d in datasets):  # 1 where a directory did not record it, as features() reads
        coverage = np.concatenate(
            [d.coverage if d.coverage is not None else np.ones(d.present.shape, np.float32) for d in datasets]
        )
    remap = [np.array([judges.index(j) for j in d.judges], dtype=np.int64) for d in datasets]
    label_weight = None
    if len(set(weights)) > 1:
        label_weight = np.concatenate([np.full(len(d.label_item), w) for d, w in zip(datasets, weights, strict=True)])
    report: dict[str, int] = {}
    for d in datasets:
        for key, count in d.report.items():
            report[key] = report.get(key, 0) + count
    return Dataset(
        datasets[0].rubric,
        items,
        np.concatenate([d.probs for d in datasets]),
        np.concatenate([d.present for d in datasets]),
        coverage,
        np.concatenate([d.label_item + o for d, o in zip(datasets, offsets, strict=True)]),
        np.concatenate([r[d.label_judge] for d, r in zip(datasets, remap, strict=True)]),
        np.concatenate([d.answers for d in datasets]),
        judges,
        report,
        label_weight,
    )


def qualified_predictions(frame: pd.DataFrame) -> pd.DataFrame:
    """A predictions table of `cv` on several directories keyed like `qualified` ("new/c001"), without its
    `dataset` column; unchanged where it has none."""
    if "dataset" not in frame:
        return frame
    ids = frame["dataset"].astype(str) + "/" + frame["conversation_id"].astype(str)
    return frame.assign(conversation_id=ids).drop(columns="dataset")


def retargeted(ds: Dataset, target: str) -> Dataset:
    """`ds` with another question as its training target (the same arrays)."""
    return dataclasses.replace(ds, rubric=ds.rubric.with_target(target))
