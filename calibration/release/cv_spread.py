"""A release plan's spread from the calibrator's out-of-fold agreement with the reviewers (`suggest
purpose=estimate width=W | decide_at=X model=M cv=DIR`).

Without labels of the release, the plan (calibration/release/planning.py) can only take the calibrator as
calibrated: every turn a Bernoulli of its predicted rate f, so a conversation's residual total
R_c = sum_t (Y_t - f_t) has variance B_c = sum_t f_t (1 - f_t), and ppi's s2 is mean(B_c). Where the
calibrator is off, the residual is larger and that plan too short. `role-rubric cv` measured how far off it
is: every labelled turn of the training data was predicted by a calibrator that never saw its conversation,
the same position the release's turns are in. From those rows (Y_t: the turn's reviewers' share answering
>= adheres_at; f_t: their predicted share) this module measures three numbers and carries them over:
  - beta, the slope of the conversations' residual total on the calibrator's own centred total
    F~_c = F_c - f_bar m_c (R~_c = R_c - r_bar m_c, r_bar the mean residual per turn, a bias ppi removes):
    below 0 the calibrator spreads its predictions too wide (over-confident), above 0 too narrow;
  - phi, the turn-level inflation: sum_t e_t^2 / sum_t f_t (1 - f_t), with e_t = Y_t - f_t - r_bar -
    beta (f_t - f_bar) the turn's residual after the slope (1 for a calibrated calibrator; below 1 where
    cv's turns have several reviewers whose mean is less noisy than one answer);
  - rho, the within-conversation correlation of those residuals that the conversation totals imply: with
    Var(e_t) = phi v_t and Cov(e_t, e_s) = rho phi sqrt(v_t v_s) (an exchangeable working correlation),
    Var(u_c) = phi (B_c + rho S_c), S_c = (sum_t sqrt(v_t))^2 - B_c; rho is the moment solution over cv's
    conversations, clipped to [0, 1] (0 where every conversation has one turn: nothing to measure).
The release's spread is then the calibrator-alone formulas corrected: with k = 1 + beta, its predicted f
and its own conversation lengths,
    humans s2 = mean(k^2 F~_c^2 + U_c),  ppi s2 = mean((k - lam)^2 F~_c^2 + U_c),  U_c = phi (B_c + rho S_c),
lam = clip(k, 0, 1) (the power-tuned lam that ppi will find; with it ppi's s2 is at most the humans-only
one). A calibrated calibrator (beta 0, phi 1, rho 0) gives back the calibrator-alone
spread exactly. The inflation printed is the conversation-level one, sum_c u_c^2 / sum_c B_c on cv.

Why it is principled: the quantities are moments of out-of-fold residuals, which estimate how the calibrator
errs on conversations it never saw; the working model transfers them to the release's own f and lengths
(so a release of longer conversations gets the larger within-conversation term), and the plan counts the
noise of the measurement: its degrees of freedom are cv's conversations (the units the moments average
over), so labels_needed's F-based predictive assurance applies as to a pilot of that size.
What it assumes: the release resembles cv's data in how wrong the calibrator is (a release that shifted
away from the training data, where the calibrator errs more, gets too short a plan: a pilot of 10-20 of
its own conversations is then the better source), and one reviewer panel like cv's. The expected rate is
the calibrator's on the release (a bias cv measured is not carried over: ppi's interval does not depend on it).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.release.planning import Spread
from rubric.errors import InputError

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["CvAgreement", "cv_agreement", "read_cv_agreement", "spread_from_cv"]


@dataclass(frozen=True)
class CvAgreement:
    """How the calibrator's out-of-fold predictions err against the reviewers (module docstring)."""

    slope: float
    """beta: the residual total's slope on the calibrator's centred total (0: calibrated spread)."""
    turn_inflation: float
    """phi: the turns' residual variance over f (1 - f) (1: calibrated)."""
    correlation: float
    """rho: the within-conversation correlation of the turns' residuals, in [0, 1]."""
    inflation: float
    """sum_c u_c^2 / sum_c B_c on cv's conversations: how far the residual spread exceeds a calibrated one's."""
    n_conversations: int
    n_turns: int


def cv_agreement(conversation: np.ndarray, f: np.ndarray, y: np.ndarray) -> CvAgreement:
    """The agreement of per-turn predicted rates f with the reviewers' shares y (conversation: each turn's
    conversation id)."""
    f, y = np.asarray(f, float), np.asarray(y, float)
    _, conv = np.unique(conversation, return_inverse=True)
    m = np.bincount(conv).astype(float)
    f_bar, r_bar = f.mean(), (y - f).mean()
    F = np.bincount(conv, weights=f) - f_bar * m
    R = np.bincount(conv, weights=y - f) - r_bar * m
    beta = float(F @ R / (F @ F)) if F @ F > 0 else 0.0
    e = (y - f - r_bar) - beta * (f - f_bar)
    v = f * (1 - f)
    B = np.bincount(conv, weights=v)
    S = np.bincount(conv, weights=np.sqrt(v)) ** 2 - B
    u = np.bincount(conv, weights=e)
    ee, vv = float(e @ e), float(v.sum())
    phi = ee / vv if vv > 0 else 1.0
    pairs = float(u @ u) - ee  # sum over conversations of sum_{t != s} e_t e_s
    rho = float(np.clip(pairs / (phi * S.sum()), 0.0, 1.0)) if phi > 0 and S.sum() > 0 else 0.0
    inflation = float(u @ u) / float(B.sum()) if B.sum() > 0 else 1.0
    return CvAgreement(beta, phi, rho, inflation, len(m), len(f))


def spread_from_cv(conversation: np.ndarray, f: np.ndarray, agreement: CvAgreement, source: str) -> Spread:
    """The release's spread from its predicted rates f (conversation: each turn's conversation id), corrected
    by cv's out-of-fold agreement; df: cv's conversations - 1."""
    f = np.asarray(f, float)
    _, conv = np.unique(conversation, return_inverse=True)
    m = np.bincount(conv).astype(float)
    A = np.bincount(conv, weights=f)
    v = f * (1 - f)
    B = np.bincount(conv, weights=v)
    S = np.bincount(conv, weights=np.sqrt(v)) ** 2 - B
    rate = float(A.sum() / m.sum())
    level = (A - rate * m) ** 2
    U = agreement.turn_inflation * (B + agreement.correlation * S)
    k = 1.0 + agreement.slope
    lam = min(max(k, 0.0), 1.0)
    humans = float(np.mean(k * k * level + U))
    ppi = float(np.mean((k - lam) ** 2 * level + U))
    return Spread(rate, humans, min(ppi, humans), float(m.mean()), len(m), source, agreement.n_conversations - 1)


def read_cv_agreement(folder: str | Path, model, adheres_at: float) -> CvAgreement:
    """cv's out-of-fold agreement for `model`'s target, from a `role-rubric cv` folder: refuses a folder for
    another question, rubric or judge, and a predictions.csv without usable calibrated rows."""
    from calibration.evaluation.cv_predictions import REFERENCE, read_cv_folder
    from rubric.judge.identity import identity_differences

    folder = Path(folder)
    target = model.rubric.target
    fix = "pass cv=DIR written by `role-rubric cv` on the model's training data (same rubric, target and judge)."
    if not folder.is_dir():
        raise InputError("cv= is not a folder.", path=folder, fix=fix)
    predictions, info = read_cv_folder(folder, target, reader="the model's", target_fix=fix)
    path = folder / "predictions.csv"
    if info.get("target") not in (None, target):
        raise InputError(f"cv ran for target {info['target']!r}, the model's is {target!r}.", path=folder, fix=fix)
    recorded = info.get("judge")
    if recorded and model.judge_identity:
        diffs = identity_differences(model.judge_identity, recorded)
        if diffs:
            raise InputError(
                f"cv ran on another judge's distributions than the model was trained on ({'; '.join(diffs)}).",
                path=folder / "metrics.json",
                fix=fix,
            )
    elif model.judge_identity:
        log.info(f"suggest: note: {folder} records no judge, so cv's judge cannot be checked against the model's")
    rows = predictions[predictions["method"] == REFERENCE]
    columns = [c for c in rows.columns if c.startswith("p_")]
    values = [float(c[2:]) for c in columns] if all(_number(c[2:]) for c in columns) else []
    q = model.rubric.question(target)
    theirs = sorted(float(o.value) for o in q.options)
    if sorted(values) != theirs:
        raise InputError(
            f"its p_<value> columns {columns} are not the options {theirs} of the model's target {target!r}.",
            path=path,
            fix=fix,
        )
    probs = rows[columns].apply(pd.to_numeric, errors="coerce").to_numpy(float)
    bad = np.flatnonzero(~np.isfinite(probs).all(1) | (probs < 0).any(1) | (probs > 1).any(1))
    if bad.size:
        raise InputError(
            "a calibrated row's probabilities are not numbers in [0, 1].",
            path=path,
            row=int(rows.index[bad[0]]) + 2,
            fix=fix,
        )
    answers = rows["answer"].to_numpy(float)
    f = probs[:, np.asarray(values) >= adheres_at].sum(1)
    y = (answers >= adheres_at).astype(float)
    conversations = rows["conversation_id"].astype(str)
    if "dataset" in rows:  # cv of several directories: "c000" of each is its own conversation
        conversations = rows["dataset"].astype(str) + "/" + conversations
    key, turn = np.unique((conversations + "\x1f" + rows["turn"].astype(str)).to_numpy(), return_inverse=True)
    per_turn = np.bincount(turn).astype(float)
    f_t, y_t = np.bincount(turn, weights=f) / per_turn, np.bincount(turn, weights=y) / per_turn
    conversation = np.array([k.split("\x1f")[0] for k in key], dtype=object)
    if len(np.unique(conversation)) < 3:
        raise InputError(
            f"its calibrated rows cover {len(np.unique(conversation))} conversation(s); the spread needs 3 or more.",
            path=path,
            fix=fix,
        )
    return cv_agreement(conversation, f_t, y_t)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
