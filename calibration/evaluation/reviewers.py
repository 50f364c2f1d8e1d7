"""Can the calibrated judge replace one of the reviewers? Per rubric question, from cv's out-of-fold predictions.

(a) Reviewers against each other: each reviewer in turn is held out and compared with the mean answer of the
    other reviewers of the same turns (the turns at least one other reviewer answered): Pearson, RMSE and
    quadratic-weighted kappa (the others' mean rounded to the nearest option), pooled over reviewers. This is
    the ceiling a judge can reach: the reviewers do not agree better with each other.
(b) The calibrated judge against the same held-out reviewers on the same turns: its out-of-fold prediction
    for that reviewer (what cv's predictions.csv holds), the same three numbers.
(c) The alternative annotator test (Calderon et al., ACL 2025; github nitaytech/AltTest): for every reviewer j
    with at least MIN_SHARED_TURNS shared turns, on each of those turns, does the judge's prediction f (the
    mixture of its out-of-fold predictions for the turn's reviewers, one value per turn) or reviewer j agree
    better with the other reviewers (alignment = -RMSE against their answers)? With W_f = 1[f at least as
    close], W_h = 1[j at least as close], a one-sided paired t-test of H0: mean(W_h - W_f) >= epsilon (the
    judge is worse than j by more than the allowance epsilon); the p-values of all reviewers are adjusted by
    Benjamini-Yekutieli at q = 0.05, and the judge's winning rate is the share of reviewers whose H0 is
    rejected. It can replace a reviewer on this question when the winning rate is >= 0.5 over at least
    MIN_REVIEWERS tested reviewers (the paper's recommendations); with fewer, the test is undecided.
    The judge is compared by the answer it would give: f rounded to the nearest option value (as kappa rounds
    it in (a) and (b)). A reviewer answers on the option scale, so one who agrees with the others is exactly
    0 away from them, which a continuous prediction never is: compared unrounded, a judge predicting 4 +- 3e-7
    on turns where every reviewer answered 4 would lose every one of them, and a panel that agrees would fail
    any judge. Rounded, agreeing within the scale's resolution is a tie, which both sides win.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from rubric.errors import InputError

__all__ = ["MIN_REVIEWERS", "MIN_SHARED_TURNS", "alt_test", "nearest_option", "reviewer_agreement", "verdict_text"]

MIN_SHARED_TURNS = 30
MIN_REVIEWERS = 3
FDR_Q = 0.05


def _stats(pred: np.ndarray, answer: np.ndarray, values: np.ndarray) -> dict:
    """Pearson, RMSE and quadratic-weighted kappa (pred rounded to the nearest option value)."""
    n = len(pred)
    if n < 2:
        return {"pearson": None, "rmse": None, "kappa": None, "n": n}
    nearest = values[np.abs(pred[:, None] - values[None]).argmin(1)]
    constant = np.ptp(pred) == 0 or np.ptp(answer) == 0
    kappa = cohen_kappa_score(nearest, answer, weights="quadratic", labels=values) if not constant else math.nan
    return {
        "pearson": None if constant else float(stats.pearsonr(pred, answer)[0]),
        "rmse": float(np.sqrt(np.mean((pred - answer) ** 2))),
        "kappa": None if not np.isfinite(kappa) else float(kappa),
        "n": int(n),
    }


def nearest_option(pred: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each prediction as the nearest option value (NaN stays NaN).

    >>> nearest_option(np.array([3.9999997, 1.4, np.nan]), np.array([1.0, 2.0, 3.0, 4.0])).tolist()
    [4.0, 1.0, nan]
    """
    pred = np.asarray(pred, float)
    ok = np.isfinite(pred)
    out = np.full(pred.shape, np.nan)
    out[ok] = values[np.abs(pred[ok, None] - values[None]).argmin(1)]
    return out


def _shared(item: np.ndarray, judge: np.ndarray, value: np.ndarray):
    """Per label row: the mean answer of the *other* reviewers of its turn and how many there are."""
    n_items = int(item.max()) + 1 if len(item) else 0
    count = np.bincount(item, minlength=n_items)
    total = np.bincount(item, weights=value, minlength=n_items)
    others = count[item] - 1
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_others = (total[item] - value) / others
    return mean_others, others


def alt_test(item, judge, value, f, epsilon: float, judges: list[str], *, options=None) -> dict:
    """The alternative annotator test (module docstring). item/judge/value: (R,) label rows of one question;
    f: (n_items,) the judge's prediction per turn (NaN: none); options: the question's option values, f then
    compared as the answer the judge would give (the nearest option; None: f as given)."""
    if not 0 < epsilon < 1:
        raise InputError(f"epsilon={epsilon} is not in (0, 1).", fix="pass epsilon=0.1 (the paper's default).")
    if options is not None:
        f = nearest_option(f, np.asarray(options, float))
    per_reviewer, skipped = [], []
    for j in np.unique(judge):
        mine = np.flatnonzero(judge == j)
        rows = []
        for r in mine:  # the other reviewers' answers of this turn
            others = value[(item == item[r]) & (judge != j)]
            if len(others) and np.isfinite(f[item[r]]):
                rows.append((np.sqrt(np.mean((f[item[r]] - others) ** 2)), np.sqrt(np.mean((value[r] - others) ** 2))))
        if len(rows) < MIN_SHARED_TURNS:
            skipped.append({"judge_id": judges[j], "shared_turns": len(rows)})
            continue
        judge_err, human_err = np.array(rows).T
        w_f, w_h = (judge_err <= human_err).astype(float), (human_err <= judge_err).astype(float)
        d = w_h - w_f
        sd = d.std(ddof=1)
        if sd == 0:  # every turn the same outcome: the test statistic is +-infinite
            p = 0.0 if d.mean() < epsilon else 1.0
        else:
            p = float(stats.t.cdf((d.mean() - epsilon) / (sd / math.sqrt(len(d))), len(d) - 1))
        per_reviewer.append(
            {
                "judge_id": judges[j],
                "shared_turns": len(d),
                "rho_judge": float(w_f.mean()),
                "rho_reviewer": float(w_h.mean()),
                "p": p,
            }
        )
    if per_reviewer:
        adjusted = stats.false_discovery_control([r["p"] for r in per_reviewer], method="by")
        for record, p in zip(per_reviewer, adjusted, strict=True):
            record["p_adjusted"], record["judge_wins"] = float(p), bool(p < FDR_Q)
    tested = len(per_reviewer)
    winning = float(np.mean([r["judge_wins"] for r in per_reviewer])) if tested else None
    outcome = "undecided" if winning is None or tested < MIN_REVIEWERS else ("passes" if winning >= 0.5 else "fails")
    return {
        "epsilon": epsilon,
        "fdr_q": FDR_Q,
        "min_shared_turns": MIN_SHARED_TURNS,
        "tested": tested,
        "winning_rate": winning,
        "advantage": float(np.mean([r["rho_judge"] for r in per_reviewer])) if tested else None,
        "outcome": outcome,
        "reviewers": per_reviewer,
        "skipped": skipped,
    }


def reviewer_agreement(ds, predicted: dict[int, np.ndarray] | None = None, *, epsilon: float = 0.1) -> dict:
    """(a), (b), (c) of the module docstring for every question of `ds` that reviewers answered.
    predicted: question index -> (R,) out-of-fold expected answer of every label row (NaN where the row
    was not predicted); questions without it get (a) only."""
    if not 0 < epsilon < 1:
        raise InputError(f"epsilon={epsilon} is not in (0, 1).", fix="pass epsilon=0.1 (the paper's default).")
    out = {}
    for q, question in enumerate(ds.rubric.questions):
        rows = np.flatnonzero(ds.answers[:, q] >= 0)
        if not len(rows):
            continue
        values = np.asarray(question.values, float)
        item, judge, value = ds.label_item[rows], ds.label_judge[rows], values[ds.answers[rows, q]]
        mean_others, n_others = _shared(item, judge, value)
        shared = n_others > 0
        block: dict[str, Any] = {
            "reviewers": _stats(mean_others[shared], value[shared], values)
            | {"n_reviewers": int(len(np.unique(judge[shared])))},
            "calibrated": None,
            "alt_test": None,
        }
        pred = None if predicted is None or q not in predicted else np.asarray(predicted[q], float)[rows]
        if pred is not None:
            ok = shared & np.isfinite(pred)
            block["calibrated"] = _stats(pred[ok], value[ok], values)
            f = np.full(len(ds.items), np.nan)  # the mixture of the turn's reviewers' predictions
            have = np.isfinite(pred)
            sums = np.bincount(item[have], weights=pred[have], minlength=len(ds.items))
            counts = np.bincount(item[have], minlength=len(ds.items))
            f[counts > 0] = sums[counts > 0] / counts[counts > 0]
            block["alt_test"] = alt_test(item, judge, value, f, epsilon, ds.judges, options=values)
        block["verdict"] = verdict_text(question.id, block)
        out[question.id] = block
    return {
        "epsilon": epsilon,
        "questions": out,
        "note": "reviewers: each reviewer against the mean of the turn's other reviewers (leave one out); "
        "calibrated: cv's out-of-fold prediction for that reviewer on the same turns; alt_test: the "
        "alternative annotator test (Calderon et al. 2025) of the calibrated judge against each "
        "reviewer with enough shared turns.",
    }


def verdict_text(question: str, block: dict) -> str:
    """The verdict for one question in words."""
    test = block.get("alt_test")
    if test is None:
        return (
            f"{question}: not tested (cv calibrates another question; run `cv target={question}` to test "
            f"whether the calibrated judge can stand in for a reviewer here)."
        )
    if test["outcome"] == "passes":
        return (
            f"{question}: the calibrated judge can stand in for a reviewer: it agrees with the other reviewers "
            f"at least as well as {test['winning_rate']:.0%} of the {test['tested']} tested reviewers "
            f"(epsilon {test['epsilon']:g})."
        )
    if test["outcome"] == "fails":
        return (
            f"{question}: the calibrated judge cannot stand in for a reviewer: it matches only "
            f"{test['winning_rate']:.0%} of the {test['tested']} tested reviewers (needs 50%, epsilon "
            f"{test['epsilon']:g})."
        )
    short = len(test["skipped"])
    return (
        f"{question}: undecided: {test['tested']} reviewer(s) share at least {MIN_SHARED_TURNS} turns with "
        f"others ({short} have fewer); have at least {MIN_REVIEWERS} reviewers each label "
        f"{MIN_SHARED_TURNS} or more turns that other reviewers also label."
    )


def cv_reviewer_agreement(ds, result, epsilon: float) -> dict:
    """reviewer_agreement with the calibrated method's out-of-fold target predictions of a CVResult."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)  # cross_validate's label rows, in its order
    calibrated = result.predictions[result.predictions["method"] == "calibrated"]
    predicted = np.full(len(ds.label_item), np.nan)
    predicted[rows] = calibrated["expected"].to_numpy(float)
    return reviewer_agreement(ds, {t: predicted}, epsilon=epsilon)


def agreement_from_predictions(ds, calibrated, epsilon: float) -> dict:
    """reviewer_agreement from a predictions frame of the calibrated method (conversation_id, turn, judge_id,
    expected; a cv folder's or the report's own cv), matched to `ds`'s target label rows."""
    t = ds.target_index
    keys = ds.items.iloc[ds.label_item][["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    keys["judge_id"] = [ds.judges[j] for j in ds.label_judge]
    frame = calibrated[["conversation_id", "turn", "judge_id", "expected"]].astype(
        {"conversation_id": str, "turn": str, "judge_id": str}
    )
    frame = frame.drop_duplicates(["conversation_id", "turn", "judge_id"])
    merged = keys.merge(frame, on=["conversation_id", "turn", "judge_id"], how="left")
    return reviewer_agreement(ds, {t: merged["expected"].to_numpy(float)}, epsilon=epsilon)
