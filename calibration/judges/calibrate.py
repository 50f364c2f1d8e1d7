"""Each judge calibrated out of fold, question by question, on the shared folds of conversations.

For every question the reviewers answered, the calibrator (the network, or a simple model: `MODELS`) is
trained with that question as its target on the label rows outside fold f and predicts the rows of fold f,
exactly as `role-rubric cv` does for its one target (calibration/evaluation/crossval.py); the folds are the
same for every judge (calibration/judges/data.py `shared_folds`), so the judges' predictions are paired.

`calibrate_repeated` does it over several splits of the conversations into folds and averages each row's
out-of-fold distributions (repeated cross-fitting): every prediction is still made without the row's own
conversation, and the comparison loses most of the noise one split adds. On the LLM-Rubric anchors with 50
labelled dialogues, 3 splits rather than 1 raised the share of draws whose whole-judge verdict picks the real
judge over its half-shuffled copy from 0.6 to 0.8 (benchmarks/results/compare_judges.json against
compare_judges-repeats1.json, the same draws).
"""

from __future__ import annotations

import logging

import numpy as np

from calibration.data.union import retargeted
from calibration.evaluation.baselines import linear, ordinal
from calibration.evaluation.out_of_fold import oof_network
from calibration.judges.data import Judge, fold_of_rows, labelled_questions, shared_folds
from calibration.model.settings import Settings

log = logging.getLogger(__name__)

MODELS = ("network", "linear", "ordinal")
"""network: the calibration network (as `train`); linear / ordinal: the simple personalised models on the
judge's expected answers (`train model=linear|ordinal`), much faster, for many judges or many draws."""


def answered_questions(judge: Judge) -> list[str]:
    """The questions with at least one reviewer answer, in rubric order."""
    return labelled_questions(judge.ds)


def oof_probabilities(
    judge: Judge,
    question: str,
    fold: np.ndarray,
    *,
    folds: int,
    model: str,
    settings: Settings | None,
    seed: int,
) -> np.ndarray:
    """(R, K) out-of-fold distribution of `question`'s answer for every label row in the shared order
    (rows the reviewer did not answer hold whatever the model predicts; callers keep answered rows only)."""
    ds = retargeted(judge.ds, question)
    own_fold = fold_of_rows(judge, fold)
    if model == "network":
        probs = oof_network(ds, settings or Settings(), own_fold, folds, seed)
    elif model == "linear":
        probs = linear(ds, own_fold, folds, seed)
    elif model == "ordinal":
        probs = ordinal(ds, own_fold, folds, seed)
    else:
        raise ValueError(f"model={model!r}: use one of {MODELS}.")
    return probs[judge.rows]


def raw_expected(judge: Judge, question: str) -> np.ndarray:
    """(R,) the uncalibrated judge's expected answer for every label row in the shared order (NaN where it
    gave no distribution for the question)."""
    ds = judge.ds
    q = ds.rubric.ids.index(question)
    item = ds.label_item[judge.rows]
    expected = ds.probs[item, q].astype(float) @ ds.option_values()[q]
    return np.where(ds.present[item, q], expected, np.nan)


def calibrate_all(
    judges: list[Judge],
    questions: list[str],
    fold: np.ndarray,
    *,
    folds: int,
    model: str,
    settings: Settings | None,
    seed: int,
) -> dict[str, dict[str, np.ndarray]]:
    """judge name -> question -> (R, K) out-of-fold distributions in the shared order."""
    out: dict[str, dict[str, np.ndarray]] = {}
    for judge in judges:
        out[judge.name] = {}
        for qid in questions:
            out[judge.name][qid] = oof_probabilities(
                judge, qid, fold, folds=folds, model=model, settings=settings, seed=seed
            )
        log.info(f"compare-judges: {judge.name}: {len(questions)} question(s) calibrated out of fold ({model})")
    return out


def calibrate_repeated(
    judges: list[Judge],
    questions: list[str],
    *,
    folds: int,
    fold_seed: int,
    repeats: int,
    model: str,
    settings: Settings | None,
    seed: int,
) -> dict[str, dict[str, np.ndarray]]:
    """`calibrate_all` on `repeats` splits into shared folds (fold seeds fold_seed, fold_seed + 1, ...), each
    row's out-of-fold distributions averaged over the splits (module docstring)."""
    runs = [
        calibrate_all(judges, questions, shared_folds(judges, folds, fold_seed + r)[0], folds=folds, model=model,
                      settings=settings, seed=seed + r)
        for r in range(repeats)
    ]  # fmt: skip
    return {j.name: {q: np.mean([run[j.name][q] for run in runs], axis=0) for q in questions} for j in judges}
