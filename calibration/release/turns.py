"""From a model and a release's dataset to the per-conversation totals the estimators take.

The quantity is what a reviewer of the panel, drawn as the labels' reviewers were, would answer on a turn
of the release: a rate (P(answer >= adheres_at)) or a mean answer. On a labelled (turn, reviewer) pair the
human answer is compared with the calibrator's prediction for that same reviewer (the personalised model;
the population model for a reviewer it never saw). The imputed value of the release is the mixture of the
reviewers' predictions in the proportions the sample drew them (calibration/release/inference.py: the
estimate then counts the reviewer draw in its variance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from calibration.release.inference import ClusterSample

__all__ = ["ReviewerPredictions", "judge_probabilities", "reviewer_predictions"]


@dataclass(frozen=True)
class ReviewerPredictions:
    """One question's predictions for every reviewer of a release's labels, and the labels themselves, so
    that the estimate from any labelled sample of them is a few array operations."""

    conversation: np.ndarray
    """(N_items,) conversation id of each turn."""
    P: np.ndarray
    """(N_items, C) the prediction of each turn for each reviewer column (a model judge index)."""
    calibrator: np.ndarray
    """(N_items,) the prediction averaged over every training judge (what predict and RoleAdherence report)."""
    raw: np.ndarray
    """(N_items,) the raw judge's value (its own distribution, uncalibrated)."""
    row_item: np.ndarray
    """(R,) item of each label row answering the question."""
    row_column: np.ndarray
    """(R,) its reviewer's column in P."""
    row_value: np.ndarray
    """(R,) its value (1[answer >= adheres_at] or the answer)."""
    other: ReviewerPredictions | None = None
    """A second predictor of the same turns and labels (`estimate crossfit=K`: the unadapted model beside
    the cross-fitted calibrators); its totals ride along in `sample()` as ClusterSample.other."""

    def scope(self, conversations=None) -> np.ndarray:
        """(N_items,) bool: the turns of the conversations named (all by default)."""
        if conversations is None:
            return np.ones(len(self.conversation), bool)
        return np.isin(self.conversation, list(conversations))

    def labelled_rows(self, rows: np.ndarray | None = None, conversations=None) -> np.ndarray:
        """(R,) bool: the label rows selected by `rows` (default all) inside the scope."""
        keep = self.scope(conversations)[self.row_item]
        return keep if rows is None else keep & rows

    def labelled_conversations(self, rows: np.ndarray | None = None, conversations=None) -> np.ndarray:
        return np.unique(self.conversation[self.row_item[self.labelled_rows(rows, conversations)]])

    def human_mean(self, rows: np.ndarray | None = None) -> float:
        """The mean over labelled turns of the reviewers' mean value: the truth when every turn is labelled."""
        sel = self.labelled_rows(rows)
        item = self.row_item[sel]
        per_turn = np.bincount(item, minlength=len(self.conversation))
        turn_sum = np.bincount(item, weights=self.row_value[sel], minlength=len(self.conversation))
        return float((turn_sum[per_turn > 0] / per_turn[per_turn > 0]).mean())

    def sample(self, rows: np.ndarray | None = None, conversations=None, pi_of: dict | None = None) -> ClusterSample:
        """The per-conversation totals with the label rows selected by `rows` (default all), over the turns of
        the conversations named (default all); pi_of: inclusion probabilities (None: uniform)."""
        keep = self.scope(conversations)
        sel = self.labelled_rows(rows, conversations)
        item, column, value = self.row_item[sel], self.row_column[sel], self.row_value[sel]
        mu = self.P[keep].mean(0)  # each reviewer's mean prediction over the release's turns
        ids, conv_of_item = np.unique(self.conversation, return_inverse=True)
        n_items = len(self.conversation)
        per_turn = np.bincount(item, minlength=n_items).astype(float)

        def per_turn_mean(weights):
            return np.bincount(item, weights=weights, minlength=n_items) / np.maximum(per_turn, 1)

        labelled = per_turn > 0
        human, same, level = per_turn_mean(value), per_turn_mean(self.P[item, column]), per_turn_mean(mu[column])
        # The imputed mixture: each labelled turn spreads one unit of weight over its reviewers.
        share = np.bincount(column, weights=1.0 / per_turn[item], minlength=self.P.shape[1])
        imputed = self.P @ (share / share.sum()) if share.sum() > 0 else self.P.mean(1)

        def per_conv(x, mask):
            return np.bincount(conv_of_item[mask], weights=x[mask], minlength=len(ids))

        m = per_conv(np.ones(n_items), keep)
        L = per_conv(np.ones(n_items), keep & labelled)
        lab = L > 0
        # A conversation's turns unlabelled for this question are estimated by its labelled ones (the
        # within-conversation mean), so a sample conversation counts by its length in the release.
        scale = m[lab] / L[lab]
        inside = m > 0
        return ClusterSample(
            A=per_conv(imputed, keep)[inside],
            m_all=m[inside],
            Y=scale * per_conv(human, keep & labelled)[lab],
            F=scale * per_conv(same, keep & labelled)[lab],
            V=scale * per_conv(level, keep & labelled)[lab],
            m_lab=m[lab],
            pi=None if pi_of is None else np.array([pi_of[c] for c in ids[lab]], float),
            other=None if self.other is None else self.other.sample(rows, conversations, pi_of),
        )


def judge_probabilities(model, X: torch.Tensor):
    """judge index -> (N_items, Q, K) the model's distributions of every item for that judge (-1: the
    population model), each computed once: every question and quantity of a release reads the same ones."""
    items = np.arange(X.shape[0])
    cache: dict[int, np.ndarray] = {}

    def proba(judge_index: int) -> np.ndarray:
        if judge_index not in cache:
            judge = np.full(len(items), judge_index, dtype=np.int64)
            cache[judge_index] = np.asarray(model.proba(X, items, judge), float)
        return cache[judge_index]

    return proba


def reviewer_predictions(
    model, ds, X: torch.Tensor, question: int, *, kind: str, adheres_at: float, proba=None
) -> ReviewerPredictions:
    """kind "rate": P(answer >= adheres_at) and 1[answer >= adheres_at]; kind "mean": the expected and the
    actual answer value. proba: a `judge_probabilities` to share between calls (default: a new one)."""
    proba = proba or judge_probabilities(model, X)
    values = ds.option_values()[question, : int(ds.n_options[question])]
    score = (values >= adheres_at).astype(float) if kind == "rate" else values.astype(float)

    def predicted(judge_index: int) -> np.ndarray:
        return proba(judge_index)[:, question, : len(values)] @ score

    rows = np.flatnonzero(ds.answers[:, question] >= 0)
    reviewer = np.array([model.judge_index(ds.judges[j]) for j in ds.label_judge[rows]], dtype=np.int64)
    columns = np.unique(np.append(reviewer, -1))  # -1, the population model, for a sample with no reviewer
    P = np.stack([predicted(int(j)) for j in columns], axis=1)
    panel = range(len(model.judges)) if model.judges and model.settings.personalised else [-1]
    calibrator = np.mean([predicted(j) for j in panel], axis=0)
    raw = ds.probs[:, question, : len(values)].astype(float) @ score
    return ReviewerPredictions(
        ds.items["conversation_id"].to_numpy(),
        P,
        calibrator,
        raw,
        ds.label_item[rows],
        np.searchsorted(columns, reviewer),
        score[ds.answers[rows, question]],
    )
