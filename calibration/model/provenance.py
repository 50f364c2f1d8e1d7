"""Which conversations a model was trained on, so that labels it learned from are never used to judge it.

A release estimate's interval (calibration/release) and `decide`'s risk guarantee are valid only when the
calibrator never saw the labelled sample. `role-rubric train` records, in model.json, what each labelled
conversation it trained on is, by content rather than by id, so that two releases reusing ids like "c001" for
different dialogues never collide, and the same dialogue is recognised in another directory:
- its text (chatbot role, and each turn's user message and reply), hashed, where the directory has
  conversations.jsonl: recognised whatever the judge answered the second time;
- its judge distributions (turn ids and probabilities, to 1/65534), for a tolerant match where either side has
  no text (imported data): a conversation gathered again, its probabilities moved by up to `TOLERANCE`, is
  still recognised.
Models trained before this recorded an exact hash of the distributions (`fingerprints`); those records still
refuse what they recognise.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np

from rubric.errors import InputError

__all__ = [
    "conversation_fingerprints",
    "overlapping",
    "refuse_overlap",
    "shared_conversation",
    "training_record",
    "training_records",
]


def conversation_fingerprints(ds, conversations=None) -> dict[str, str]:
    """{conversation_id: exact hash of its distributions}: what models trained before content records kept
    (`fingerprints`), computed the same way to check their records."""
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


TOLERANCE = 2e-3
"""The largest difference of one probability between a conversation and a training conversation that still
counts as the same conversation gathered again (a re-run judge moves some by up to 1e-3)."""
_ABSENT = 65535  # the code of a probability the judge did not give (a question not asked of the turn)


def conversation_texts(folder: str | Path | None, conversations) -> dict[str, str]:
    """{conversation_id: hash of its chatbot role and turns} for the conversations named that the folder's
    conversations.jsonl holds (none without one)."""
    path = Path(folder) / "conversations.jsonl" if folder not in (None, "") else None
    if path is None or not path.is_file():
        return {}
    from rubric.conversations import load_conversations

    wanted = set(conversations)
    out = {}
    for conv in load_conversations(path):
        if conv.conversation_id in wanted:
            turns = [[t.user, t.assistant] for t in conv.turns]
            text = json.dumps([conv.chatbot_role, turns], ensure_ascii=False)
            out[conv.conversation_id] = "text:" + hashlib.sha256(text.encode()).hexdigest()[:24]
    return out


def distribution_signatures(ds, conversations) -> dict[str, str]:
    """{conversation_id: "SHAPE:CODES"} where SHAPE hashes the turn ids and the array's shape and CODES are the
    probabilities of its turns (turn order) as uint16 in base64: compared with `TOLERANCE`, not exactly."""
    keys, turns = ds.items["conversation_id"].to_numpy(), ds.items["turn"].to_numpy()
    scaled = np.rint(np.clip(ds.probs.astype(np.float64), 0, 1) * (_ABSENT - 1))
    codes = np.where(ds.present[..., None], scaled, _ABSENT).astype("<u2").reshape(len(keys), -1)
    order = np.lexsort((turns.astype(str), keys))
    rows: dict[str, list[int]] = {}
    wanted = set(conversations)
    for i in order:
        if keys[i] in wanted:
            rows.setdefault(keys[i], []).append(i)
    out = {}
    for cid, idx in rows.items():
        block = codes[idx]
        shape = hashlib.sha256(json.dumps([[str(t) for t in turns[idx]], list(block.shape)]).encode()).hexdigest()[:16]
        out[cid] = shape + ":" + base64.b64encode(block.tobytes()).decode()
    return out


def training_record(ds, data: str | Path) -> dict:
    """model.json's `trained_on` entry for one dataset directory: per labelled conversation its text hash (or
    null without conversations.jsonl) and its distributions' signature."""
    labelled = sorted(np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item]))
    texts = conversation_texts(data, labelled)
    signatures = distribution_signatures(ds, labelled)
    return {
        "data": str(data),
        "n_conversations": len(labelled),
        "conversations": sorted(
            ([texts.get(c), signatures[c]] for c in labelled), key=lambda entry: (entry[0] or "", entry[1])
        ),
    }


def training_records(data) -> list[dict]:
    """model.json's `trained_on` for a `TrainingData` (calibration/data/union.py): per directory its path,
    weight, files' SHA-256 and what its labelled conversations are (`training_record`)."""
    return [training_record(s.dataset, s.path) | {"weight": s.weight, "files": s.files} for s in data.sources]


def _by_shape(signatures: list[str]) -> dict[str, np.ndarray]:
    """Signatures decoded once: {shape: (n, D) codes} (int32, so differences do not wrap)."""
    groups: dict[str, list[np.ndarray]] = {}
    for signature in signatures:
        shape, codes = signature.split(":", 1)
        groups.setdefault(shape, []).append(np.frombuffer(base64.b64decode(codes), dtype="<u2"))
    return {shape: np.stack(rows).astype(np.int32) for shape, rows in groups.items()}


def _close(signature: str, theirs: dict[str, np.ndarray]) -> bool:
    """Whether a conversation's signature is within TOLERANCE of one of `theirs` with its turns and shape;
    a probability the judge did not give matches only one it did not give either."""
    shape, codes = signature.split(":", 1)
    if shape not in theirs:
        return False
    mine = np.frombuffer(base64.b64decode(codes), dtype="<u2").astype(np.int32)
    others = theirs[shape]
    diff = np.where(
        (mine == _ABSENT) | (others == _ABSENT), np.where(mine == others, 0, _ABSENT), np.abs(others - mine)
    )
    return bool((diff.max(1) <= TOLERANCE * (_ABSENT - 1)).any())


class _Known:
    """Labelled conversations to recognise, from their (text hash or None, distribution signature) entries: the
    same text where both sides have text, else distributions within TOLERANCE (`_close`)."""

    def __init__(self, entries: list) -> None:
        self.texts = {t for t, _ in entries if t}
        self.untexted = _by_shape([s for t, s in entries if not t])
        self.everything = _by_shape([s for _, s in entries])

    def holds(self, text: str | None, signature: str) -> bool:
        return bool(text and text in self.texts) or _close(signature, self.untexted if text else self.everything)


def overlapping(model, ds, folder: str | Path | None) -> tuple[list[str], int]:
    """(the labelled conversations of `ds` that `model` trained on, how many were checked; 0 when the model
    records none). A match: the same text where both sides have text, else distributions within TOLERANCE;
    for records of older models, the exact hash they kept."""
    records = model.record.trained_on  # model.json's, validated (calibration/model/record.py TrainingRecord)
    if not records:
        return [], 0
    labelled = sorted(np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item]))
    legacy = {fp for record in records for fp in record.fingerprints or []}
    entries = [e for record in records for e in record.conversations or []]
    known = _Known(entries)
    mine_text = conversation_texts(folder, labelled)
    mine_sig = distribution_signatures(ds, labelled) if entries else {}
    old = conversation_fingerprints(ds, labelled) if legacy else {}
    found = [
        cid
        for cid in labelled
        if old.get(cid) in legacy or (entries and known.holds(mine_text.get(cid), mine_sig[cid]))
    ]
    return found, len(labelled)


def refuse_overlap(model, ds, *, what: str, path: str | Path, folder: str | Path | None = None) -> int:
    """Raise when labelled conversations of `ds` (read from `folder`) are ones `model` trained on; returns how
    many were checked (0 when the model does not record its training data, which the caller should say)."""
    overlap, checked = overlapping(model, ds, folder)
    if overlap:
        shown = ", ".join(overlap[:3]) + (", ..." if len(overlap) > 3 else "")
        raise InputError(
            f"{len(overlap)} of the {checked} labelled conversations of {what} are ones the model was trained on "
            f"({shown}; recognised by their text or their judge distributions); an interval or risk bound from "
            "them would not be valid.",
            path=path,
            fix="label conversations the model never saw (`role-rubric suggest purpose=estimate`), or train the model "
            "without them.",
        )
    return checked


def shared_conversation(sources) -> tuple[str, Path, Path] | None:
    """The first labelled conversation of one training directory that another directory before it labels too
    (the same text where both have text, else distributions within TOLERANCE), as (its id, its directory,
    the earlier directory); None when the directories share none. `sources`: `TrainingData.sources`."""
    earlier: list[tuple[Path, _Known]] = []
    for source in sources:
        ds = source.dataset
        labelled = sorted(np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item]))
        texts, signatures = conversation_texts(source.path, labelled), distribution_signatures(ds, labelled)
        for path, known in earlier:
            for cid in labelled:
                if known.holds(texts.get(cid), signatures[cid]):
                    return cid, source.path, path
        earlier.append((source.path, _Known([(texts.get(c), signatures[c]) for c in labelled])))
    return None
