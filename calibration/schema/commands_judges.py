"""The schema of `compare-judges`: several judges of the same labelled turns, each calibrated on shared folds
(its `network` and `train` groups are the training commands', calibration/schema/commands_train.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calibration.model.settings import Settings
from calibration.schema.base import Command, config_group
from calibration.schema.commands_train import TRAINING_GROUPS
from calibration.schema.keys import FOLD_SEED, FOLDS, SEED, UNMATCHED_LABELS, required
from rubric.config.settings import boolean, choice, integer, number, paths, setting, text_list


@dataclass(frozen=True)
class CompareJudges(Command):
    """Several judges (models, prompts) of the same labelled turns, each calibrated out of fold on the same
    folds of conversations, compared question by question by their agreement with the reviewers: RMSE, log
    loss and kappa with intervals over resampled conversations, the paired difference, the label multiplier
    for a release estimate, the alternative annotator test, kappa beside the reviewers' own, a recommendation
    per question, Krippendorff's alpha per question, role and reviewer. Writes out/compare-judges.json,
    out/compare-judges.html, out/disagreements.csv, out/reviewer_disagreements.csv and, with agreement_width=,
    out/second_reviewer.csv; see docs/reference/files.md and docs/how-to/choose-a-judge.md."""

    name = "compare-judges"
    summary = "judges of the same labelled turns, calibrated on shared folds -> which judge per question"
    groups = TRAINING_GROUPS
    data: Any = required(
        "the judges' dataset dirs, one per judge or prompt: data=[DIR_A,DIR_B] (the same turns and labels.csv "
        "in each, gathered by each judge)",
        paths(),
    )
    out: str = required("folder for compare-judges.json, compare-judges.html and the disagreement lists")
    names: list[str] | None = setting(
        None, "a name per data dir, in data='s order; null = the directories' names", text_list(optional=True)
    )
    questions: list[str] | None = setting(
        None, "the questions to compare; null = every question the reviewers answered", text_list(optional=True)
    )
    model: str = setting(
        "network",
        "the calibrator of every judge: network (as train) | linear | ordinal (the simple models, far faster)",
        choice("network", "linear", "ordinal"),
    )  # calibration/judges/calibrate.py MODELS
    folds: int = FOLDS()
    seed: int = SEED()
    fold_seed: int = FOLD_SEED()
    repeats: int = setting(
        3,
        "splits of the conversations into folds; each label row's out-of-fold prediction is averaged over them "
        "(less noise from one split; the calibration takes this many times as long)",
        integer(1),
    )
    n_boot: int = setting(1000, "bootstrap resamples of conversations for every interval", integer(1))
    epsilon: float = setting(
        0.1,
        "the alternative annotator test's allowance (0 < epsilon < 1): a calibrated judge may lose to a "
        "reviewer on up to this much more of the turns and still stand in for them",
        number(above=0, below=1),
    )
    width: float | None = setting(
        None,
        "also plan the labelled conversations each judge needs for a release estimate of a question's mean "
        "answer with this interval half-width (90%); null = the label multiplier only",
        number(above=0, optional=True),
    )
    release: int = setting(
        10000, "with width=: conversations in the release the estimate is for (its finite-population term)", integer(2)
    )
    agreement_width: float | None = setting(
        None,
        "also plan which turns to give a second reviewer so that the reviewers' agreement with each other "
        "(Krippendorff's alpha, ordinal) reaches a 95% interval this wide (high - low) on every question: "
        "out/second_reviewer.csv, ranked; null = no plan",
        number(above=0, optional=True),
    )
    combine_judges: bool = setting(
        False,
        "true adds one more candidate, A+B: every judge's distributions as the inputs of one calibrator, on the "
        "same folds (picked only where it beats each judge alone)",
        boolean(),
    )
    unmatched_labels: str = UNMATCHED_LABELS()
    settings: Settings = config_group("network", "train")
