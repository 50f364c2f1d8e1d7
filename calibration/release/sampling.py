"""`role-rubric suggest purpose=estimate`'s library: how many conversations to label for a release estimate
(`planned_budget`) and the strata to sample them by (`strata_of`); the command (calibration/commands/suggest.py)
draws the sample.

A simple random sample of `budget` conversations (seeded), written as a labelling sheet (every assistant
turn of each sampled conversation, one row per question, judge_id left for the reviewer to fill in) and a
sampling plan, `sample_plan.csv` beside it, which `role-rubric estimate` reads for the inclusion
probabilities (calibration/release/plan.py).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def planned_budget(
    ds,
    budget: int,
    *,
    data: Path,
    model: str | Path,
    width: float | None,
    decide_at: float | None,
    alpha: float,
    cv: str | Path | None = None,
) -> int:
    """`width=W` / `decide_at=X` (one of them, checked by suggest's schema): the conversations the rate's
    interval needs (calibration/release/planning.py) with the calibrator in `model`, at most `budget`; the
    plan's lines printed. data: the release's folder (of `ds`); cv: a `role-rubric cv` folder to plan from."""
    from calibration.model.files import load_model
    from calibration.release.decide import default_adheres_at
    from calibration.release.planning import (
        plan_lines,
        predicted_rate,
        spread_from_calibrator,
        spread_from_sample,
    )
    from calibration.release.turns import reviewer_predictions

    loaded = load_model(model)
    X = torch.from_numpy(ds.features(loaded.spec))
    t = ds.target_index
    adheres_at = default_adheres_at(loaded.rubric.questions[t])
    preds = reviewer_predictions(loaded, ds, X, t, kind="rate", adheres_at=adheres_at)
    labelled = len(preds.labelled_conversations())
    _warn_if_shifted(Path(data), loaded, ds, basis="cv" if cv else "sample" if labelled >= 3 else "model")
    if cv:
        spread = _cv_spread(cv, loaded, preds, adheres_at, labelled)
    elif labelled >= 3:
        s = preds.sample()
        spread = spread_from_sample(
            s.Y, s.F - s.V, s.m_lab, s.m_all, f"the {labelled} labelled conversations", predicted_rate(s)
        )
    else:
        spread = spread_from_calibrator(preds.conversation, preds.calibrator)
    n, lines = plan_lines(spread, width=width, decide_at=decide_at, alpha=alpha, labelled=labelled)
    for line in lines:
        log.info("suggest: " + line)
    if n is None:
        n = budget
    if n > budget:
        log.info(f"suggest: the plan asks for {n} conversations, more than budget={budget}: sampling {budget}.")
    return max(min(n, budget), 2)


def _cv_spread(cv, model, preds, adheres_at: float, labelled: int):
    """cv=DIR: the calibrator's predictions on the release, corrected by its out-of-fold agreement with the
    reviewers in the cv folder (calibration/release/cv_spread.py)."""
    from calibration.release.cv_spread import read_cv_agreement, spread_from_cv

    found = read_cv_agreement(cv, model, adheres_at)
    spread = spread_from_cv(
        preds.conversation,
        preds.calibrator,
        found,
        f"the out-of-fold agreement of cv={cv}, {found.n_conversations} conversations",
    )
    log.info(
        f"suggest: out-of-fold agreement of cv={cv} ({found.n_conversations} conversations, {found.n_turns} "
        f"turns): the residual variance is {found.inflation:.2f}x what a calibrated calibrator would leave "
        f"(turns {found.turn_inflation:.2f}x, "
        f"within-conversation correlation {found.correlation:.2f}, slope {found.slope:+.2f})"
    )
    if labelled >= 3:
        log.info(
            f"suggest: the release already has {labelled} labelled conversations; planned from cv= as asked "
            "(drop cv= to plan from them: they measure this release itself)"
        )
    return spread


SHIFT_ADVICE = {
    "cv": "the plan is optimistic: it assumes the calibrator is as far off here as out of fold (cv=), which a shift "
    "breaks; label a pilot of 10 conversations and plan from it (the same command without cv=), or let "
    "`estimate width=W` ask for more",
    "model": "the plan is optimistic: it assumes the calibrator is calibrated on this release, which a shift "
    "breaks; label a pilot of 10 conversations and plan from it (the same command, once they are imported), or "
    "let `estimate width=W` ask for more",
    "sample": "the plan reads this release's own labelled conversations, so the shift does not bias it; "
    "`estimate` corrects the calibrator with the labels (its ppi column)",
}


def _warn_if_shifted(data: Path, model, ds, *, basis: str) -> None:
    """The shift check of `estimate` and `predict` (calibration/model/shift.py) on the release, with what it
    means for the plan: one from the calibrator alone (basis "model") or from cv= assumes the calibrator is
    as far off on the release as where it was measured, and a release unlike the training data breaks that
    (benchmarks/estimate.py: on the shift-down release 23% of cv plans reached the width, the calibrator worse
    there than out of fold); a plan from the release's own labels ("sample") is not biased by it."""
    from calibration.model.shift import handle_shift, roles_of

    handle_shift(model.record.shift_summary(), ds, roles_of([data]), "warn", "suggest", advice=SHIFT_ADVICE[basis])


def strata_of(conversations: dict, field: str, release: set[str], data: Path) -> dict[str, str]:
    """conversation -> stratum: `role` is the role's short id (the rows of `estimate`), any other name a
    field of conversations.jsonl that every conversation of the release must have."""
    from calibration.release.roles import role_key
    from rubric.errors import InputError

    out = {}
    for cid in sorted(release):
        conv = conversations.get(cid)
        if conv is None:
            raise InputError(
                f"conversation {cid!r} of llm.csv is not in conversations.jsonl, so its stratum is unknown.",
                path=data / "conversations.jsonl",
                fix="use the conversations.jsonl gather read.",
            )
        if field == "role":
            out[cid] = role_key(conv)
            continue
        value = (conv.record or {}).get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise InputError(
                f"strata={field}: conversation {cid!r} has no {field!r} field.",
                path=data / "conversations.jsonl",
                fix="pass strata=role, or the name of a field every conversation has.",
            )
        out[cid] = str(value)
    return out
