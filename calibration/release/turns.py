"""From a model and a release's dataset to the per-conversation totals the estimators take.

The quantity is what a reviewer of the panel, drawn as the labels' reviewers were, would answer on a turn
of the release: a rate (P(answer >= adheres_at)) or a mean answer. On a labelled (turn, reviewer) pair the
human answer is compared with the calibrator's prediction for that same reviewer (the personalised model;
the population model for a reviewer it never saw). On every turn the calibrator's imputed value is the
panel mixture: the reviewers' predictions weighted by their share of the labelled sample, so that the
imputed mean and the corrected predictions are of the same reviewer draw (without that, a panel whose
reviewers label unevenly would bias the correction).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from calibration.release.inference import ClusterSample

__all__ = ["QuestionTurns", "ReviewerPredictions", "question_turns", "reviewer_predictions"]


@dataclass(frozen=True)
class QuestionTurns:
    """Per-turn values of one question and quantity over a release."""

    conversation: np.ndarray
    """(N_items,) conversation id of each turn."""
    imputed: np.ndarray
    """(N_items,) the calibrator's panel-mixture prediction of each turn."""
    calibrator: np.ndarray
    """(N_items,) the calibrator's prediction averaged over every training judge (what predict reports)."""
    raw: np.ndarray
    """(N_items,) the raw judge's value (its own distribution, uncalibrated)."""
    human: np.ndarray
    """(N_items,) reviewers' mean on the turn, NaN where nobody answered this question."""
    same: np.ndarray
    """(N_items,) the predictions for those same reviewers, averaged as `human` is, NaN where unlabelled."""

    def sample(self, pi_of: dict[str, float] | None = None, conversations=None) -> ClusterSample:
        """The per-conversation totals over all conversations (or those named); pi_of: inclusion
        probabilities of the labelled conversations (None: a uniform sample)."""
        keep = np.ones(len(self.conversation), bool) if conversations is None else np.isin(
            self.conversation, list(conversations))
        conv = self.conversation[keep]
        ids, inv = np.unique(conv, return_inverse=True)
        m = np.bincount(inv, minlength=len(ids)).astype(float)
        A = np.bincount(inv, weights=self.imputed[keep], minlength=len(ids))
        labelled = ~np.isnan(self.human[keep])
        L = np.bincount(inv[labelled], minlength=len(ids)).astype(float)
        Ysum = np.bincount(inv[labelled], weights=self.human[keep][labelled], minlength=len(ids))
        Fsum = np.bincount(inv[labelled], weights=self.same[keep][labelled], minlength=len(ids))
        lab = L > 0
        pi = None if pi_of is None else np.array([pi_of[c] for c in ids[lab]], float)
        # A conversation's turns unlabelled for this question are estimated by its labelled ones (the
        # within-conversation mean), so a sample conversation counts by its length in the release.
        return ClusterSample(A=A, m_all=m, Y=m[lab] * Ysum[lab] / L[lab], F=m[lab] * Fsum[lab] / L[lab],
                             m_lab=m[lab], pi=pi)

    def labelled_conversations(self, conversations=None) -> np.ndarray:
        has = ~np.isnan(self.human)
        if conversations is not None:
            has &= np.isin(self.conversation, list(conversations))
        return np.unique(self.conversation[has])


@dataclass(frozen=True)
class ReviewerPredictions:
    """One question's predictions for every reviewer of a release's labels, and the labels themselves, so
    that the per-turn values of any labelled sample of them are a few array operations."""

    conversation: np.ndarray
    """(N_items,) conversation id of each turn."""
    P: np.ndarray
    """(N_items, C) the prediction of each turn for each reviewer column (model judge index `columns`)."""
    calibrator: np.ndarray
    raw: np.ndarray
    row_item: np.ndarray
    """(R,) item of each label row answering the question."""
    row_column: np.ndarray
    """(R,) its reviewer's column in P."""
    row_value: np.ndarray
    """(R,) its value (1[answer >= adheres_at] or the answer)."""

    def turns(self, rows: np.ndarray | None = None) -> QuestionTurns:
        """The per-turn values with the label rows selected by the boolean mask `rows` (default all)."""
        item, column, value = self.row_item, self.row_column, self.row_value
        if rows is not None:
            item, column, value = item[rows], column[rows], value[rows]
        n_items = len(self.conversation)
        per_turn = np.bincount(item, minlength=n_items).astype(float)
        labelled = per_turn > 0
        human = np.full(n_items, np.nan)
        same = np.full(n_items, np.nan)
        human[labelled] = np.bincount(item, weights=value, minlength=n_items)[labelled] / per_turn[labelled]
        same_pred = self.P[item, column]
        same[labelled] = np.bincount(item, weights=same_pred, minlength=n_items)[labelled] / per_turn[labelled]
        # Each labelled turn spreads one unit of weight over its reviewers: their share of the reviewer draw.
        share = np.bincount(column, weights=1.0 / per_turn[item], minlength=self.P.shape[1]) if len(item) else None
        imputed = self.P.mean(1) if share is None else self.P @ (share / share.sum())
        return QuestionTurns(self.conversation, imputed, self.calibrator, self.raw, human, same)


def reviewer_predictions(model, ds, X: torch.Tensor, question: int, *, kind: str,
                         adheres_at: float) -> ReviewerPredictions:
    """kind "rate": P(answer >= adheres_at) and 1[answer >= adheres_at]; kind "mean": the expected and the
    actual answer value."""
    values = ds.option_values()[question, : int(ds.n_options[question])]
    score = (values >= adheres_at).astype(float) if kind == "rate" else values.astype(float)
    n_items = len(ds.items)
    items = np.arange(n_items)

    def predicted(judge_index: int) -> np.ndarray:
        p = model.proba(X, items, np.full(n_items, judge_index, dtype=np.int64))[:, question, : len(values)]
        return np.asarray(p, float) @ score

    rows = np.flatnonzero(ds.answers[:, question] >= 0)
    reviewer = np.array([model.judge_index(ds.judges[j]) for j in ds.label_judge[rows]], dtype=np.int64)
    columns = np.unique(np.append(reviewer, -1))  # -1, the population model, for a sample with no reviewer
    P = np.stack([predicted(int(j)) for j in columns], axis=1)
    panel = range(len(model.judges)) if model.judges and model.settings.personalised else [-1]
    calibrator = np.mean([P[:, np.searchsorted(columns, j)] if j in columns else predicted(j) for j in panel], axis=0)
    raw = ds.probs[:, question, : len(values)].astype(float) @ score
    return ReviewerPredictions(ds.items["conversation_id"].to_numpy(), P, calibrator, raw, ds.label_item[rows],
                               np.searchsorted(columns, reviewer), score[ds.answers[rows, question]])


def question_turns(model, ds, X: torch.Tensor, question: int, *, kind: str, adheres_at: float) -> QuestionTurns:
    """The per-turn values of one question and quantity with all of `ds`'s labels."""
    return reviewer_predictions(model, ds, X, question, kind=kind, adheres_at=adheres_at).turns()
