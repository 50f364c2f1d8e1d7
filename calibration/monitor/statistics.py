"""What `monitor` measures in a window, per role: the calibrated adherence rate and its sampling interval, the
shift check's p-value, and the reviewers' rate where the window has labels.

The calibrated rate is `estimate`'s calibrator column: the mean over the window's turns of the calibrated
P(answer >= adheres_at), averaged over the training reviewers (calibration/release/turns.py). Its sampling
interval treats the window's conversations as a draw of the chatbot's behaviour (the process): a ratio of
per-conversation totals, A_c (the calibrated predictions of a conversation's turns) over m_c (its turns), with
conversation-level variance (calibration/release/inference.py `classical_mean`, population=process). A window
keeps its totals' sums (`Totals`), so a reference period pooled over several windows needs no turn of them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from calibration.release.audit import transport_audit
from calibration.release.inference import ClusterSample, classical_mean, ppi_mean

if TYPE_CHECKING:
    from calibration.data.dataset import Dataset
    from calibration.model.files import LoadedModel
    from calibration.release.turns import ReviewerPredictions

__all__ = ["BAND_ALPHA", "MIN_SHIFT_CONVERSATIONS", "Scored", "Totals", "band", "ppi_block", "score_directory"]

BAND_ALPHA = 0.1
"""The band drawn around each window's rate: 90%, per window (the alarms use their own, far smaller levels)."""
BIAS_MARGIN = 0.05
"""The transport audit's margin on the rate, estimate's default bias_margin."""
MIN_SHIFT_CONVERSATIONS = 10
"""The shift check compares a role's conversations of the window with its training conversations; under 10 the
per-conversation means are too few to tell a shift from noise, so the check says so and raises no alarm."""
SCREEN = 0.05
"""The shift check's first pass (999 relabellings); only a p-value under this gets the many relabellings a
small alarm level needs, drawn afresh (so the screen costs no validity: an alarm needs both)."""


@dataclass(frozen=True)
class Totals:
    """Sums over a set of conversations of their totals: enough for the rate, its variance and pooling."""

    n: int
    A: float
    m: float
    AA: float
    Am: float
    mm: float

    @staticmethod
    def of(A: np.ndarray, m: np.ndarray) -> Totals:
        return Totals(len(A), float(A.sum()), float(m.sum()), float(A @ A), float(A @ m), float(m @ m))

    def __add__(self, other: Totals) -> Totals:
        return Totals(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values(), strict=True)))

    @property
    def rate(self) -> float:
        return self.A / self.m if self.m else math.nan

    @property
    def se(self) -> float:
        """The ratio's linearised standard error, conversations as the unit (process level)."""
        if self.n < 2 or not self.m:
            return math.inf
        r = self.rate
        ss = max(self.AA - 2 * r * self.Am + r * r * self.mm, 0.0)
        return math.sqrt(self.n / (self.n - 1) * ss) / self.m


def band(A: np.ndarray, m: np.ndarray) -> tuple[float, float] | None:
    """The rate's 1 - BAND_ALPHA sampling interval (a Wilson interval at the effective sample size, inside
    [0, 1]); None under 2 conversations."""
    if len(A) < 2:
        return None
    got = classical_mean(
        ClusterSample(A=A, m_all=m, Y=A, F=A, m_lab=m), alpha=BAND_ALPHA, population="process", bounds=(0.0, 1.0)
    )
    return got.low, got.high


@dataclass
class Scored:
    """One data directory's calibrated predictions of the target's rate, per conversation."""

    root: Path
    ds: Dataset
    preds: ReviewerPredictions
    """calibration/release/turns.py ReviewerPredictions (kind rate)."""
    A: dict[str, float]
    """conversation id -> sum of its turns' calibrated rate."""
    m: dict[str, int]
    """conversation id -> its turns."""
    roles: dict[str, str]
    """conversation id -> its chatbot role's text (the shift check keys roles by it)."""
    rates: dict[str, dict[str, float]]
    """question id -> conversation id -> the mean over its turns of the calibrated P(answer >= that question's
    adheres_at): what the sequential checks bet on, per question (the target's is A / m)."""
    target: str
    """The target question's id."""


def score_directory(
    root: Path, model: LoadedModel, *, adheres_at: float | None, allow_mismatch: bool, model_dir: Path | None = None
) -> Scored:
    """The calibrator's predictions for every turn of ROOT, checked as `estimate` checks a release (the judge
    is the model's; labelled conversations are none the model trained on). model_dir: the model's folder,
    named in an error."""
    from calibration import load_dataset
    from calibration.model.provenance import refuse_overlap
    from calibration.model.shift import roles_of
    from calibration.release.decide import default_adheres_at
    from calibration.release.turns import reviewer_predictions

    rubric = model.check_data(root, command="monitor", model_dir=model_dir, allow_judge_mismatch=allow_mismatch)
    ds = load_dataset(root, rubric=rubric, require_labels=False)
    if len(ds.label_item):
        refuse_overlap(model, ds, what="the window's labels", path=root / "labels.csv", folder=root)
    t = ds.target_index
    at = default_adheres_at(rubric.questions[t]) if adheres_at is None else float(adheres_at)
    from calibration.release.turns import judge_probabilities

    X = torch.from_numpy(ds.features(model.spec))
    proba = judge_probabilities(model, X)
    preds = reviewer_predictions(model, ds, X, t, kind="rate", adheres_at=at, proba=proba)
    ids, inverse = np.unique(preds.conversation.astype(str), return_inverse=True)
    A = np.bincount(inverse, weights=preds.calibrator)
    m = np.bincount(inverse)
    rates: dict[str, dict[str, float]] = {}
    for q, question in enumerate(rubric.questions):
        q_at = at if q == t else default_adheres_at(question)
        f = (
            preds.calibrator
            if q == t
            else reviewer_predictions(model, ds, X, q, kind="rate", adheres_at=q_at, proba=proba).calibrator
        )
        rates[question.id] = dict(zip(ids.tolist(), (np.bincount(inverse, weights=f) / m).tolist(), strict=True))
    return Scored(
        root,
        ds,
        preds,
        dict(zip(ids.tolist(), A.tolist(), strict=True)),
        dict(zip(ids.tolist(), m.tolist(), strict=True)),
        dict(roles_of([root])),
        rates,
        rubric.questions[t].id,
    )


def ppi_block(scored: Scored, conversations: list[str]) -> dict | None:
    """The reviewers' rate over these conversations of one directory where at least 2 are labelled: the
    humans-only and the prediction-powered (PPI++) intervals at 1 - BAND_ALPHA and the transport audit of the
    calibrator's bias (calibration/release); None where fewer are labelled."""
    preds = scored.preds
    labelled = preds.labelled_conversations(conversations=conversations)
    if len(labelled) < 2:
        return None
    sample = preds.sample(conversations=conversations)
    humans = classical_mean(sample, alpha=BAND_ALPHA, population="finite", bounds=(0.0, 1.0))
    ppi = ppi_mean(sample, alpha=BAND_ALPHA, population="finite", bounds=(0.0, 1.0))
    # estimate's transport audit on these conversations: is the calibrator's bias within +-BIAS_MARGIN here?
    audit = transport_audit(preds, BIAS_MARGIN, BAND_ALPHA, {"these": set(conversations)})["by_role"]["these"]
    return {
        "n_labelled_conversations": len(labelled),
        "humans": {"estimate": humans.estimate, "low": humans.low, "high": humans.high},
        "ppi": {"estimate": ppi.estimate, "low": ppi.low, "high": ppi.high, "lambda": ppi.lam},
        "transport_audit": audit,
    }


def shift_p(summary: dict | None, parts: list[tuple[Scored, list[str]]], level: float) -> dict:
    """The shift check (calibration/model/shift.py) of these conversations (one role's, possibly from several
    directories) against the model's training conversations of that role: {"p_value", "n_conversations"} or
    {"note"} where it cannot run. level: the alarm's level for it, which sets how many relabellings a small
    p-value gets (SCREEN)."""
    from calibration.model.shift import check_shift

    n = sum(len(c) for _, c in parts)
    if n < MIN_SHIFT_CONVERSATIONS:
        return {
            "p_value": None,
            "n_conversations": n,
            "note": f"{n} conversations: the shift check needs {MIN_SHIFT_CONVERSATIONS}; not checked, no alarm",
        }
    ds, roles = _subset(parts)
    first = check_shift(summary, ds, roles, seed=0)
    if not first["checked"]:
        return {"p_value": None, "n_conversations": n, "note": "shift check skipped: " + first["note"]}
    (group,) = first["groups"]
    p = group["p_value"]
    if p < SCREEN and level < SCREEN:
        # fresh relabellings, enough that p can go under `level`: p = (1 + exceedances) / (B + 1)
        chunks = math.ceil(3 / level / 999)
        exceed = sum(
            round(check_shift(summary, ds, roles, seed=s)["groups"][0]["p_value"] * 1000) - 1
            for s in range(1, chunks + 1)
        )
        p = (1 + exceed) / (999 * chunks + 1)
    return {
        "p_value": float(p),
        "n_conversations": n,
        "distance": group["distance"],
        "outside_support": group["outside_support"],
        "role_seen_in_training": group["role_seen_in_training"],
    }


def _subset(parts: list[tuple[Scored, list[str]]]) -> tuple[Dataset, dict[str, str] | None]:
    """A dataset of these conversations' turns only (ids qualified by directory, so they may repeat across
    directories) and its roles mapping, for check_shift."""
    import dataclasses

    import pandas as pd

    frames, probs, present = [], [], []
    roles: dict[str, str] = {}
    for i, (scored, convs) in enumerate(parts):
        ds = scored.ds
        keep = np.isin(ds.items["conversation_id"].astype(str).to_numpy(), list(convs))
        items = ds.items.loc[keep, ["conversation_id", "turn"]].copy()
        items["conversation_id"] = f"{i}/" + items["conversation_id"].astype(str)
        frames.append(items)
        probs.append(ds.probs[keep])
        present.append(ds.present[keep])
        roles.update({f"{i}/{c}": scored.roles[c] for c in convs if c in scored.roles})
    base = parts[0][0].ds
    empty = np.zeros(0, dtype=np.int64)
    ds = dataclasses.replace(
        base,
        items=pd.concat(frames, ignore_index=True),
        probs=np.concatenate(probs),
        present=np.concatenate(present),
        coverage=None,
        label_item=empty,
        label_judge=empty,
        answers=np.zeros((0, len(base.rubric.ids)), np.int64),
        label_weight=None,
    )
    return ds, (roles or None)
