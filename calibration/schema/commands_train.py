"""The schemas of the commands that train and evaluate the calibrator: train, cv, search, report, predict,
evaluate and demo (the `network` and `train` groups are calibration/model/settings.py `Settings`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from calibration.model.settings import Settings
from calibration.schema.base import Command, block, config_group, like
from calibration.schema.keys import (
    ALLOW_JUDGE_MISMATCH,
    CV_FOLDER,
    EPSILON,
    FOLD_SEED,
    FOLDS,
    JUDGES,
    LIMIT,
    MODEL_DIR,
    ON_SHIFT,
    OVERWRITE,
    PROGRESS,
    SEED,
    TARGET,
    TRAINING_DATA,
    UNMATCHED_LABELS,
    USE_OTHER_JUDGE,
    WEIGHTS,
    optional,
    required,
)
from rubric.config.settings import (
    anything,
    boolean,
    choice,
    fractions,
    integer,
    number,
    path,
    setting,
    storage_url,
    text,
)
from rubric.judge.settings import JudgeConfig

TRAINING_GROUPS = (
    ("network", "default", "The calibration network (docs/concepts.md)"),
    (
        "train",
        "default",
        "Training: pretrain on all questions, fine-tune on the target with a fresh "
        "optimiser, early stopping on a validation split grouped by conversation, seed ensemble",
    ),
)
SEARCH_GROUP = (
    "search",
    "default",
    "Optuna search: the LLM-Rubric paper's ranges plus regularisation and ensemble size",
)


@dataclass(frozen=True)
class SearchOptions:
    """The `search` group: Optuna search of the network's settings by inner cross-validation."""

    trials: int = setting(100, "trials of the study", integer(1))
    inner_folds: int = setting(
        3, "inner cross-validation folds of the objective (3 keeps 100 trials within minutes)", integer(2, 100)
    )
    storage: str | None = optional(
        "default sqlite:///OUT/search.db; a postgresql:// URL "
        "(role-rubric[postgres]) lets several machines share a study",
        storage_url(),
    )
    heartbeat: int = setting(
        10,
        "shared storage: seconds between a running trial's signs of life; silent 2x this = killed, run again",
        integer(1, 3600),
    )
    study: str = setting("role-rubric", "the study's name in the storage", text())
    timeout: float | None = optional("seconds; the study can be resumed later", number(above=0, optional=True))
    workers: int = setting(
        2, "processes sharing the study (one core each); needs a storage (the default SQLite is)", integer(1, 256)
    )
    resume: bool = setting(
        True, "false: a study of other data or settings in the same storage is replaced, not an error", boolean()
    )
    space: dict[str, Any] = setting(
        {
            "hidden1": [10, 25, 50, 100],
            "hidden2": [10, 25, 50, 100],
            "batch_size": [32, 64, 128, 256],
            "lr": {"low": 0.001, "high": 0.05, "log": True},
            "finetune_lr": {"low": 0.0003, "high": 0.02, "log": True},
            "pretrain_steps": {"low": 0, "high": 500, "step": 50},
            "finetune_steps": {"low": 50, "high": 600, "step": 50},
            "l2_judge": {"low": 0.0001, "high": 1.0, "log": True},
            "weight_decay": {"low": 0.0000001, "high": 0.001, "log": True},
            "ensemble": {"low": 1, "high": 5},
        },
        "the search space: a list of choices, or {low, high[, log][, step]} per setting",
        anything("mapping"),
    )


@dataclass(frozen=True)
class OnTrainingData(Command):
    """The first keys of the commands that learn from labelled dataset dirs (train, cv, search, report)."""

    groups: ClassVar[tuple[tuple[str, str | None, str], ...]] = TRAINING_GROUPS
    data: str | list[str] = TRAINING_DATA()
    weights: list[float] | None = WEIGHTS()
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH()


@dataclass(frozen=True)
class Train(OnTrainingData):
    """Writes the model dir: out/weights.safetensors and out/model.json (settings, rubric, judge map, the
    judge that produced the training data, checksums); see docs/reference/files.md."""

    name = "train"
    summary = "train the calibration network on a dataset dir -> model dir"
    out: str = required("model dir to write (weights.safetensors + model.json)")
    model: str = setting(
        "network",
        "network (the calibration network, an ensemble) | linear (multinomial "
        "logistic) | ordinal (cumulative logit): the simple models on the judge's expected answers "
        "that cv reports beside it; train the one cv's verdict names",
        choice("network", "linear", "ordinal"),
    )  # calibration/model/linear_calibrator.py MODELS
    seed: int = SEED()
    target: str | None = TARGET()
    unmatched_labels: str = UNMATCHED_LABELS()
    settings: Settings = config_group("network", "train")


@dataclass(frozen=True)
class CrossValidate(OnTrainingData):
    """nested=true adds `calibrated_nested`: per outer fold, `search` on the other folds picks the settings
    (search.trials, search.inner_folds), so the estimate never sees its own test folds.
    Writes out/predictions.csv (every method's out-of-fold predictions, one row per label row) and
    out/metrics.json (each method's RMSE, Pearson, ...); columns: docs/reference/files.md."""

    name = "cv"
    summary = "cross-validate the calibrator and the baselines -> predictions + metrics"
    groups = (*TRAINING_GROUPS, SEARCH_GROUP)
    out: str = required("folder for predictions.csv (out of fold) and metrics.json")
    folds: int = FOLDS()
    seed: int = SEED()
    fold_seed: int = FOLD_SEED()
    target: str | None = TARGET()
    unmatched_labels: str = UNMATCHED_LABELS()
    group: str | None = optional(
        "a conversation-level field of conversations.jsonl (e.g. role) whose values "
        "stay in one fold; null = conversation_id",
        text(optional=True),
    )
    nested: bool = setting(False, "true adds a nested estimate (search inside each outer fold; slow)", boolean())
    epsilon: float = EPSILON()
    settings: Settings = config_group("network", "train")
    search: SearchOptions = config_group("search")


@dataclass(frozen=True)
class Search(OnTrainingData):
    """Writes out/best.yaml (the recommended overrides, empty when the current settings win), out/search.json
    (every trial) and the study (out/search.db unless search.storage); see docs/reference/files.md."""

    name = "search"
    summary = "Optuna search of hyperparameters by inner cross-validation"
    groups = (*TRAINING_GROUPS, SEARCH_GROUP)
    out: Path = setting("runs/search", "folder for the study (search.db) and the best settings", path())
    seed: int = SEED()
    target: str | None = TARGET()
    unmatched_labels: str = UNMATCHED_LABELS()
    settings: Settings = config_group("network", "train")
    search: SearchOptions = config_group("search")


@dataclass(frozen=True)
class LearningCurve:
    """The report's learning curve."""

    fractions: list[float] = setting([0.1, 0.25, 0.5, 0.75, 1.0], "shares of the training conversations", fractions())
    repeats: int = setting(3, "0 skips the learning curve", integer(0))


@dataclass(frozen=True)
class ReportOptions:
    """What the report computes, and how long it takes."""

    adheres_threshold: float | None = setting(
        3, '"adheres" = answer >= this value; null leaves that diagram out', number(optional=True)
    )
    n_boot: int = setting(1000, "bootstrap resamples (over conversations) for metric intervals", integer(1))
    n_perm: int = setting(1000, "random swaps for the paired permutation tests", integer(1))
    smece_boot: int = setting(100, "resamples for the smECE intervals", integer(1))
    band_bootstrap: int = setting(100, "relplot's bootstrap regressions for the reliability band", integer(1))
    max_judges: int = setting(24, "judges shown in the answer-distribution figure (most judgments first)", integer(1))
    ensemble: int | None = setting(
        2,
        "ensemble for the ~34 cvs of ablations / targets / learning curve (their "
        "full-model reference is retrained with it); null = the network's (16 members: "
        "several times slower)",
        integer(1, 1024, optional=True),
    )
    torch_threads: int | None = setting(
        1,
        "many small trainings in a row run fastest on one thread; null = torch's default",
        integer(1, 1024, optional=True),
    )
    workers: int = setting(
        2, "processes for the cross-validations of ablations, targets and learning curve", integer(1, 256)
    )
    ablations: bool = setting(True, "the ablations section (each part of the network left out)", boolean())
    targets: bool = setting(True, "the section with every question as the target", boolean())
    active_labelling: str | None = optional(
        "a JSON of benchmarks/active_labelling.py: adds 'How many labels are enough'"
    )
    learning_curve: LearningCurve = block(LearningCurve, "the learning curve")


@dataclass(frozen=True)
class Report(OnTrainingData):
    """Reliability diagrams, metrics with CIs and permutation tests, ablations, every question as the target,
    learning curve and per-judge metrics -> out/report.html, out/*.png, out/metrics.json.
    Columns of metrics.json: docs/reference/files.md."""

    name = "report"
    summary = "reliability diagrams, baselines, ablations -> report.html"
    out: Path = required("folder for report.html, its figures and metrics.json")
    cv: Path | None = CV_FOLDER("a `role-rubric cv` output folder to reuse (its settings, folds and seed are used)")
    model: str | None = optional(
        "the model dir you will ship (train's out=, any model=network|linear|ordinal): "
        "the verdict, reliability and per-turn table report that kind (a network's own "
        "settings)"
    )
    folds: int = FOLDS()
    seed: int = SEED()
    fold_seed: int = setting(
        0, "which conversations share a fold (a reused cv folder sets its own)", integer(0, 2**32 - 1)
    )
    target: str | None = TARGET()
    unmatched_labels: str = UNMATCHED_LABELS()
    report: ReportOptions = block(ReportOptions, "what the report computes")
    epsilon: float = setting(
        0.1,
        "the alternative annotator test's allowance (0 < epsilon < 1), as in `cv epsilon=`",
        number(above=0, below=1),
    )
    settings: Settings = config_group("network", "train")


@dataclass(frozen=True)
class Predict(Command):
    """judges: labelled (every labelled item-judge pair) | population | [id, id, ...]
    Writes out (predictions.csv): one row per (item, judge, question) with p_<value> for every option and
    `expected`; columns: docs/reference/files.md."""

    name = "predict"
    summary = "predict per-judge / population answers -> predictions.csv"
    model: str = MODEL_DIR()
    data: Path = required("dataset dir with llm.csv (from `gather`, same judge as the model)")
    out: Path = required("predictions.csv to write")
    overwrite: bool = OVERWRITE()
    judges: Any = setting("labelled", "labelled | population | [id, id, ...]", JUDGES)
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH(USE_OTHER_JUDGE)
    on_shift: str = ON_SHIFT()


@dataclass(frozen=True)
class Evaluate(Command):
    """Writes out (metrics.json): the metrics of the predictions against the human labels, overall and per
    judge; columns: docs/reference/files.md."""

    name = "evaluate"
    summary = "score predictions against human labels -> metrics.json"
    predictions: Path = required("predictions.csv from `role-rubric predict`")
    data: str = required("dataset dir holding the human labels.csv")
    out: Path = required("metrics.json to write")
    overwrite: bool = OVERWRITE()
    target: str | None = TARGET()
    unmatched_labels: str = UNMATCHED_LABELS()


@dataclass(frozen=True)
class DemoReport:
    """The report's options, trimmed so the demo stays fast (their descriptions and ranges are the report's)."""

    adheres_threshold: float | None = like(ReportOptions, "adheres_threshold")
    n_boot: int = like(ReportOptions, "n_boot", 300)
    n_perm: int = like(ReportOptions, "n_perm", 300)
    smece_boot: int = like(ReportOptions, "smece_boot")
    band_bootstrap: int = like(ReportOptions, "band_bootstrap", 50)
    max_judges: int = like(ReportOptions, "max_judges", 12)
    ensemble: int | None = like(ReportOptions, "ensemble", None)
    ablations: bool = like(ReportOptions, "ablations", False)
    targets: bool = like(ReportOptions, "targets", False)
    learning_curve: LearningCurve = block(LearningCurve, "the learning curve (repeats=0: left out)", repeats=0)


@dataclass(frozen=True)
class Demo(Command):
    """Offline end to end on the bundled role-adherence benchmark: gather with the embedding judge (cached),
    cross-validate the calibrator against the baselines, train the final model, write the reliability report,
    score every conversation through the RoleAdherence API, print and write the summary.
    Writes under out: data/ (llm.csv, labels.csv, rubric.yaml, conversations.jsonl), cv/, model/, report/,
    scores.csv, scores_turns.csv, item_adherence.csv and summary.json; columns: docs/reference/files.md."""

    name = "demo"
    summary = "offline end-to-end run on the bundled role-adherence benchmark"
    groups = (
        ("judge", "embedding", "the offline judge; any conf/judge/NAME works (then it needs its endpoint)"),
        *TRAINING_GROUPS,
    )
    data: str | None = optional("benchmark dir; null = the bundled data/role_adherence of this checkout")
    out: Path = setting("runs/demo", "folder for everything the demo writes", path())
    folds: int = FOLDS()
    seed: int = SEED()
    target: str | None = TARGET()
    limit: int | None = LIMIT()
    progress: bool = PROGRESS()
    threads: int = setting(1, "torch threads for training (tiny tensors: 1 is fastest)", integer(1, 1024))
    report: DemoReport = block(DemoReport, "calibration/report/ options, trimmed so the demo stays fast")
    settings: Settings = config_group("network", "train")
    judge: JudgeConfig = config_group("judge")
