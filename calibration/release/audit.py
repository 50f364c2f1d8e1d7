"""The transport audit of `estimate`: is the calibrator's bias on this release within a declared margin?

On the labelled turns of a release, the calibrator's bias is the mean over those turns of (the calibrated
rate, the panel average that `score` and `predict` report) minus (the share of the turn's reviewers whose
answer is >= adheres_at). It is a ratio over conversations (their labelled turns' sum of differences over
their number of labelled turns), so its variance is taken by linearisation with the conversation as the unit
and its interval uses Student's t with n - 1 degrees of freedom, at the estimate's 1 - alpha.

Verdicts against the margin (CJE's transport audit, github cimo-labs/cje):
- PASS: the whole interval lies inside (-margin, +margin), with at least MIN_CONVERSATIONS labelled
  conversations (below that, PASS is withheld: INCONCLUSIVE);
- FAIL: the whole interval lies outside it (the bias exceeds the margin, with 1 - alpha/2 confidence);
- INCONCLUSIVE: otherwise.
With a 90% interval, PASS is the two one-sided tests of equivalence at 5% each.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from rubric.errors import InputError

__all__ = ["MIN_CONVERSATIONS", "bias_interval", "transport_audit", "verdict"]

MIN_CONVERSATIONS = 20
NOTE = (
    "The PPI interval above is valid whatever this verdict says: it corrects the calibrator with the labels. "
    "FAIL means the per-turn calibrated scores (`score`, `predict`) are biased on conversations like these: "
    "retrain with this release's labels (`estimate crossfit=`, or `train data=[OLD,NEW]`) before trusting "
    "them unlabelled. INCONCLUSIVE: label more conversations to decide."
)


def bias_interval(
    calibrated: np.ndarray, human: np.ndarray, conversation: np.ndarray, alpha: float
) -> tuple[float, float, float, int]:
    """(bias, low, high, conversations) of mean(calibrated - human) over turns, conversations as the unit."""
    ids, conv = np.unique(conversation, return_inverse=True)
    n = len(ids)
    total = np.bincount(conv, weights=calibrated - human, minlength=n)
    turns = np.bincount(conv, minlength=n).astype(float)
    bias = float(total.sum() / turns.sum())
    if n < 2:
        return bias, float("-inf"), float("inf"), n
    residual = total - bias * turns
    se = float(np.sqrt(n / (n - 1) * (residual**2).sum()) / turns.sum())
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * se
    return bias, bias - half, bias + half, n


def verdict(low: float, high: float, margin: float, n: int) -> str:
    if low > margin or high < -margin:
        return "FAIL"
    if -margin < low and high < margin and n >= MIN_CONVERSATIONS:
        return "PASS"
    return "INCONCLUSIVE"


def transport_audit(preds, margin: float, alpha: float, roles: dict[str, set[str]] | None = None) -> dict:
    """The audit of the rate's ReviewerPredictions (calibration/release/turns.py), overall and per role."""
    if not margin > 0:
        raise InputError(f"bias_margin={margin} is not above 0.", fix="pass bias_margin=0.05 (on the rate).")

    def audit(conversations=None) -> dict:
        sel = preds.labelled_rows(conversations=conversations)
        item = preds.row_item[sel]
        items, inverse = np.unique(item, return_inverse=True)
        human = np.bincount(inverse, weights=preds.row_value[sel]) / np.bincount(inverse)
        bias, low, high, n = bias_interval(preds.calibrator[items], human, preds.conversation[items], alpha)
        block = {
            "verdict": verdict(low, high, margin, n),
            "bias": bias,
            "low": low if np.isfinite(low) else None,
            "high": high if np.isfinite(high) else None,
            "n_labelled_conversations": n,
            "n_labelled_turns": int(len(items)),
        }
        if block["verdict"] == "INCONCLUSIVE" and n < MIN_CONVERSATIONS and -margin < low and high < margin:
            block["pass_withheld"] = (
                f"the interval lies inside the margin, but PASS needs {MIN_CONVERSATIONS} or "
                "more labelled conversations"
            )
        return block

    result = {
        "quantity": "rate",
        "margin": margin,
        "level": 1 - alpha,
        **audit(),
        "note": NOTE,
        "by_role": {
            role: audit(convs)
            for role, convs in sorted((roles or {}).items())
            if len(preds.labelled_conversations(conversations=convs)) >= 2
        },
    }
    return result


def audit_line(audit: dict) -> str:
    """One line for the terminal: the verdict, the interval that decided it and what to do next."""
    low = "-inf" if audit["low"] is None else f"{audit['low']:+.3f}"
    high = "inf" if audit["high"] is None else f"{audit['high']:+.3f}"
    return (
        f"transport audit: {audit['verdict']}: the calibrator's bias on the rate is {audit['bias']:+.3f} "
        f"[{low}, {high}] ({100 * audit['level']:.0f}%, {audit['n_labelled_conversations']} labelled "
        f"conversations) against a margin of +-{audit['margin']:g}. Next: {next_step(audit)}"
    )


def next_step(audit: dict) -> str:
    """What the verdict asks of the user (the ppi interval holds whatever the verdict)."""
    n = audit["n_labelled_conversations"]
    if audit["verdict"] == "PASS":
        return "the per-turn calibrated scores (score, predict) can be used unlabelled on conversations like these."
    if audit["verdict"] == "FAIL":
        return (
            "retrain with this release's labels (estimate crossfit=5, or train data=[OLD,NEW]) before using the "
            "per-turn calibrated scores unlabelled; the ppi interval above holds as it is."
        )
    if "pass_withheld" in audit:
        return (
            f"label {MIN_CONVERSATIONS - n} more conversations (PASS needs {MIN_CONVERSATIONS}; the bias is within "
            "the margin so far); the ppi interval above holds as it is."
        )
    return (
        "label more conversations to decide (role-rubric suggest purpose=estimate draws them); the ppi "
        "interval above holds as it is."
    )
