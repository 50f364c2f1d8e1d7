"""Krippendorff's alpha, the chance-corrected agreement reviewers can act on, with intervals over resampled
conversations and the base rate beside it: per question, per chatbot role and per reviewer, the reviewers with
each other beside each calibrated judge with the reviewers.

alpha = 1 - D_o / D_e: the disagreement observed within units (turns) over the disagreement expected from how
all the answers spread, so it takes any number of reviewers per turn and turns with one reviewer simply add
nothing (Krippendorff 2011, "Computing Krippendorff's Alpha-Reliability"). Everything is computed from
ordered pairs of values of the same unit, each pair weighted 1 / (m_u - 1) (m_u: the unit's values): their
coincidence matrix is Krippendorff's, and the pairs chosen say whose agreement it is:
  - reviewers: every ordered pair of two reviewers of the same turn;
  - a reviewer with the others: the pairs of those units that involve that reviewer;
  - a calibrated judge with the reviewers: per label row, the judge's answer for that reviewer (the option
    nearest its calibrated expected answer) and the reviewer's (a unit of two values).
Rubric answers are ordered options, so the level is ordinal by default (distances by the ranks the answers
take, not the options' numeric spacing); interval uses the values.
Every function takes W (B, P): row b weights each pair by how often its conversation was drawn in resample b
(row 0 ones: the sample itself), so the resamples are one batched computation.
"""

from __future__ import annotations

import numpy as np

from calibration.judges.agreement import interval, nearest_index
from calibration.judges.kappa import base_rate, reviewer_pairs

__all__ = ["LEVELS", "alpha_replicates", "judge_alpha", "question_alpha", "reviewer_alpha", "unit_pairs"]

LEVELS = ("nominal", "ordinal", "interval")


def _squared_distance(n_c: np.ndarray, values: np.ndarray, level: str) -> np.ndarray:
    """(B, k, k) Krippendorff's squared difference between values c and k for each replicate's marginals n_c
    (B, k): ordinal distances depend on how many answers fall between c and k."""
    k = n_c.shape[1]
    i, j = np.indices((k, k))
    if level == "nominal":
        return np.broadcast_to((i != j).astype(float), (len(n_c), k, k))
    if level == "interval":
        return np.broadcast_to((values[i] - values[j]) ** 2, (len(n_c), k, k))
    cum = np.cumsum(n_c, axis=1)  # (B, k)
    lo, hi = np.minimum(i, j), np.maximum(i, j)
    between = cum[:, hi] - cum[:, lo] + n_c[:, lo]  # sum of n_g for g from lo to hi
    return (between - (n_c[:, i] + n_c[:, j]) / 2) ** 2


def alpha_replicates(
    a: np.ndarray,
    b: np.ndarray,
    pair_weight: np.ndarray,
    W: np.ndarray,
    values: np.ndarray,
    *,
    level: str = "ordinal",
) -> np.ndarray:
    """(B,) Krippendorff's alpha from ordered pairs of values of the same unit: a, b (P,) option indices in
    [0, k), pair_weight (P,) 1 / (m_u - 1) of the pair's unit, W (B, P) resample weights, values (k,) the
    options' values (read by level=interval only). NaN where the answers take one value only.

    >>> agree = np.array([0, 0, 1, 1])  # two units of two values, (0, 0) and (1, 1): both orders of each pair
    >>> float(alpha_replicates(agree, agree, np.ones(4), np.ones((1, 4)), np.array([0.0, 1.0]))[0])
    1.0
    >>> a, b = np.array([0, 1, 1, 0]), np.array([1, 0, 0, 1])  # (0, 1) and (1, 0): worse than chance
    >>> float(alpha_replicates(a, b, np.ones(4), np.ones((1, 4)), np.array([0.0, 1.0]))[0])
    -0.5
    """
    if level not in LEVELS:
        raise ValueError(f"level={level!r}: use one of {LEVELS}.")
    k = len(values)
    onehot = np.zeros((len(a), k * k))
    onehot[np.arange(len(a)), a * k + b] = pair_weight
    seen = (W @ onehot).reshape(len(W), k, k)  # (B, k, k) coincidence matrix o_ck
    n_c = seen.sum(2)  # (B, k) how often each value is pairable
    n = n_c.sum(1)
    delta = _squared_distance(n_c, np.asarray(values, float), level)
    observed = (seen * delta).sum((1, 2))
    expected = (n_c[:, :, None] * n_c[:, None, :] * delta).sum((1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(expected > 0, 1.0 - (n - 1) * observed / expected, np.nan)


def unit_pairs(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first, second, weight): every ordered pair of two values (rows) of the same unit, weighted 1 / (m_u - 1).

    >>> first, second, w = unit_pairs(np.array([0, 0, 0, 1]))
    >>> first.tolist(), second.tolist(), w.tolist()
    ([0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    """
    first, second = reviewer_pairs(unit)
    inverse = np.unique(unit, return_inverse=True)[1]
    size = np.bincount(inverse)[inverse]  # (rows,) m_u of each row's unit
    return first, second, 1.0 / (size[first] - 1) if len(first) else np.zeros(0)


def _summary(reps: np.ndarray, answers: np.ndarray, values: np.ndarray, **counts: int) -> dict:
    low, high = interval(reps[1:])
    return {
        "alpha": None if not np.isfinite(reps[0]) else float(reps[0]),
        "low": low,
        "high": high,
        **counts,
        "base_rate": base_rate(answers, values),
    }


def reviewer_alpha(
    item: np.ndarray,
    answer: np.ndarray,
    values: np.ndarray,
    W: np.ndarray,
    *,
    only: np.ndarray | None = None,
    level: str = "ordinal",
) -> dict | None:
    """The reviewers with each other (item, answer: (R,) each label row's turn and option index; W (B, R)).
    only: (R,) bool, keep the pairs that involve these rows (one reviewer with the others). None where no
    turn has two reviewers."""
    first, second, weight = unit_pairs(item)
    if only is not None:
        keep = only[first] | only[second]
        first, second, weight = first[keep], second[keep], weight[keep]
    if not len(first):
        return None
    reps = alpha_replicates(answer[first], answer[second], weight, W[:, first], values, level=level)
    rows = np.unique(np.r_[first, second])
    return _summary(reps, answer[rows], values, turns=int(len(np.unique(item[first]))), label_rows=len(rows))


def judge_alpha(
    expected: np.ndarray, answer: np.ndarray, values: np.ndarray, W: np.ndarray, *, level: str = "ordinal"
) -> dict:
    """A calibrated judge (the option nearest its expected answer for each label row's reviewer) with the
    reviewers: each label row a unit of two values."""
    said = nearest_index(expected, values)
    a, b = np.r_[said, answer], np.r_[answer, said]
    reps = alpha_replicates(a, b, np.ones(len(a)), np.hstack([W, W]), values, level=level)
    return _summary(reps, answer, values, label_rows=len(answer))


def question_alpha(
    item: np.ndarray,
    answer: np.ndarray,
    values: np.ndarray,
    W: np.ndarray,
    expected: dict[str, np.ndarray],
    reviewer: np.ndarray,
    reviewer_names: list[str],
    role: np.ndarray | None,
    *,
    level: str = "ordinal",
) -> dict:
    """One question's alpha block: the reviewers with each other beside each calibrated judge (expected: judge
    -> (R,) its calibrated expected answers), overall, per reviewer and, where role is given ((R,) each label
    row's chatbot role), per role; each with its 95% interval over resampled conversations and base rate."""

    def judges_on(mine: np.ndarray) -> dict:
        return {
            name: judge_alpha(e[mine], answer[mine], values, W[:, mine], level=level) for name, e in expected.items()
        }

    def both(mine: np.ndarray) -> dict:
        rev = reviewer_alpha(item[mine], answer[mine], values, W[:, mine], level=level)
        return {"reviewers": rev, "judges": judges_on(mine)}

    out = {"level": level} | both(np.ones(len(answer), bool))
    out["per_reviewer"] = {
        reviewer_names[j]: {
            "reviewers": reviewer_alpha(item, answer, values, W, only=reviewer == j, level=level),
            "judges": judges_on(reviewer == j),
        }
        for j in np.unique(reviewer)
    }
    out["per_role"] = None if role is None else {name: both(role == name) for name in sorted(set(role))}
    return out
