"""What `estimate` and `suggest purpose=estimate` check of their inputs before any number is computed: each
bad input is one line naming the file or key and exit status 2, never a traceback or a number that looks
right (a rate of 1.0 from an `adheres_at` below the scale, an interval from a plan drawn for other labels).

The sampling plan's own checks (calibration/release/plan.py reads it with them): a readable UTF-8 file with
rows, each conversation once, the plan covering exactly the release, and every labelled conversation one
the plan sampled.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.schema.paths import DATASET_FILES
from rubric.errors import InputError, read_text_file
from rubric.files import file_sha256

__all__ = ["check_adheres_at", "check_baseline", "check_plan_rows", "check_target_answered", "read_plan_table"]


def check_adheres_at(question, adheres_at: float | None) -> None:
    """`adheres_at` must split the target's scale: above its lowest option (else every answer adheres and
    the rate is 1 whatever the release) and at most its highest (else none does)."""
    if adheres_at is None:
        return
    if isinstance(adheres_at, bool) or not isinstance(adheres_at, int | float) or not math.isfinite(adheres_at):
        raise InputError(
            f"adheres_at={adheres_at!r} is not a number.",
            fix=f"pass a value among the target's options {sorted(question.values)}.",
        )
    values = sorted(question.values)
    if not values[0] < adheres_at <= values[-1]:
        side = "every answer" if adheres_at <= values[0] else "no answer"
        raise InputError(
            f"adheres_at={adheres_at:g} is outside the scale of {question.id!r} (options {values}): {side} would "
            "count as adhering, whatever the release.",
            fix=f"pass a value above {values[0]:g} and at most {values[-1]:g} (default: {question.default_adheres_at:g}).",
        )


def check_target_answered(ds, labels: Path, *, minimum: int = 1) -> None:
    """The labels must answer the target question on at least `minimum` conversations: an estimate of the
    target from none is no estimate (the gate would compare nothing)."""
    t = ds.target_index
    rows = ds.answers[:, t] >= 0 if len(ds.answers) else np.zeros(0, bool)
    conversations = set(ds.items["conversation_id"].to_numpy()[ds.label_item[rows]])
    if len(conversations) >= minimum:
        return
    fix = (
        f"label {ds.rubric.target!r} on the sampled conversations (`role-rubric suggest purpose=estimate` writes a "
        "sheet with every question)."
    )
    if conversations:
        raise InputError(
            f"the labels answer the target question {ds.rubric.target!r} on {len(conversations)} "
            f"conversation(s): an interval needs at least {minimum}.",
            path=labels,
            fix=fix,
        )
    answered = [q.id for q, col in zip(ds.rubric.questions, ds.answers.T, strict=True) if (col >= 0).any()]
    raise InputError(
        f"the labels never answer the target question {ds.rubric.target!r}"
        + (f" (they answer {', '.join(answered)})" if answered else "")
        + ", so there is nothing to estimate it from.",
        path=labels,
        fix=fix,
    )


def check_baseline(release: Path, baseline: Path, *, allow_judge_mismatch: bool) -> None:
    """A baseline is another release: not the release's folder, not a copy of it, and its distributions
    from the release's judge (a difference between two judges measures the judges, not the chatbot)."""
    from rubric.judge.identity import NO_RECORD, dataset_judge_identity, describe, identity_differences

    if not baseline.is_dir():
        raise InputError(
            "baseline= is not a release folder.",
            path=baseline,
            fix="pass baseline= the folder of the earlier release (rubric.yaml, llm.csv, labels.csv).",
        )
    if baseline.resolve() == release.resolve() or _same_content(release, baseline):
        raise InputError(
            f"baseline= is the release itself ({release}{'' if baseline.resolve() == release.resolve() else ', copied'}): "
            "the difference would be 0 by construction.",
            path=baseline,
            fix="pass baseline= the folder of an earlier release, or leave baseline= out.",
        )
    mine, theirs = dataset_judge_identity(release), dataset_judge_identity(baseline)
    if allow_judge_mismatch or (mine is None and theirs is None):
        return
    if mine is None or theirs is None:
        unknown = release if mine is None else baseline
        raise InputError(
            f"{'the release' if mine is None else 'the baseline'} {unknown} {NO_RECORD}, while the "
            f"{'baseline' if mine is None else 'release'} was gathered by the {describe(mine or theirs)}.",
            path=baseline,
            fix="compare releases gathered by one judge (import carries gather_summary.json), "
            "or pass allow_judge_mismatch=true if the judge is the same.",
        )
    diffs = identity_differences(mine, theirs)
    if diffs:
        raise InputError(
            f"the baseline {baseline} was gathered by another judge than the release "
            f"({'; '.join(d.replace('trained on', 'release').replace('given', 'baseline') for d in diffs)}): "
            "their difference would measure the judges, not the chatbot.",
            path=baseline,
            fix="gather the baseline again with the release's judge, or pass allow_judge_mismatch=true.",
        )


def _same_content(a: Path, b: Path) -> bool:
    """Both folders hold the same llm and labels files, byte for byte (a copy of one release)."""
    names = [f"{stem}{suffix}" for stem in ("llm", "labels") for suffix in (".csv", ".parquet")]
    pairs = [(a / n, b / n) for n in names if (a / n).exists() or (b / n).exists()]
    return bool(pairs) and all(x.is_file() and y.is_file() and file_sha256(x) == file_sha256(y) for x, y in pairs)


def read_plan_table(path: Path) -> pd.DataFrame:
    """The plan file as a table: a UTF-8 file (not a folder) with a header and at least one row."""
    text = read_text_file(path)  # a folder or bytes that are not UTF-8: one line naming the file
    if not text.strip():
        raise InputError(
            "the sampling plan is empty.",
            path=path,
            fix="pass the sample_plan.csv written by `role-rubric suggest purpose=estimate`.",
        )
    try:
        frame = pd.read_csv(io.StringIO(text), dtype={"conversation_id": str}, keep_default_na=False)
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(
            f"the sampling plan cannot be read as CSV ({str(exc).splitlines()[0]}).",
            path=path,
            fix="pass the sample_plan.csv written by `role-rubric suggest purpose=estimate`.",
        ) from None
    if frame.empty:
        raise InputError(
            "the sampling plan has a header but no rows.",
            path=path,
            fix="pass the sample_plan.csv written by `role-rubric suggest purpose=estimate`.",
        )
    return frame


def sampled_ids(frame: pd.DataFrame) -> set[str]:
    """The conversations a plan table drew for labelling (sampled 1)."""
    return set(frame.loc[(pd.to_numeric(frame["sampled"], errors="coerce") == 1).to_numpy(), "conversation_id"])


def check_plan_rows(frame: pd.DataFrame, path: Path, release: set[str], labelled: set[str]) -> None:
    """Each conversation once; `sampled` 0 or 1; the plan covers exactly the release's conversations; every
    labelled conversation is one the plan sampled (labels of a draw with another seed or for another release
    would be weighted by the wrong probabilities)."""
    ids = frame["conversation_id"]
    twice = ids.duplicated(keep=False)
    if twice.any():
        cid = ids[twice].iloc[0]
        rows = np.flatnonzero((ids == cid).to_numpy()) + 1
        pis = frame.loc[ids == cid, "inclusion_probability"].astype(str).unique()
        what = f"with conflicting inclusion probabilities {list(pis)}" if len(pis) > 1 else "twice"
        raise InputError(
            f"the plan names conversation {cid!r} {what} (rows {', '.join(map(str, rows))}).",
            path=path,
            row=int(rows[1]),
            fix="list each conversation of the release once, as "
            "`role-rubric suggest purpose=estimate` writes the plan.",
        )
    sampled = pd.to_numeric(frame["sampled"], errors="coerce")
    bad = np.flatnonzero(~sampled.isin([0, 1]).to_numpy())
    if len(bad):
        raise InputError(
            f"sampled {str(frame['sampled'].iloc[bad[0]])!r} is not 0 or 1.",
            path=path,
            row=int(bad[0]) + 1,
            fix="sampled is 1 for a conversation drawn for labelling, else 0.",
        )
    missing = sorted(release - set(ids))
    if missing:
        raise InputError(
            f"the plan lists {len(set(ids) & release)} of the release's {len(release)} conversations (not e.g. "
            f"{missing[0]!r}): it was drawn for another release, so its inclusion probabilities are not this one's.",
            path=path,
            fix="draw the plan for this release (`role-rubric suggest purpose=estimate data=RELEASE`).",
        )
    undrawn = sorted(labelled - sampled_ids(frame))
    if undrawn:
        raise InputError(
            f"{len(undrawn)} labelled conversations (e.g. {undrawn[0]!r}) are ones the plan did not sample "
            "(sampled 0): the labels follow another draw (another seed or release) than this plan.",
            path=path,
            fix="pass the plan the labelled conversations were drawn with, or label the conversations this plan sampled.",
        )


# Files some command reads: a sheet written under one of these names would replace a team's data or be read
# as it (a blank sheet named labels.csv is a labels file with no answers).
INPUT_NAMES = (
    *DATASET_FILES,
    "gather_summary.json",
    "sample_plan.csv",
    "decide_calibration.csv",
    "estimate.json",
    "threshold.json",
    "tasks.json",
    "label_config.xml",
    "label-studio-export.json",
)


def check_suggest_out(out: Path, *, plan: Path | None, overwrite: bool) -> None:
    """`suggest` writes a sheet (and, for an estimate, sample_plan.csv beside it): never over a file some
    command reads, and never over a sheet or plan that exists (reviewers fill sheets in) unless overwrite=true."""
    if out.is_dir():
        raise InputError(
            "out= is a folder, but suggest writes a sheet file.", path=out, fix="pass out=FOLDER/to_label.csv."
        )
    if out.name in INPUT_NAMES:
        raise InputError(
            f"out= is named {out.name}, a file other commands read: the sheet would replace it or be read as it.",
            path=out,
            fix="pass out=FOLDER/to_label.csv.",
        )
    labels = [] if plan is None else [plan.parent / f"labels{s}" for s in (".csv", ".parquet")]
    if plan is not None and not plan.exists() and any(p.exists() for p in labels):
        # estimate reads DATA/sample_plan.csv for DATA's labels: a new draw's plan there would be taken for
        # theirs, and estimate would then refuse the labels the plan did not sample
        raise InputError(
            f"this folder holds labels without a sampling plan, and purpose=estimate writes {plan.name} beside "
            "out=: estimate would read it as the plan of those labels.",
            path=plan.parent,
            fix="pass out= in a folder of its own (e.g. out=round2/to_label.csv).",
        )
    for path, what in (
        (out, "a sheet (reviewers may have filled it in)"),
        (plan, "the sampling plan of an earlier draw"),
    ):
        if path is not None and path.exists() and not overwrite:
            raise InputError(
                f"it already exists: {what}; it is kept.",
                path=path,
                fix="pass another out= folder, or overwrite=true to replace it.",
            )
