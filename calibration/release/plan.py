"""Sampling plans: which conversations of a release to label for an estimate, with their inclusion
probabilities (`role-rubric suggest purpose=estimate`), and reading them back in `estimate`.

The plan is a simple random sample of conversations without replacement (seeded): every conversation has
inclusion probability n / N. An uncertainty-weighted plan (Zrnic & Candes 2024) is not offered: nothing
has shown it narrower than the uniform plan on our data (docs, release estimates).
`sample_plan.csv` lists every conversation of the release: conversation_id, inclusion_probability,
sampled (1 for the ones to label), then (plans written since they were recorded) seed and release_sha256,
the same on every row: the seed of the draw and the SHA-256 of the release's llm file, so that `estimate` and
`import` refuse a plan drawn for another release even when its conversation ids match. Extra columns keep
the file readable by every reader that picks its columns by name; a plan without them is read as before.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from rubric.errors import InputError

PLAN_FILE = "sample_plan.csv"
PLAN_COLUMNS = ("conversation_id", "inclusion_probability", "sampled")

RELEASE_COLUMN = "release_sha256"
LLM_FILES = ("llm.csv", "llm.parquet")

__all__ = [
    "PLAN_FILE",
    "read_plan",
    "read_strata",
    "release_fingerprint",
    "stamp_plan",
    "stratified_plan",
    "uniform_plan",
]


def release_fingerprint(data: str | Path) -> str | None:
    """The SHA-256 of the release folder's llm file (import copies it byte for byte into the labelled
    folder, so both give the same), or None where the folder holds none."""
    from rubric.files import file_sha256

    path = next((Path(data) / n for n in LLM_FILES if (Path(data) / n).is_file()), None)
    return None if path is None else file_sha256(path)


def stamp_plan(plan: pd.DataFrame, *, seed: int, data: str | Path) -> pd.DataFrame:
    """The plan with its seed and its release's fingerprint on every row (last columns)."""
    return plan.assign(seed=seed, **{RELEASE_COLUMN: release_fingerprint(data) or ""})


def uniform_plan(conversations, budget: int, *, seed: int = 0) -> pd.DataFrame:
    """`budget` conversations drawn uniformly without replacement; every inclusion probability budget / N."""
    ids = np.array(sorted(set(conversations)), dtype=object)
    if budget < 2:
        raise InputError(
            f"budget={budget}: an interval needs at least 2 labelled conversations.",
            fix="pass budget=N with N >= 2 (20 or more for intervals that hold their level).",
        )
    if budget > len(ids):
        raise InputError(
            f"budget={budget} is more than the release's {len(ids)} conversations.", fix=f"pass budget <= {len(ids)}."
        )
    picked = np.random.default_rng(seed).choice(len(ids), size=budget, replace=False)
    sampled = np.zeros(len(ids), int)
    sampled[picked] = 1
    return pd.DataFrame({"conversation_id": ids, "inclusion_probability": budget / len(ids), "sampled": sampled})


def read_plan(
    path: Path, release: set[str], labelled: set[str], *, fingerprint: str | None = None
) -> dict[str, float] | None:
    """Inclusion probabilities of the labelled conversations from a plan file, checked against the release
    (its ids, and `fingerprint` (release_fingerprint) where both it and the plan have one) and its labels;
    None when the plan is uniform (every probability equal), which needs no weights."""
    from calibration.release.checks import check_plan_rows, read_plan_table

    frame = read_plan_table(path)
    missing = [c for c in PLAN_COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(
            f"a sampling plan needs the columns {list(PLAN_COLUMNS)}; {missing} missing.",
            path=path,
            fix="pass the sample_plan.csv written by `role-rubric suggest purpose=estimate`.",
        )
    frame["conversation_id"] = frame["conversation_id"].str.strip()
    pi = pd.to_numeric(frame["inclusion_probability"], errors="coerce")
    bad = np.flatnonzero(~((pi > 0) & (pi <= 1)))
    if len(bad):
        raise InputError(
            f"inclusion_probability {frame['inclusion_probability'].iloc[bad[0]]!r} is not in (0, 1].",
            path=path,
            row=int(bad[0]) + 1,
            fix="inclusion probabilities are in (0, 1].",
        )
    of = dict(zip(frame["conversation_id"], pi, strict=True))
    unknown = sorted(set(of) - release)
    if unknown:
        raise InputError(
            f"the plan names {len(unknown)} conversations not in the release (e.g. {unknown[0]!r}).",
            path=path,
            fix="use the plan written for this release's llm.csv.",
        )
    unplanned = sorted(labelled - set(of))
    if unplanned:
        raise InputError(
            f"{len(unplanned)} labelled conversations (e.g. {unplanned[0]!r}) are not in the sampling plan, so "
            "their inclusion probabilities are unknown.",
            path=path,
            fix="label only the conversations the plan sampled, or remove plan= to treat the sample as uniform.",
        )
    check_plan_rows(frame, path, release, labelled)
    _check_release(frame, path, fingerprint)  # after the ids: a plan of other conversations is named as such
    values = np.array([of[c] for c in labelled], float)
    if len(values) and np.allclose(values, values[0]) and math.isclose(float(pi.min()), float(pi.max())):
        return None
    return {c: float(of[c]) for c in labelled}


def check_plan_for(
    path: Path, data: str | Path, release: set[str], sampled: set[str], *, found: str | None, fix: str
) -> None:
    """`read_plan`'s checks of the plan at `path` for the labels of `sampled` from the dataset folder `data`
    (its conversations `release`). found: where a plan that was found rather than named was found ("beside
    select="): its refusal then says so and adds `fix`, the way out when the plan is not the labels'."""
    try:
        read_plan(path, release, sampled, fingerprint=release_fingerprint(data))
    except InputError as exc:
        if found is None:
            raise
        raise InputError(
            f"{exc.problem} (This plan was found {found}.)", path=exc.path, row=exc.row, fix=f"{exc.fix} {fix}"
        ) from None


def refuse_another_plan(out: Path | None, plan: Path, fix: str) -> None:
    """Refuse an out= folder that already holds another sampling plan than `plan` (it is kept)."""
    from rubric.files import file_sha256

    there = None if out is None else Path(out) / PLAN_FILE
    if there is None or not there.is_file() or there.resolve() == plan.resolve():
        return
    if file_sha256(there) != file_sha256(plan):
        raise InputError(f"out= holds another sampling plan than {plan}; it is kept.", path=there, fix=fix)


def _check_release(frame: pd.DataFrame, path: Path, fingerprint: str | None) -> None:
    """A plan that records its release (release_sha256) must name this one; a plan written before the
    column existed (or a release without an llm file) is not checked."""
    if RELEASE_COLUMN not in frame.columns or fingerprint is None:
        return
    recorded = set(frame[RELEASE_COLUMN].astype(str).str.strip()) - {""}
    if recorded and recorded != {fingerprint}:
        seed = ", ".join(sorted(set(frame["seed"].astype(str)))) if "seed" in frame.columns else "?"
        raise InputError(
            f"this sampling plan (seed {seed}) was drawn for another release: its {RELEASE_COLUMN} "
            f"{sorted(recorded)[0][:12]}... is not the SHA-256 of this release's llm file ({fingerprint[:12]}...).",
            path=path,
            fix="draw a plan for this release with `role-rubric suggest purpose=estimate data=RELEASE`, "
            "or pass plan= the plan written for it.",
        )


def stratified_plan(conversations, stratum_of: dict[str, str], budget: int, *, seed: int = 0) -> pd.DataFrame:
    """A stratified simple random sample: `budget` conversations allocated to the strata in proportion to
    their sizes (largest remainders, at least 2 per stratum so each has an interval), drawn uniformly within
    each; inclusion probability n_h / N_h; the `stratum` column names each conversation's stratum. Neyman
    allocation (by the calibrator's residual spread per stratum) is not offered: it needs a benchmark that
    shows it narrower first (docs, release estimates)."""
    ids = np.array(sorted(set(conversations)), dtype=object)
    strata = np.array([stratum_of[c] for c in ids], dtype=object)
    names, sizes = np.unique(strata, return_counts=True)
    if budget < 2 * len(names) or budget > len(ids):
        raise InputError(
            f"budget={budget} for {len(names)} strata of {len(ids)} conversations.",
            fix=f"pass a budget between {2 * len(names)} (2 per stratum) and {len(ids)}.",
        )
    share = budget * sizes / sizes.sum()
    alloc = np.minimum(np.maximum(np.floor(share).astype(int), 2), sizes)
    while alloc.sum() < budget:  # largest remainders first, where a stratum has conversations left
        room = np.where(alloc < sizes, share - alloc, -np.inf)
        alloc[int(np.argmax(room))] += 1
    while alloc.sum() > budget:  # the minimum of 2 overshot: take back from the largest allocations
        over = np.where(alloc > 2, alloc - share, -np.inf)
        alloc[int(np.argmax(over))] -= 1
    rng = np.random.default_rng(seed)
    sampled = np.zeros(len(ids), int)
    pi = np.zeros(len(ids))
    for name, n_h in zip(names, alloc, strict=True):
        members = np.flatnonzero(strata == name)
        sampled[rng.choice(members, size=int(n_h), replace=False)] = 1
        pi[members] = n_h / len(members)
    return pd.DataFrame({"conversation_id": ids, "inclusion_probability": pi, "sampled": sampled, "stratum": strata})


def read_strata(path: Path | None) -> dict[str, str] | None:
    """conversation -> stratum from a plan's `stratum` column (None: no plan, or an unstratified one)."""
    if path is None:
        return None
    frame = pd.read_csv(path, dtype={"conversation_id": str, "stratum": str}, keep_default_na=False)
    if "stratum" not in frame.columns:
        return None
    return dict(zip(frame["conversation_id"].str.strip(), frame["stratum"], strict=True))
