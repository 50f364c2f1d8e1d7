"""How well a model's training record recognises its own conversations gathered again, on the LLM-Rubric data
(no conversation text: the tolerant match of the judge distributions, calibration/model/provenance.py).

Every conversation of the data is recorded as trained on; then the same conversations are "gathered again"
with each distribution moved by `move` (mass moved from its likeliest option to its least likely, a uniform
amount in [move/2, move], so each still sums to 1), and we count how many are recognised by the exact hash
models recorded before (`fingerprints`) and by the tolerant match. Different conversations must never be
taken for each other: the smallest largest-probability difference between two different conversations says
how far the tolerance (2e-3) is from confusing them.

    python benchmarks/overlap_recognition.py [--anchors ../shared/anchors/llm_rubric_synth]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from types import SimpleNamespace

import numpy as np
from _anchors import add_anchors_argument, load_llm_rubric  # noqa: E402  (benchmarks/_anchors.py)
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.model.provenance import TOLERANCE, conversation_fingerprints, overlapping, training_record
from calibration.model.record import TrainingRecord

MOVES = (1e-7, 5e-7, 1e-5, 1e-4, 5e-4, 1e-3, 1.5e-3, 3e-3, 1e-2)


def regathered(ds, move: float, seed: int):
    """`ds` with each distribution's mass moved by up to `move` (from its likeliest to its least likely option)."""
    rng = np.random.default_rng(seed)
    probs = ds.probs.astype(np.float64).copy()
    n, q, _ = probs.shape
    masked = np.where(ds.probs > 0, probs, np.inf)
    hi, lo = probs.argmax(-1), masked.argmin(-1)
    amount = rng.uniform(move / 2, move, (n, q))
    rows, cols = np.indices((n, q))
    probs[rows, cols, hi] -= amount
    probs[rows, cols, lo] += amount
    return dataclasses.replace(ds, probs=probs.astype(np.float32))


def closest_pair(ds) -> float:
    """The smallest, over pairs of different conversations, of their largest probability difference."""
    ids = ds.items["conversation_id"].to_numpy()
    flat = ds.probs.reshape(len(ids), -1).astype(np.float64)
    order = np.argsort(ids, kind="stable")
    flat = flat[order]
    best = np.inf
    for i in range(len(flat) - 1):
        best = min(best, float(np.abs(flat[i + 1 :] - flat[i]).max(1).min()))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_anchors_argument(parser)
    add_results_argument(parser, "overlap_recognition")
    args = parser.parse_args()
    ds = load_llm_rubric(args.anchors)
    labelled = np.unique(ds.items["conversation_id"].to_numpy()[ds.label_item])
    record = training_record(ds, "")
    old_record = {"fingerprints": sorted(conversation_fingerprints(ds, labelled).values())}
    new = SimpleNamespace(record=SimpleNamespace(trained_on=[TrainingRecord.model_validate(record)]))
    old = SimpleNamespace(record=SimpleNamespace(trained_on=[TrainingRecord.model_validate(old_record)]))
    rows = []
    for move in MOVES:
        again = regathered(ds, move, seed=0)
        rows.append(
            {
                "move": move,
                "exact_hash_recognised": len(overlapping(old, again, None)[0]),
                "tolerant_recognised": len(overlapping(new, again, None)[0]),
            }
        )
    emit(
        args.results_name,
        {
            "data": "LLM-Rubric synthetic (imported: no conversation text)",
            "labelled_conversations": int(len(labelled)),
            "probabilities_per_conversation": int(ds.probs.shape[1] * ds.probs.shape[2]),
            "tolerance": TOLERANCE,
            "regathered": rows,
            "closest_different_conversations": round(closest_pair(ds), 4),
            "record_bytes_per_conversation": round(len(json.dumps(record["conversations"])) / len(labelled), 1),
        },
    )


if __name__ == "__main__":
    main()
