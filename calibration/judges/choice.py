"""Which judge to use for a question, how sure that choice is, and what it is worth in labels.

- The pick: the judge whose calibrated prediction has the lowest out-of-fold RMSE against the reviewers
  (the headline metric of `cv`). Within noise where the paired 95% bootstrap interval of its RMSE minus
  the runner-up's (conversations resampled) reaches 0.
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

__all__ = ["MIN_CONFIRM_CONVERSATIONS", "confirm_on_held_out", "label_spread", "pick"]

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
