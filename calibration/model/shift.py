"""Does new data look like the data a calibrator was trained on? A label-free check from model.json alone.

At train time the model records a compact sample of its training data's judge features (`training_summary`):
per conversation, the mean over its turns of the judge's expected answer to every question, standardised by
the training turns' mean and spread (at most MAX_CONVERSATIONS conversations and MAX_VALUES numbers, 4
decimals: under 1 MB whatever the rubric), with each conversation's chatbot role as a short hash where conversations.jsonl gave one, and the
range each question's expected answer took over the training turns.

When the model scores new conversations, `check_shift` compares their conversation means with the stored
sample by a two-sample permutation test (Hotelling's T^2 with the pooled sample's covariance, the
conversation as the unit, PERMUTATIONS relabellings of which conversations are "new"). Why this statistic:
- the judge's expected answers are what the calibrator reads and what its bias follows (the shift
  benchmarks move exactly these), and T^2 is the best linear classifier's two-sample test on them, so it is
  a classifier two-sample test without a classifier to fit;
- conversations, not turns, are exchangeable under "same data as training", so permuting whole
  conversations gives an exact p-value at any sample size, without assuming normal features;
- it costs milliseconds (numpy over the permutations), so it can run on every call.
Per role (when the new conversations name their chatbot role): each role's conversations are compared with
the training conversations of the same role, or with all of them for a role never seen in training; the
p-values are Bonferroni-adjusted over the roles, so the check's false alarms stay <= ALPHA in all. The share
of new turns outside the training range of some question is reported beside it (CJE refuses a level
estimate outside the labelled range), as a description, not the trigger.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from typing import Any

import numpy as np

from rubric.errors import InputError
from rubric.notices import DataQualityWarning

__all__ = [
    "ON_SHIFT",
    "RoleTexts",
    "ShiftRefused",
    "ShiftWarning",
    "check_shift",
    "handle_shift",
    "role_key",
    "roles_of",
    "training_summary",
]

log = logging.getLogger(__name__)


class ShiftWarning(DataQualityWarning):
    """The conversations measured differ from the calibrator's training data: a data-quality notice, which
    the command line prints as "COMMAND: warning: ..." (rubric/notices.py) and Python shows as a warning."""


METHOD = "hotelling-permutation/1"
ALPHA = 0.01
PERMUTATIONS = 999
MAX_CONVERSATIONS = 2000
MAX_VALUES = 36_000  # stored numbers at most (about 15 bytes each in model.json), whatever the rubric's size
ON_SHIFT = ("warn", "refuse", "ignore")


class ShiftRefused(InputError):
    """on_shift=refuse and the check fired: a refusal, not a failed gate: the command line says "refused"
    and exits 2 (as for bad input), nothing written."""

    label = "refused"


def role_key(role: str | None) -> str | None:
    """A short, stable key of a chatbot role's text (model.json stores no role texts)."""
    if role is None or not str(role).strip():
        return None
    return hashlib.sha256(str(role).strip().encode()).hexdigest()[:12]


def expected_answers(ds) -> tuple[np.ndarray, np.ndarray]:
    """(N, Q) the judge's expected answer to every question and (N, Q) whether it answered."""
    return (ds.probs.astype(np.float64) * ds.option_values()[None]).sum(-1), ds.present.astype(bool)


def _standardised(ds, questions: list[str], mean, scale) -> np.ndarray:
    raw, present = expected_answers(ds)
    idx = [ds.rubric.ids.index(q) for q in questions]
    z = (raw[:, idx] - np.asarray(mean)) / np.asarray(scale)
    return np.where(present[:, idx], z, 0.0)  # an unanswered question sits at the training mean


def _by_conversation(keys: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(conversation ids, their (C, Q) mean features, index of each row's conversation)."""
    ids, inverse = np.unique(keys.astype(str), return_inverse=True)
    sums = np.zeros((len(ids), z.shape[1]))
    np.add.at(sums, inverse, z)
    return ids, sums / np.bincount(inverse)[:, None], inverse


def training_summary(ds, roles: dict[str, str] | None = None, seed: int = 0) -> dict:
    """What model.json keeps for the shift check (module docstring). roles: conversation id -> role text."""
    raw, present = expected_answers(ds)
    questions = [q for i, q in enumerate(ds.rubric.ids) if present[:, i].any()]
    idx = [ds.rubric.ids.index(q) for q in questions]
    mean = [float(raw[present[:, i], i].mean()) for i in idx]
    scale = [float(max(raw[present[:, i], i].std(), 1e-3)) for i in idx]
    z = _standardised(ds, questions, mean, scale)
    keys = ds.conversation_keys()  # qualified by directory where several were read as one
    ids, conv_means, _ = _by_conversation(keys, z)
    raw_id = dict(zip(keys.astype(str), ds.items["conversation_id"].astype(str), strict=True))
    keep = np.arange(len(ids))
    cap = min(MAX_CONVERSATIONS, max(200, MAX_VALUES // max(len(questions), 1)))  # model.json stays < 1 MB
    if len(ids) > cap:  # a fixed random subset: the test stays exact against it
        keep = np.sort(np.random.default_rng(seed).choice(len(ids), cap, replace=False))
    role_of = [role_key((roles or {}).get(raw_id[c])) for c in ids[keep]]
    return {
        "method": METHOD,
        "questions": questions,
        "mean": [round(m, 6) for m in mean],
        "scale": [round(s, 6) for s in scale],
        "low": [round(float(raw[present[:, i], i].min()), 4) for i in idx],
        "high": [round(float(raw[present[:, i], i].max()), 4) for i in idx],
        "n_conversations": int(len(ids)),
        "conversations": [[round(float(v), 4) for v in row] for row in conv_means[keep]],
        "roles": role_of if any(r is not None for r in role_of) else None,
    }


def _t2_permutation(train: np.ndarray, new: np.ndarray, permutations: int, rng) -> tuple[float, float]:
    """(p-value, Mahalanobis distance between the two means) of Hotelling's T^2 with the pooled sample's
    covariance (fixed under relabelling, so each permutation is one matrix product)."""
    if len(new) > MAX_CONVERSATIONS:  # a random subset keeps the test exact, its time and memory bounded
        new = new[rng.choice(len(new), MAX_CONVERSATIONS, replace=False)]
    pooled = np.vstack([train, new])
    n, n_new = len(pooled), len(new)
    centred = pooled - pooled.mean(0)
    cov = centred.T @ centred / max(n - 1, 1)
    cov += np.eye(cov.shape[0]) * (1e-6 + 1e-3 * np.trace(cov) / cov.shape[0])  # a constant feature stays finite
    whitened = centred @ np.linalg.cholesky(np.linalg.inv(cov))
    total = whitened.sum(0)

    def distance(new_sums: np.ndarray) -> np.ndarray:  # (B, Q) sums of the "new" rows -> (B,) ||mean gap||
        gap = new_sums / n_new - (total - new_sums) / (n - n_new)
        return np.sqrt((gap**2).sum(-1))

    observed = distance(whitened[len(train) :].sum(0, keepdims=True))[0]
    order = np.argsort(rng.random((permutations, n)), axis=1)[:, :n_new]  # one relabelling per row
    chosen = np.zeros((permutations, n))
    np.put_along_axis(chosen, order, 1.0, axis=1)
    null = distance(chosen @ whitened)
    p = (1 + np.sum(null >= observed - 1e-12)) / (permutations + 1)
    return float(p), float(observed)


def check_shift(
    summary: dict | None,
    ds,
    roles: dict[str, str] | None = None,
    *,
    alpha: float = ALPHA,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> dict:
    """The `shift` block: whether the judge features of `ds`'s items differ from the training sample that
    `summary` (model.json's `shift_reference`) holds, overall or per role. roles: conversation id -> role text."""
    if not summary:
        return {
            "checked": False,
            "fired": False,
            "note": "the model records no training sample (trained before the shift check existed): retrain "
            "it to check whether new conversations differ from its training data.",
        }
    questions = list(summary["questions"])
    missing = sorted(set(questions) - set(ds.rubric.ids))
    if missing or not summary["conversations"]:
        return {"checked": False, "fired": False, "note": f"the data lacks the questions {missing}."}
    z = _standardised(ds, questions, summary["mean"], summary["scale"])
    ids, new_means, inverse = _by_conversation(ds.items["conversation_id"].to_numpy(), z)
    raw, _ = expected_answers(ds)
    cols = [ds.rubric.ids.index(q) for q in questions]
    outside = (raw[:, cols] < np.asarray(summary["low"]) - 1e-9) | (raw[:, cols] > np.asarray(summary["high"]) + 1e-9)
    outside_turn = np.asarray(outside.any(axis=1))  # (turns,)
    train = np.asarray(summary["conversations"], float)
    train_roles = np.asarray(summary.get("roles") or [None] * len(train), dtype=object)
    keys = np.array([role_key((roles or {}).get(str(c))) for c in ids], dtype=object)
    by_role = roles is not None and any(k is not None for k in keys) and summary.get("roles") is not None
    groups = sorted({k for k in keys if k is not None}) if by_role else [None]
    rng = np.random.default_rng(seed)
    texts = {role_key(t): t for t in (roles or {}).values()}
    out_groups: list[dict[str, Any]] = []
    for key in groups:
        conv = np.ones(len(ids), bool) if key is None else keys == key
        seen = key is not None and bool((train_roles == key).any())
        reference = train[train_roles == key] if seen else train
        p, distance = _t2_permutation(reference, new_means[conv], permutations, rng)
        out_groups.append(
            {
                "role": None if key is None else _name(roles, texts.get(key, key)),
                "role_key": key,
                "role_seen_in_training": seen if key is not None else None,
                "n_conversations": int(conv.sum()),
                "n_training_conversations": int(len(reference)),
                "p_value": p,
                "p_adjusted": min(1.0, p * len(groups)),
                "distance": round(distance, 4),
                "outside_support": round(float(outside_turn[conv[inverse]].mean()), 4),
            }
        )
    for g in out_groups:
        g["fired"] = bool(g["p_adjusted"] < alpha)
    return {
        "checked": True,
        "fired": any(g["fired"] for g in out_groups),
        "method": METHOD,
        "alpha": alpha,
        "permutations": permutations,
        "by_role": by_role,
        "n_conversations": int(len(ids)),
        "outside_support": round(float(outside_turn.mean()), 4),
        "groups": out_groups,
        "note": "a permutation test (Hotelling's T^2 on the per-conversation mean of the judge's expected "
        "answers, standardised on the training turns) against the training sample in model.json"
        + ("; per role, Bonferroni-adjusted" if by_role else "")
        + "; outside_support: the share of turns where some question's expected answer lies outside "
        "its training range.",
    }


class RoleTexts(dict):
    """conversation id -> chatbot role text (what the check keys roles by), and `names`: role text -> the
    role's short name (rubric.conversations.role_name), the one the warning and the shift block show."""

    def __init__(self, texts: dict[str, str] | None = None, names: dict[str, str] | None = None):
        super().__init__(texts or {})
        self.names = dict(names or {})


def roles_of(paths) -> RoleTexts:
    """conversation id -> chatbot role, from the conversations.jsonl of each directory that has one."""
    from rubric.conversations import load_conversations, role_name

    roles = RoleTexts()
    for path in paths:
        file = path / "conversations.jsonl"
        if file.exists():
            for c in load_conversations(file):
                if c.chatbot_role:
                    roles[c.conversation_id] = c.chatbot_role
                    roles.names.setdefault(c.chatbot_role, role_name(c.chatbot_role, c.record))
    return roles


def _name(roles, text: str) -> str:
    """The role's short name: the one conversations.jsonl gave it, else rubric.conversations.role_name's."""
    from rubric.conversations import role_name

    return getattr(roles, "names", {}).get(text) or role_name(text)


def shift_line(shift: dict, labelled: bool = False, advice: str | None = None) -> str | None:
    """The one warning line when the check fired (None otherwise); advice: what to do, in place of the
    default (label some and run `estimate`, or, labelled, read the ppi column)."""
    if not shift.get("fired"):
        return None
    fired = [g for g in shift["groups"] if g["fired"]]
    what = "; ".join(
        (f"role {g['role']!r}{'' if g['role_seen_in_training'] else ' (not in training)'}: " if g["role"] else "")
        + f"p={g['p_adjusted']:.3g}, distance {g['distance']:.2f} sd, {100 * g['outside_support']:.0f}% of turns "
        f"outside the training range"
        for g in fired
    )
    n = min(40, sum(g["n_conversations"] for g in fired))
    advice = advice or (
        f"label {n} of them (`role-rubric suggest purpose=estimate`) and run `estimate`"
        if not labelled
        else "read the ppi column (corrected by the labels) and the transport audit, not the calibrator column"
    )
    return f"these conversations differ from the training data ({what}): the calibrated numbers may be biased; {advice}"


def handle_shift(
    summary: dict | None,
    ds,
    roles: dict[str, str] | None,
    on_shift: str,
    command: str,
    say=None,
    advice: str | None = None,
) -> dict:
    """Run the check as on_shift says: the shift block; warns (a ShiftWarning) when it fires, or `say`s its
    "COMMAND: warning: ..." line where a caller collects them; raises ShiftRefused (refuse); ignore: not run.
    advice: the warning's advice in place of shift_line's default."""
    if on_shift not in ON_SHIFT:
        raise InputError(
            f"on_shift={on_shift!r} is not one of {', '.join(ON_SHIFT)}.", fix="set on_shift to warn, refuse or ignore."
        )
    if on_shift == "ignore":
        return {"checked": False, "fired": False, "note": "on_shift=ignore: not checked."}
    shift = check_shift(summary, ds, roles)
    line = shift_line(shift, labelled=command == "estimate", advice=advice)
    if line and on_shift == "refuse":
        raise ShiftRefused(line + ".", fix="label a sample and run `estimate`, or pass on_shift=warn.")
    if line and say is None:
        warnings.warn(ShiftWarning(f"{line}.", command), stacklevel=3)
    elif line:
        say(f"{command}: warning: {line}.")
    elif not shift["checked"]:
        note = f"{command}: note: shift check skipped: {shift['note']}"
        (log.info if say is None else say)(note)
    return shift
