"""What keeps a model directory honest: model.json's own checksum (`model_sha256`, which
calibration/model/record.py writes and checks), the weights' checksum, and the weights' shapes read from the
safetensors header before anything is allocated (calibration/model/files.py loads with them; a changed or
mismatched file is one clear error, never a model that predicts something else)."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path

from rubric.errors import InputError
from rubric.files import file_sha256

# What model.json's checksum covers: everything that changes a prediction (not the training history).
_CHECKED = ("settings", "spec", "n_inputs", "n_models", "judges", "rubric", "recalibration", "judge")


def model_sha256(meta: dict) -> str:
    """The checksum of model.json's content (a dict as read from or written to the file)."""
    # Models written before the `model` field (networks all) keep their checksum; since, it covers the
    # model's name and a linear model's block too.
    keys = (*_CHECKED, "model", "linear") if "model" in meta else _CHECKED
    if "shift_reference" in meta:  # the shift check's training sample (calibration/model/shift.py), since it exists
        keys = (*keys, "shift_reference")
    covered = {k: meta.get(k) for k in keys}
    return hashlib.sha256(json.dumps(covered, sort_keys=True).encode()).hexdigest()


def refuse_a_deleted_checksum(meta: dict, path: Path) -> None:
    """A model.json without checksums is one from before them, unless it has fields written only since
    (`model`, `shift_reference`): then its integrity block was deleted, and an edit it hid (a reversed judge
    map) would give each reviewer another's predictions."""
    if {"model", "shift_reference"} & set(meta):
        raise InputError(
            "model.json has no integrity block, yet fields written only since checksums exist (model, "
            "shift_reference): it was edited after training.",
            path=path,
            fix="restore the model.json written by `role-rubric train`, or retrain the model.",
        )


def check_weights(weights_path: Path, weights_sha256: str | None, expected: dict[str, tuple[int, ...]]) -> None:
    """The weights file against model.json: its header's shapes first (cheap, before reading the tensors),
    then its checksum where model.json records one (`weights_sha256`, None in models from before it)."""
    _check_weight_shapes(weights_path, expected)
    if weights_sha256 is not None and weights_sha256 != file_sha256(weights_path):
        raise InputError(
            "the weights are not the ones this model.json was written with (SHA-256 differs).",
            path=weights_path,
            fix="keep weights.safetensors and model.json of one training together, or retrain the model.",
        )


def _check_weight_shapes(weights_path: Path, expected: dict[str, tuple[int, ...]]) -> None:
    """Compare the safetensors header with the shapes model.json implies, before allocating anything."""

    def bad(what: str) -> InputError:
        return InputError(
            f"weights do not match model.json ({what}).",
            path=weights_path,
            fix="retrain the model; do not mix files of different models.",
        )

    size = weights_path.stat().st_size
    with open(weights_path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise bad("the file is too short to be safetensors")
        (n,) = struct.unpack("<Q", head)
        if n > min(size - 8, 100_000_000):
            raise bad("its header size is larger than the file")
        try:
            header = json.loads(fh.read(n))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise bad("its header is not valid JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    header.pop("__metadata__", None)
    found = {k: tuple(v.get("shape", ())) for k, v in header.items() if isinstance(v, dict)}
    for name, shape in expected.items():
        if found.get(name) != shape:
            raise bad(f"{name} has shape {list(found.get(name, ())) or 'missing'}, model.json implies {list(shape)}")
    ends = [v.get("data_offsets", [0, 0])[1] for v in header.values() if isinstance(v, dict)]
    if 8 + n + max(ends, default=0) > size:
        raise bad("the file is shorter than its header says")


def check_finite(tensors: dict, path: Path, *, saving: bool) -> None:
    """Every weight a finite number: a model with NaN or inf weights predicts NaN (or silently nothing)
    wherever it is used, so it is never written, and never loaded (a file from before this check, or edited)."""
    import torch

    bad = sorted(name for name, t in tensors.items() if t.is_floating_point() and not bool(torch.isfinite(t).all()))
    if not bad:
        return
    if saving:
        raise InputError(
            f"training ended with non-finite weights ({', '.join(bad)}), so no model was written.",
            path=path,
            fix="check weights= and the data for extreme values, or lower train.lr.",
        )
    raise InputError(
        f"the model holds non-finite weights ({', '.join(bad)}): it cannot predict.",
        path=path,
        fix="retrain the model.",
    )
