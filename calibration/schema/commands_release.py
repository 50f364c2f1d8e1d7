"""The schemas of the commands that use a trained calibrator on new turns: score, suggest, estimate and
decide."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.schema.base import Command, KeyRule, config_group, excludes, given, needs
from calibration.schema.keys import (
    ADHERES_AT,
    ALLOW_JUDGE_MISMATCH,
    ALPHA,
    CV_FOLDER,
    GRANULARITY,
    JUDGES,
    MODEL_DIR,
    ON_SHIFT,
    OVERWRITE,
    PROGRESS,
    TARGET,
    USE_OTHER_JUDGE,
    WIDTH,
    optional,
    required,
)
from rubric.config.settings import (
    boolean,
    choice,
    integer,
    number,
    path,
    setting,
    text,
)
from rubric.judge.settings import JudgeConfig


@dataclass(frozen=True)
class Score(Command):
    """Scores every conversation of a conversations.jsonl: prints a per-conversation table, writes out (one row
    per conversation) and <out stem>_turns.csv (one row per turn). Without a calibrator it reports the raw
    judge. adherence of a turn = P(target answer >= adheres_at) under the (calibrated) distribution.
    Columns of both files: docs/reference/files.md (`success` compares the mean score with the threshold
    unless strict_mode; violating_turn_indices are 0-based turn indices)."""

    name = "score"
    summary = "score a conversations file per conversation -> CSV"
    groups = (
        ("judge", "embedding", "conf/judge/NAME.yaml; the calibrator must be trained on the same judge"),
        ("rubric", "role_adherence", "used only without a calibrator (a calibrator carries its rubric)"),
    )
    conversations: Path = required("conversations.jsonl")
    calibrator: str | None = optional("model dir from `role-rubric train` or `role-rubric demo` (runs/demo/model)")
    out: Path = setting("scores.csv", "the per-conversation table to write", path())
    turns_out: Path | None = optional("default: <out stem>_turns.csv next to out")
    overwrite: bool = OVERWRITE()
    cache: str | None = optional(
        "SQLite request cache; default: the gathered folder's cache.sqlite the calibrator was trained on (no judge "
        "asked twice), else <out stem>.cache.sqlite next to out"
    )
    rubric_file: str | None = optional("your own rubric.yaml (without a calibrator)")
    target: str | None = TARGET()
    threshold: float = setting(0.5, "a turn adheres if its adherence probability >= threshold", number(0, 1))
    strict_mode: bool = setting(False, "success = every turn adheres (else: score >= threshold)", boolean())
    output_mode: str = setting(
        "continuous", "continuous | binary (turn score 1/0 at threshold)", choice("continuous", "binary")
    )
    granularity: str = GRANULARITY()
    judges: Any = optional("null = average over all training judges | population | [J01,J02]", JUDGES)
    adheres_at: float | None = ADHERES_AT()
    include_reason: bool = setting(False, "LLM judges only: a short justification per turn", boolean())
    show: int | None = setting(40, "rows of the printed table (null = all)", integer(0, optional=True))
    progress: bool = PROGRESS()
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH(USE_OTHER_JUDGE)
    on_shift: str = ON_SHIFT("the conversations'")
    judge: JudgeConfig = config_group("judge")
    rubric: dict[str, Any] | None = config_group("rubric")


@dataclass(frozen=True)
class Suggest(Command):
    """Ranks the unlabelled (turn, reviewer) pairs of data=DIR by what a label would teach the calibrator
    (calibration/labelling/suggest.py): random | entropy | bald | variance, spread over conversations by diversity in [0, 1].
    Default random: on the LLM-Rubric data and the bundled benchmark no strategy measurably beat it
    (benchmarks/active_labelling.py, docs/results.md "Active labelling"); bald with diversity=0.5 came closest.
    Writes out (to_label.csv): one row per (turn, reviewer) pair and question, best first, with an empty
    `answer` column to fill in; with purpose=estimate every turn of the sampled conversations (judge_id left
    for the reviewer) and sample_plan.csv beside it (docs/how-to/release-estimates.md). Columns: docs/reference/files.md."""

    name = "suggest"
    summary = "which labels to ask for: the pairs that teach most, or a release's random sample -> CSV"
    rules = (
        needs(
            "purpose",
            "model",
            value="learn",
            fix="pass model=MODEL_DIR, or purpose=estimate for a random sample to estimate from.",
        ),
        excludes("width", "decide_at", fix="pass one: width=W (half-width) or decide_at=X."),
        needs("width", "model", fix="pass model=MODEL_DIR (the one `role-rubric estimate` will use)."),
        needs("decide_at", "model", fix="pass model=MODEL_DIR (the one `role-rubric estimate` will use)."),
        KeyRule(
            lambda v: (
                given(v, "cv") and not (v.get("purpose") == "estimate" and (given(v, "width") or given(v, "decide_at")))
            ),
            "cv= plans how many conversations to label for an estimate, and this suggest plans none.",
            "pass purpose=estimate with width=W or decide_at=X (and model=), or drop cv=.",
            "cv= needs purpose=estimate and width= or decide_at=",
        ),
        KeyRule(
            lambda v: v.get("purpose") == "learn" and any(given(v, k) for k in ("width", "decide_at", "strata")),
            "width=, decide_at= and strata= plan a random sample for an estimate, and purpose=learn ranks pairs.",
            "pass purpose=estimate, or drop width=, decide_at= and strata=.",
            "width=, decide_at=, strata= need purpose=estimate",
        ),
        KeyRule(
            lambda v: (
                v.get("purpose") == "estimate"
                and (given(v, "judges") or v.get("strategy") != "random" or v.get("diversity") not in (0, None))
            ),
            "judges=, strategy= and diversity= rank pairs for purpose=learn; purpose=estimate draws conversations "
            "at random.",
            "drop judges=, strategy= and diversity=, or pass purpose=learn.",
            "judges=, strategy=, diversity= apply to purpose=learn only",
        ),
    )
    purpose: str = setting(
        "learn",
        "learn: pairs that teach the calibrator most | estimate: a random sample of "
        "conversations for `role-rubric estimate` (writes sample_plan.csv beside out)",
        choice("learn", "estimate"),
    )
    data: str = required("the dataset dir whose unlabelled turns are ranked")
    model: str | None = optional("the calibrator (purpose=learn; not needed for purpose=estimate)")
    budget: int = required(
        "purpose=learn: (turn, reviewer) pairs to ask for, each one sheet row per question | "
        "purpose=estimate: conversations to sample",
        integer(1),
    )
    out: Path = required("the sheet to write (to_label.csv)")
    judges: Any = optional("null: every training judge of the model, or [id, ...]", JUDGES)
    strategy: str = setting(
        "random",
        "random | entropy | bald (expected information gain) | variance (expected "
        "error reduction); bald and variance need an ensemble (not train model=linear|ordinal)",
        choice("random", "entropy", "bald", "variance"),
    )
    diversity: float = setting(
        0.0, "0-1: weight of the spread over turns and conversations against the score rank", number(0, 1)
    )
    questions: str = setting(
        "all", "all: one sheet row per rubric question | target: the target question only", choice("all", "target")
    )
    seed: int = setting(0, "for strategy=random", integer(0, 2**32 - 1))
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH(
        "purpose=learn: true ranks data= with a calibrator of another (or an unknown) judge"
    )
    overwrite: bool = OVERWRITE(
        "true: replace an existing out= sheet and sample_plan.csv (reviewers may have filled them: kept by default)"
    )
    width: float | None = WIDTH(
        "purpose=estimate with model=: label as many conversations as a rate half-width of W "
        "needs (budget= is the most)"
    )
    decide_at: float | None = optional(
        "purpose=estimate with model=: as many as deciding a gate at this rate "
        "needs (80% of the time, if the rate is as the calibrator expects)",
        number(0, 1, optional=True),
    )
    alpha: float = ALPHA("purpose=estimate with width= or decide_at=: the interval's level (1 - alpha)")
    cv: str | None = CV_FOLDER(
        "purpose=estimate with width= or decide_at=: plan from the model's out-of-fold agreement "
        "with the reviewers in this `role-rubric cv` folder (of the model's training data)"
    )
    strata: str | None = optional(
        "purpose=estimate: role (or a conversations.jsonl field): a sample "
        "stratified by it, proportional to the strata's sizes; estimate combines the "
        "strata",
        text(optional=True),
    )


@dataclass(frozen=True)
class Estimate(Command):
    """The release's adherence rate and mean target answer, overall, per role and per labelled question: the
    calibrator's uncorrected mean, the humans-only interval from the labelled sample, and the prediction-powered
    (PPI++) interval, valid however wrong the calibrator is (calibration/release). Writes OUT/estimate.json."""

    name = "estimate"
    summary = "a release's adherence rate with valid intervals, a comparison and a CI gate"
    rules = (needs("fail_if_worse", "baseline", value=True, fix="pass baseline=DIR (the last release)."),)
    data: str = required(
        "the release: llm.csv + rubric.yaml (+ conversations.jsonl for roles) + labels.csv of a "
        "random sample of its conversations"
    )
    model: str = required("model dir from `role-rubric train`, never trained on the labelled sample")
    out: str = required("folder for estimate.json")
    alpha: float = ALPHA()
    population: str = setting(
        "finite",
        "finite: this release's own turns | process: the chatbot's behaviour the release is a draw of (wider)",
        choice("finite", "process"),
    )
    adheres_at: float | None = ADHERES_AT()
    plan: str | None = optional(
        "sampling plan (sample_plan.csv from `suggest purpose=estimate`); default "
        "DATA/sample_plan.csv if present, else a uniform sample"
    )
    baseline: str | None = optional(
        "another release dir (its own labelled sample, same rubric): the difference, with interval and p-value"
    )
    fail_under: float | None = optional(
        "CI gate: exit 1 when the adherence rate's lower bound is below this", number(0, 1, optional=True)
    )
    fail_if_worse: bool = setting(
        False, "CI gate (needs baseline): exit 1 when the difference's upper bound is below 0", boolean()
    )
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH("true: use a calibrator on another judge's distributions")
    bias_margin: float = setting(
        0.05,
        "transport audit: PASS when the calibrator's bias on the rate (with its "
        "1 - alpha interval) lies within +-bias_margin, FAIL when outside, else "
        "INCONCLUSIVE (0 < bias_margin < 1: a rate's bias lies in [-1, 1])",
        number(above=0, below=1),
    )
    on_shift: str = ON_SHIFT("the release's")
    width: float | None = WIDTH(
        "the rate's half-width wanted: when the interval is wider, says how many more conversations to label"
    )
    crossfit: int | None = optional(
        "K: adapt the calibrator on the labels and estimate from the same ones "
        "(K fold calibrators; writes OUT/adapted_model)",
        integer(2, optional=True),
    )
    sequential: bool = setting(
        False,
        "true: labelling in batches and re-running until the gate decides; the rate's "
        "interval is a confidence sequence valid at every look (OUT/looks.jsonl); wider than "
        "the fixed-n one",
        boolean(),
    )
    verbose: bool = setting(
        False, "true: print how the intervals are made under the table (estimate.json's note keeps it)", boolean()
    )


@dataclass(frozen=True)
class Decide(Command):
    """calibration: labelled turns the model never trained on (held out); their turns are stored beside the model.
    Decide a turn (adheres / violates) only where, with probability 1 - delta over the calibration draw, the
    disagreement with the reviewers on decided turns stays <= risk; escalate the rest (calibration/release/decide.py).
    Writes out/threshold.json (the certified threshold, the share decided, other risk levels), and with data=
    out/decisions.csv (one row per turn: adherence, confidence, decision); columns: docs/reference/files.md."""

    name = "decide"
    summary = "adheres / violates / escalate per turn at a guaranteed disagreement risk"
    model: Path = MODEL_DIR()
    calibration: Path = required("labelled turns (a dataset dir) the model never trained on")
    data: str | None = optional("turns to decide (llm.csv); omit to only calibrate")
    out: Path = required("folder for threshold.json and decisions.csv")
    risk: float = setting(0.1, "the disagreement allowed on decided turns", number(above=0, below=1))
    delta: float = setting(0.1, "the chance the guarantee may fail over the calibration draw", number(above=0, below=1))
    against: str = setting(
        "majority",
        "majority: vs the reviewers' majority (a tie counts as disagreement) | reviewers: share of reviewers",
        choice("majority", "reviewers"),
    )
    adheres_at: float | None = ADHERES_AT()
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH(
        "true: use a calibrator on another judge's (or an unknown judge's) distributions"
    )
