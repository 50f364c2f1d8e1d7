"""Which judge to use for a question, how sure that choice is, and what it is worth in labels.

- The pick: the judge whose calibrated prediction has the lowest out-of-fold RMSE against the reviewers
  (the headline metric of `cv`). Within noise where the paired 95% bootstrap interval of its RMSE minus
  the runner-up's (conversations resampled) reaches 0.
- The pooled pick (`pooled_picks`, an option beside `pick`): a judge or prompt is one set-up, usually better or
  worse broadly, so each question's paired difference is shrunk toward the pair's mean over the questions
  (`shrink`, normal-normal empirical Bayes, the between-question variance estimated from the data: a judge
  better on one question only is shrunk little when the differences are heterogeneous); its interval and
  within-noise flag come from the same resamples.
- The whole judge (`whole_judge`): a team pays for one judge or prompt, not one per question, so beside the
  per-question picks one verdict on the set-up as a whole: each judge's RMSE averaged over the questions (the
  same resamples for every question, so the mean's replicates are the resamples' means), picked and flagged
  within noise as a question is. Where a judge carries little information about most questions, this is the
  verdict that labels can still support (benchmarks/compare_judges.py measures both).
- The winner's curse: the pick's figures are the best of several on the same labels, so they flatter it;
  `p_best` (the share of resamples in which each judge is best) says how often another sample would have
  picked another, and with enough conversations a held-out confirmation picks on one half of the
  conversations and checks the pick on the other.
- The label multiplier: a release estimate of the question's mean answer (`role-rubric estimate`'s ppi, the
  calibrator's mean corrected by its error on the labelled conversations) needs labelled conversations in
  proportion to the residual variance the calibrator leaves, s2 * (1 - R2), with R2 the cross-fitted share
  of the conversation totals' variance it explains (calibration/release/planning.py `spread_from_sample`,
  the variance `suggest` plans from). Judge A then needs n_A / n_B = (1 - R2_A) / (1 - R2_B) of judge B's
  labelled conversations for the same interval width.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from calibration.judges.agreement import interval
from calibration.release.planning import PPI_LAM_DF, labels_needed, spread_from_sample

__all__ = [
    "MIN_CONFIRM_CONVERSATIONS",
    "confirm_on_held_out",
    "label_spread",
    "pick",
    "pooled_picks",
    "shrink",
    "whole_judge",
]

MIN_CONFIRM_CONVERSATIONS = 20
"""Labelled conversations per half for the held-out confirmation (with fewer, none is made)."""


def pick(rmse: dict[str, np.ndarray]) -> dict:
    """The pick among judges from their RMSE replicates ((1 + B,) each: the sample, then the resamples on
    the same conversations): the pick, the runner-up, their paired difference with its interval, whether
    that is within noise, and each judge's share of resamples in which it is best."""
    names = list(rmse)
    stacked = np.stack([rmse[n] for n in names])  # (J, 1 + B)
    order = np.argsort(stacked[:, 0], kind="stable")
    best, runner = names[order[0]], names[order[1]]
    diff = rmse[best] - rmse[runner]
    low, high = interval(diff[1:])
    winners = np.argmin(np.where(np.isfinite(stacked[:, 1:]), stacked[:, 1:], np.inf), axis=0)
    return {
        "pick": best,
        "runner_up": runner,
        "rmse_difference": float(diff[0]),
        "rmse_difference_low": low,
        "rmse_difference_high": high,
        "within_noise": bool(not high < 0),
        "p_best": {n: float(np.mean(winners == j)) for j, n in enumerate(names)},
    }


def confirm_on_held_out(rmse_of, conversation: np.ndarray, names: list[str], seed: int) -> dict | None:
    """Pick on a random half of the conversations, check the pick on the other half. rmse_of(mask) -> {judge:
    RMSE on the label rows in mask}. None with fewer than MIN_CONFIRM_CONVERSATIONS per half."""
    codes = np.unique(conversation)
    if len(codes) < 2 * MIN_CONFIRM_CONVERSATIONS:
        return None
    first = np.random.default_rng([seed, 62]).permutation(codes)[: len(codes) // 2]
    select = np.isin(conversation, first)
    on_select, on_held = rmse_of(select), rmse_of(~select)
    chosen = min(names, key=lambda n: on_select[n])
    held_best = min(names, key=lambda n: on_held[n])
    return {
        "picked_on_half": chosen,
        "best_on_other_half": held_best,
        "confirmed": chosen == held_best,
        "rmse_selection_half": {n: float(on_select[n]) for n in names},
        "rmse_held_out_half": {n: float(on_held[n]) for n in names},
        "conversations_per_half": int(len(first)),
    }


def conversation_totals(expected: np.ndarray, answer_value: np.ndarray, conversation: np.ndarray):
    """(Y, F, m) per labelled conversation: the reviewers' answer total, the calibrated prediction's total over
    the same label rows, and the number of label rows."""
    codes, inverse = np.unique(conversation, return_inverse=True)
    Y = np.bincount(inverse, weights=answer_value, minlength=len(codes))
    F = np.bincount(inverse, weights=expected, minlength=len(codes))
    m = np.bincount(inverse, minlength=len(codes)).astype(float)
    return Y, F, m


def label_spread(
    expected: np.ndarray,
    answer_value: np.ndarray,
    conversation: np.ndarray,
    counts: np.ndarray,
) -> dict[str, Any]:
    """(1 + B,) replicates of the humans-only and ppi residual variances of the conversation totals and the
    cross-fitted R2 = 1 - ppi / humans (`spread_from_sample`); counts: (1 + B, C) how often each labelled
    conversation (in np.unique order) is drawn in each replicate (row 0: once each)."""
    Y, F, m = conversation_totals(expected, answer_value, conversation)
    humans, ppi = np.empty(len(counts)), np.empty(len(counts))
    for b, c in enumerate(counts):
        idx = np.repeat(np.arange(len(Y)), c.astype(int))
        s = spread_from_sample(Y[idx], F[idx], m[idx], m[idx], "labelled conversations")
        humans[b], ppi[b] = s.humans, s.ppi
    with np.errstate(invalid="ignore", divide="ignore"):
        r2 = 1.0 - ppi / humans
    return {"humans": humans, "ppi": ppi, "r2": r2, "m_bar": float(m.mean()), "conversations": len(Y)}


def multipliers(spreads: dict[str, dict[str, np.ndarray]], against: str) -> dict[str, dict[str, float]]:
    """judge -> how many times the labelled conversations of `against` it needs for the same ppi interval
    width (ppi_judge / ppi_against, the sample's and its 95% interval over the shared resamples)."""
    out = {}
    base = spreads[against]["ppi"]
    for name, s in spreads.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = s["ppi"] / base
        low, high = interval(ratio[1:])
        out[name] = {"multiplier": float(ratio[0]), "low": low, "high": high}
    return out


def labels_for_width(spread: dict, width: float, release: int, alpha: float = 0.1) -> dict[str, int | None]:
    """Labelled conversations for a ppi (and a humans-only) interval of half-width `width` on the mean
    answer, in a release of `release` conversations, planned from this sample's spread as `suggest` plans."""
    df = spread["conversations"] - 1
    ppi = labels_needed(float(spread["ppi"][0]), spread["m_bar"], release, width, alpha, df=df, lam_df=PPI_LAM_DF)
    humans = labels_needed(float(spread["humans"][0]), spread["m_bar"], release, width, alpha, df=df)
    return {"ppi": ppi, "humans": humans}


def shrink(diff: np.ndarray) -> dict[str, Any]:
    """Empirical-Bayes (normal-normal) pooling of one pair of judges' per-question differences toward their
    judge-level mean. diff: (Q, 1 + B), each question's difference (the sample, then the bootstrap replicates
    on the same conversation resamples for every question). Per question: the sampling variance s2 is the
    replicates' variance; the between-question variance tau2 is estimated from the data (DerSimonian-Laird
    moments, weights 1 / s2); the judge-level mean mu is the weighted mean with weights 1 / (s2 + tau2); the
    pooled difference is mu + (1 - b) (d - mu) with b = s2 / (s2 + tau2). The pooled replicates are
    approximate posterior draws made from the same resamples: pooled + sqrt(1 - b) (d_rep - d) + b (mu_rep - mu),
    whose spread is the normal-normal posterior's, (1 - b) s2 + b^2 var(mu) (Morris 1983; the uncertainty of
    tau2 itself is not carried). Questions with no spread (an exact tie on every resample) are left as they are
    and out of mu and tau2. With heterogeneous differences tau2 is large and a question moves little; with
    differences that agree up to noise they are pulled to mu."""
    diff = np.asarray(diff, float)
    d, reps = diff[:, 0], diff[:, 1:]
    s2 = np.nanvar(reps, axis=1, ddof=1) if reps.shape[1] > 1 else np.zeros(len(d))
    use = np.isfinite(d) & np.isfinite(s2) & (s2 > 0)
    out = diff.copy()
    b = np.zeros(len(d))
    if use.sum() < 3:  # too few questions to estimate a between-question variance: nothing is pooled
        return {"pooled": out, "mu": float("nan"), "tau2": float("nan"), "shrinkage": b, "pooled_questions": []}
    du, s2u, ru = d[use], s2[use], reps[use]
    w = 1.0 / s2u
    mu_fixed = np.sum(w * du) / w.sum()
    q_stat = np.sum(w * (du - mu_fixed) ** 2)
    tau2 = max(0.0, (q_stat - (len(du) - 1)) / (w.sum() - np.sum(w**2) / w.sum()))
    v = 1.0 / (s2u + tau2)
    mu = np.sum(v * du) / v.sum()
    mu_reps = np.nansum(v[:, None] * ru, axis=0) / v.sum()  # (B,): the same mean on each resample
    bu = s2u / (s2u + tau2)
    centre = mu + (1.0 - bu) * (du - mu)
    out[use, 0] = centre
    out[use, 1:] = (
        centre[:, None] + np.sqrt(1.0 - bu)[:, None] * (ru - du[:, None]) + bu[:, None] * (mu_reps - mu)[None, :]
    )
    b[use] = bu
    return {
        "pooled": out,
        "mu": float(mu),
        "tau2": float(tau2),
        "shrinkage": b,
        "pooled_questions": [int(i) for i in np.flatnonzero(use)],
    }


def pooled_picks(rmse: dict[str, dict[str, np.ndarray]]) -> dict[str, dict]:
    """The pick per question with the evidence pooled across questions: rmse question -> judge -> (1 + B,)
    replicates (the same resamples for every question). Each judge's RMSE minus the first judge's is pooled
    across questions (`shrink`); the pick is the lowest pooled offset, within noise where the 95% interval of
    its pooled difference with the runner-up's reaches 0 (the same replicates)."""
    questions = list(rmse)
    names = list(rmse[questions[0]])
    ref = names[0]
    offsets = {ref: np.zeros((len(questions), len(rmse[questions[0]][ref])))}
    meta: dict[str, dict] = {}
    for n in names[1:]:
        s = shrink(np.stack([rmse[q][n] - rmse[q][ref] for q in questions]))
        offsets[n] = s["pooled"]
        meta[n] = {"mu": s["mu"], "tau2": s["tau2"], "shrinkage": s["shrinkage"]}
    out = {}
    for i, q in enumerate(questions):
        chosen = pick({n: offsets[n][i] for n in names})
        best, runner = chosen["pick"], chosen["runner_up"]
        own = rmse[q][best] - rmse[q][runner]
        other = best if best != ref else runner
        chosen.update(
            rule="pooled",
            own_difference=float(own[0]),
            own_interval=list(interval(own[1:])),
            judge_level_difference=meta[other]["mu"] * (1.0 if other == best else -1.0),
            between_question_variance=meta[other]["tau2"],
            shrinkage=float(meta[other]["shrinkage"][i]),
        )
        out[q] = chosen
    return out


def whole_judge(rmse: dict[str, dict[str, np.ndarray]]) -> dict:
    """The verdict on each judge as a whole: rmse question -> judge -> (1 + B,) replicates on the same
    resamples for every question; each judge's RMSE averaged over the questions, then `pick` on those means
    (the pick, the runner-up, the paired difference of the means with its interval, within noise, p_best)."""
    questions = list(rmse)
    names = list(rmse[questions[0]])
    means = {n: np.mean(np.stack([rmse[q][n] for q in questions]), axis=0) for n in names}
    return pick(means) | {"questions": questions}


def whole_judge_line(chosen: dict) -> str:
    """The whole-judge verdict in words."""
    best, runner = chosen["pick"], chosen["runner_up"]
    diff = (
        f"mean RMSE {chosen['rmse_difference']:+.3f} "
        f"[{chosen['rmse_difference_low']:+.3f}, {chosen['rmse_difference_high']:+.3f}]"
    )
    over = f"over {len(chosen['questions'])} question(s)"
    if chosen["within_noise"]:
        return (
            f"whole judge ({over}): {best} (within noise: {diff} against {runner}, p_best "
            f"{chosen['p_best'][best]:.2f}; label more conversations or choose on cost)."
        )
    return f"whole judge ({over}): {best}, better than {runner} by {diff} (p_best {chosen['p_best'][best]:.2f})."
