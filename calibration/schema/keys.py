"""Keys that several commands share, each written once: its default, description and rule.

A command's schema (calibration/schema/commands_*.py) names them (`target: str | None = TARGET()`), so the
same key means the same thing, with the same default, in every command that has it.
"""

from __future__ import annotations

from typing import Any

from rubric.config.settings import (
    MISSING,
    anything,
    boolean,
    choice,
    either,
    env_name,
    integer,
    number,
    path,
    paths,
    setting,
    text,
    text_list,
)


def required(doc: str, rule: Any = None, **meta: Any) -> Any:
    """A key without a default: the command refuses to start until it is given."""
    return setting(MISSING, doc, rule or path(), **meta)


def optional(doc: str, rule: Any = None) -> Any:
    """A key that may stay unset (null, its default): a path unless `rule` says what else it is."""
    return setting(None, doc, rule or path(optional=True))


def shared(default: Any, doc: str, rule: Any) -> Any:
    """A key several commands have, declared here once (tests/test_configs.py tells it from a copy)."""
    return setting(default, doc, rule, shared=True)


def TRAINING_DATA() -> Any:  # noqa: N802 (a constant's spelling: each call is the same key)
    return required(
        "a dataset dir (llm.csv + labels.csv + rubric.yaml: what `gather` writes, plus your labels), "
        "or several trained on as one: data=[OLD,NEW]",
        paths(),
        shared=True,
    )


def WEIGHTS() -> Any:  # noqa: N802
    return shared(
        None,
        "with several data dirs, how much each one's labels count (training loss, early "
        "stopping, recalibration), e.g. weights=[1,3]; null = equally",
        anything("[float, ...] | null"),
    )


def ALLOW_JUDGE_MISMATCH(
    doc: str = "true: train on data dirs gathered from different judges anyway (refused by default)",
) -> Any:  # noqa: N802
    # bool("no") is True: a typo here would silently lift a guard, so only true/false pass
    return shared(False, doc, boolean())


USE_OTHER_JUDGE = "true: use a calibrator on another judge's distributions (model.json names its judge)"


def SEED(
    doc: str = "training seed (ensemble members get seed-derived seeds); the same seed gives the same numbers",
) -> Any:  # noqa: N802
    return shared(0, doc, integer(0, 2**32 - 1))


def FOLD_SEED() -> Any:  # noqa: N802
    return shared(0, "which conversations share a fold (kept apart from the training seed)", integer(0, 2**32 - 1))


def FOLDS() -> Any:  # noqa: N802
    return shared(5, "cross-validation folds; whole conversations per fold", integer(2, 1000))


def TARGET() -> Any:  # noqa: N802
    return shared(None, "the question to calibrate; null = the rubric's own target (overall)", text(optional=True))


def UNMATCHED_LABELS() -> Any:  # noqa: N802
    return shared(
        "error",
        "error | skip: labels of items without judge distributions are skipped and counted",
        choice("error", "skip"),
    )


def ADHERES_AT() -> Any:  # noqa: N802
    return shared(
        None, "default: lowest value of the upper half of the target's options (3 on 1-4)", number(optional=True)
    )


def ON_SHIFT(doc: str = "the data's") -> Any:  # noqa: N802
    return shared(
        "warn",
        f"warn | refuse (exit 2, nothing written) | ignore, when {doc} judge answers differ from "
        "the model's training data; the check is written to <out stem>_shift.json",
        choice("warn", "refuse", "ignore"),
    )


def PROGRESS() -> Any:  # noqa: N802
    return shared(True, "show progress bars", boolean())


def OVERWRITE(
    doc: str = "true: replace an existing out= file that this command did not write (its own earlier output is "
    "replaced anyway; the command's inputs never are)",
) -> Any:  # noqa: N802
    """calibration/schema/paths.py's one rule for files a command writes over (suggest: its own sheets)."""
    return shared(False, doc, boolean())


def LIMIT() -> Any:  # noqa: N802
    return shared(None, "only the first N conversations (a quick try)", integer(1, optional=True))


def ALPHA(doc: str = "intervals at 1 - alpha (0.1: 90%)") -> Any:  # noqa: N802
    return shared(0.1, doc, number(above=0, below=1))


def EPSILON() -> Any:  # noqa: N802
    return shared(
        0.1,
        "the alternative annotator test's allowance (0 < epsilon < 1): the calibrated judge may lose "
        "to a reviewer on up to this much more of the turns and still count as standing in for them; "
        "writes out/reviewers.json",
        number(above=0, below=1),
    )


def LABEL_STUDIO_TOKEN_ENV() -> Any:  # noqa: N802
    return shared(
        "LABEL_STUDIO_API_KEY",
        "with url=: environment variable holding the API token (never written anywhere)",
        env_name(),
    )


def LABEL_STUDIO_TIMEOUT() -> Any:  # noqa: N802
    return shared(60, "with url=: seconds to wait for each request", number(above=0))


def WIDTH(doc: str) -> Any:  # noqa: N802
    return shared(None, doc, number(above=0, below=0.5, optional=True))


def CV_FOLDER(doc: str) -> Any:  # noqa: N802
    """A `role-rubric cv` output folder (predictions.csv + metrics.json) that a command reads."""
    return shared(None, doc, path(optional=True))


JUDGES = either(choice("labelled", "population", None), text_list(non_empty=True))
"""predict: labelled | population | [ids]; score and suggest: null (every training judge) | population | [ids]."""


def MODEL_DIR() -> Any:  # noqa: N802
    return required("model dir from `role-rubric train`", shared=True)


def GRANULARITY() -> Any:  # noqa: N802
    return shared("turn", "turn | conversation", choice("turn", "conversation"))
