"""Which conversations a model was trained on, so that labels it learned from are never used to judge it.

A release estimate's interval (calibration/release) and `decide`'s risk guarantee are valid only when the
calibrator never saw the labelled sample. `role-rubric train` records, in model.json, a fingerprint of
every conversation it trained on: a hash of the judge's distributions of its turns (turn ids and
probabilities), not of its id, so a conversation is recognised in another dataset directory under the same
content, and two releases that reuse ids like "c001" for different dialogues do not collide.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rubric.errors import InputError

__all__ = ["conversation_fingerprints", "refuse_overlap", "training_record", "training_records"]


def conversation_fingerprints(ds, conversations=None) -> dict[str, str]:
    """{conversation_id: fingerprint} over `ds`'s items (all, or the conversations named)."""
    keys = ds.items["conversation_id"].to_numpy()
    turns = ds.items["turn"].to_numpy()
    wanted = None if conversations is None else set(conversations)
    # float32 distributions rounded to 1e-6: the same llm.csv read twice gives the same bytes.
    probs = np.round(ds.probs.astype(np.float64), 6)
    order = np.lexsort((turns, keys))
    prints: dict[str, hashlib._Hash] = {}
    for i in order:
        cid = keys[i]
        if wanted is not None and cid not in wanted:
            continue
        h = prints.setdefault(cid, hashlib.sha256())
        h.update(str(turns[i]).encode() + b"\0" + probs[i].tobytes())
    return {cid: h.hexdigest()[:24] for cid, h in prints.items()}


def training_record(ds, data: str | Path) -> dict:
    """model.json's `trained_on` entry for one dataset directory: its labelled conversations' fingerprints."""
    labelled = np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item])
    prints = conversation_fingerprints(ds, labelled)
    return {"data": str(data), "n_conversations": len(prints), "fingerprints": sorted(prints.values())}


def training_records(data) -> list[dict]:
    """model.json's `trained_on` for a `TrainingData` (calibration/data/union.py): per directory its path,
    weight, files' SHA-256 and labelled conversations' fingerprints."""
    return [training_record(s.dataset, s.path) | {"weight": s.weight, "files": s.files} for s in data.sources]


def refuse_overlap(model, ds, *, what: str, path: str | Path) -> int:
    """Raise when labelled conversations of `ds` are ones `model` trained on; returns how many were checked
    (0 when the model does not record its training data, which the caller should say)."""
    records = model.meta.get("trained_on")
    if not records:
        return 0
    seen = {fp for record in records for fp in record.get("fingerprints", [])}
    labelled = np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item])
    mine = conversation_fingerprints(ds, labelled)
    overlap = sorted(cid for cid, fp in mine.items() if fp in seen)
    if overlap:
        shown = ", ".join(overlap[:3]) + (", ..." if len(overlap) > 3 else "")
        raise InputError(
            f"{len(overlap)} of the {len(mine)} labelled conversations of {what} are ones the model was trained on "
            f"({shown}); an interval or risk bound from them would not be valid.",
            path=path,
            fix="label conversations the model never saw (`role-rubric suggest purpose=estimate`), or train the model "
            "without them.",
        )
    return len(mine)
