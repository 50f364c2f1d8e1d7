"""Chance-corrected agreement per question, reviewers with each other beside each calibrated judge with the
reviewers, with the base rate that kappa depends on.

- reviewers: every ordered pair of two reviewers of the same turn (both orders, so neither is the
  reference), pooled; the quadratic-weighted kappa of their answers, and their exact agreement.
- each judge: its calibrated out-of-fold prediction for a reviewer (the nearest option) against that
  reviewer's answer, over every label row; also per reviewer.
- the base rate: how the reviewers' answers spread over the options, the commonest option's share, and the
  exact agreement chance alone gives (sum of squared shares). A high exact agreement with a skewed base rate
  can be a low kappa: read the three together.
Intervals are 95% percentile intervals over the same resamples of conversations as the other figures.
"""

from __future__ import annotations

import numpy as np

from calibration.judges.agreement import exact_agreement, interval, nearest_index, weighted_kappa

__all__ = ["base_rate", "judge_kappa", "reviewer_kappa", "reviewer_pairs"]


def reviewer_pairs(item: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first, second) label row indices of every ordered pair of two label rows of the same item.

    >>> [x.tolist() for x in reviewer_pairs(np.array([0, 1, 0, 0]))]
    [[0, 0, 2, 2, 3, 3], [2, 3, 0, 3, 0, 2]]
    """
    first, second = [], []
    order = np.argsort(item, kind="stable")
    starts = np.flatnonzero(np.r_[True, item[order][1:] != item[order][:-1]])
    for rows in np.split(order, starts[1:]):
        if len(rows) > 1:
            a, b = np.meshgrid(rows, rows, indexing="ij")
            keep = a != b
            first.append(a[keep])
            second.append(b[keep])
    if not first:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(first), np.concatenate(second)


def _summary(kappa: np.ndarray, exact: np.ndarray, n: int) -> dict:
    low, high = interval(kappa[1:])
    return {
        "kappa": None if not np.isfinite(kappa[0]) else float(kappa[0]),
        "low": low,
        "high": high,
        "exact": float(exact[0]),
        "n": int(n),
    }


def base_rate(answer: np.ndarray, values: np.ndarray) -> dict:
    """How the reviewers' answers (option indices) spread over the options."""
    share = np.bincount(answer, minlength=len(values)) / max(len(answer), 1)
    return {
        "shares": {f"{v:g}": float(s) for v, s in zip(values, share, strict=True)},
        "majority": float(share.max()),
        "chance_exact": float((share**2).sum()),
    }


def reviewer_kappa(item: np.ndarray, answer: np.ndarray, k: int, W: np.ndarray) -> dict | None:
    """Reviewers with each other (module docstring); None where no turn has two reviewers. W: (1 + B, R)."""
    first, second = reviewer_pairs(item)
    if not len(first):
        return None
    Wp = W[:, first]  # a pair counts as often as its conversation is drawn
    a, b = answer[first], answer[second]
    return _summary(weighted_kappa(a, b, k, Wp), exact_agreement(a, b, Wp), len(first) // 2) | {
        "turns_with_two_or_more": int(len(np.unique(item[first])))
    }


def judge_kappa(expected: np.ndarray, answer: np.ndarray, values: np.ndarray, W: np.ndarray) -> dict:
    """A calibrated judge's answer (the option nearest its expected answer) against the reviewers'."""
    said = nearest_index(expected, values)
    return _summary(weighted_kappa(said, answer, len(values), W), exact_agreement(said, answer, W), len(answer))


def per_reviewer_kappa(
    expected: np.ndarray, answer: np.ndarray, values: np.ndarray, reviewer: np.ndarray, names: list[str], W: np.ndarray
) -> dict[str, dict]:
    """judge_kappa against each reviewer alone (their own label rows)."""
    return {
        names[j]: judge_kappa(expected[reviewer == j], answer[reviewer == j], values, W[:, reviewer == j])
        for j in np.unique(reviewer)
    }


def per_role_kappa(
    item: np.ndarray,
    expected: dict[str, np.ndarray],
    answer: np.ndarray,
    values: np.ndarray,
    role: np.ndarray,
    W: np.ndarray,
) -> dict[str, dict]:
    """Per chatbot role (role: (R,) each label row's): the reviewers' kappa with each other and each judge's
    (expected: judge -> (R,) its calibrated expected answers) against the reviewers, on that role's rows."""
    out = {}
    for name in sorted(set(role)):
        mine = role == name
        out[name] = {
            "reviewers": reviewer_kappa(item[mine], answer[mine], len(values), W[:, mine]),
            "judges": {j: judge_kappa(e[mine], answer[mine], values, W[:, mine]) for j, e in expected.items()},
        }
    return out
