"""Several judges as the inputs of one calibrator (the LLM-Rubric paper's natural extension): the judges'
distributions of every question side by side, as if one judge had answered each question several times.

The combined data is the first judge's, with every other judge's questions added as extra input questions
(`QUESTION@JUDGE`, never answered by a reviewer, so never a target): the network reads them all, and the
linear models read their expected answers. `compare-judges combine_judges=true` adds it as one more candidate,
calibrated on the same folds, so it is picked only where it beats every judge alone, and the recommendation
line says when it does not.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from calibration.judges.data import Judge
from rubric.errors import InputError

__all__ = ["combined_judge"]


def _item_index(base, other) -> np.ndarray:
    """(N of base,) each base item's index in `other` (-1: other has no distributions for it)."""
    keys = ["conversation_id", "turn"]
    mine = base.items[keys].astype(str).reset_index(drop=True)
    theirs = other.items[keys].astype(str).reset_index(drop=True).reset_index(names="at")
    return mine.merge(theirs, on=keys, how="left")["at"].fillna(-1).astype(int).to_numpy()


def combined_judge(judges: list[Judge]) -> Judge:
    """One Judge whose inputs are every judge's distributions (module docstring), named A+B."""
    base = judges[0].ds
    probs, present, coverage, questions = [base.probs], [base.present], [_coverage(base)], list(base.rubric.questions)
    for judge in judges[1:]:
        at = _item_index(base, judge.ds)
        if (at < 0).any():
            raise InputError(
                f"combine_judges=true: {judge.name} has no distributions for {int((at < 0).sum())} of the turns "
                f"{judges[0].name} judged.",
                path=judge.path / "llm.csv",
                fix="gather every judge on the same conversations, or leave combine_judges= out.",
            )
        probs.append(judge.ds.probs[at])
        present.append(judge.ds.present[at])
        coverage.append(_coverage(judge.ds)[at])
        questions += [dataclasses.replace(q, id=f"{q.id}@{judge.name}") for q in judge.ds.rubric.questions]
    extra = sum(j.ds.answers.shape[1] for j in judges[1:])  # another judge may carry an input-only question more
    unanswered = np.full((len(base.answers), extra), -1, dtype=base.answers.dtype)
    ds = dataclasses.replace(
        base,
        rubric=dataclasses.replace(base.rubric, questions=tuple(questions)),
        probs=np.concatenate(probs, axis=1),
        present=np.concatenate(present, axis=1),
        coverage=None if base.coverage is None else np.concatenate(coverage, axis=1),
        answers=np.concatenate([base.answers, unanswered], axis=1),
    )
    return Judge("+".join(j.name for j in judges), judges[0].path, ds, judges[0].rows, None)


def _coverage(ds) -> np.ndarray:
    return ds.coverage if ds.coverage is not None else np.ones(ds.present.shape, np.float32)
