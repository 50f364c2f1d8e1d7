"""Is there enough data for what was asked? One clear error when folds cannot be filled, and warnings
(not errors) when estimates will be too noisy to read: few labelled items per fold, judges with few labels,
answers with few positives in a reliability panel.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rubric.errors import InputError

MIN_ITEMS_PER_FOLD = 30
MIN_JUDGE_LABELS = 5
MIN_POSITIVES = 10


def check_folds(ds: Any, folds: int) -> None:
    """InputError when the conversations cannot fill `folds` folds (each fold holds whole conversations)."""
    n = len(np.unique(ds.groups[np.unique(ds.label_item)])) if len(ds.label_item) else 0
    if folds < 2:
        raise InputError(f"folds={folds}: cross-validation needs at least 2 folds.", fix="pass folds=2 or more.")
    if n < folds:
        raise InputError(
            f"{n} labelled conversation(s) cannot fill {folds} folds (a conversation stays in one fold).",
            fix=f"pass folds={max(2, n)} or fewer, or label more conversations."
            if n >= 2
            else "label more conversations.",
        )


def size_warnings(ds: Any, folds: int | None = None) -> list[str]:
    """Warnings for a dataset about to be cross-validated or reported (empty when all is well)."""
    out = []
    t = ds.target_index
    labelled = ds.answers[:, t] >= 0
    items = len(np.unique(ds.label_item[labelled]))
    if folds and items / folds < MIN_ITEMS_PER_FOLD:
        out.append(
            f"only {items} labelled items for {folds} folds (~{items // folds} per fold, fewer than "
            f"{MIN_ITEMS_PER_FOLD}): metrics and intervals will be very noisy."
        )
    counts = np.bincount(ds.label_judge[labelled], minlength=len(ds.judges))
    few = [f"{ds.judges[j]} ({counts[j]})" for j in np.flatnonzero(counts < MIN_JUDGE_LABELS)]
    if few:
        out.append(
            f"{len(few)} judge(s) with fewer than {MIN_JUDGE_LABELS} labels of {ds.rubric.target!r}: "
            f"{', '.join(few[:8])}{' ...' if len(few) > 8 else ''}; their personal offsets are mostly the prior."
        )
    return out


def reliability_warnings(curves: Iterable[Mapping[str, Any]]) -> list[str]:
    """Reliability panels whose answer has fewer than MIN_POSITIVES positives: smECE there means little."""
    thin = [f"{c['name']} ({int(c['positives'])})" for c in curves if int(c.get("positives", 0)) < MIN_POSITIVES]
    if not thin:
        return []
    return [
        f"reliability panel(s) with fewer than {MIN_POSITIVES} positive answers: {', '.join(thin)}; "
        "their smECE is not informative."
    ]


def print_warnings(command: str, warnings: Iterable[str]) -> None:
    """Each line as a `DataQualityWarning` (rubric/notices.py): the command line prints it as
    "COMMAND: warning: LINE", as this function used to; an API user filters or catches it."""
    from rubric.notices import warn_data

    warn_data(command, warnings, stacklevel=2)
