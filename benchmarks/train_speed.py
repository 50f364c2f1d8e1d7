"""Models trained per second: one at a time against batched (a leading model axis), side by side.

The paper's configuration: hidden 25 and 25, batch 64, 200 pretraining and 300 fine-tuning steps
(no early stopping, so every model runs all 500 steps), on the LLM-Rubric synthetic label rows.
Batched = 5 folds x 8 seeds = 40 models in one computation, timed twice: in one slice on one core
(workers=1) and split into slices trained by Python threads (workers=N, the default on N cores; see
calibration.train.fit_models). One at a time is one model per computation, one thread: a single tiny
model cannot use a second core. Prints JSON with medians over repeats, all measured side by side.

    python benchmarks/train_speed.py [--anchors ../shared/anchors/llm_rubric_synth] [--repeats 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from calibration.dataset import load_dataset
from calibration.importers import import_llm_rubric
from calibration.splits import group_folds
from calibration.train import Plan, Rows, Settings, fit_models

PAPER = Settings(hidden1=25, hidden2=25, batch_size=64, pretrain_steps=200, finetune_steps=300, lr=0.01,
                 finetune_lr=0.01, val_fraction=0.0, ensemble=1)


def _train(ds, X, rows, plan_rows, seeds, workers=1):
    plan = Plan(plan_rows, [r[:0] for r in plan_rows], seeds)
    return fit_models(X, rows, plan, PAPER, n_judges=len(ds.judges), n_options=ds.n_options.tolist(),
                      target=ds.target_index, threads=1, workers=workers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", default=str(Path(__file__).resolve().parents[2] / "shared/anchors/llm_rubric_synth"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single-models", type=int, default=4, help="models timed one at a time per repeat")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="slices for the sliced batched run")
    args = parser.parse_args()
    anchors = Path(args.anchors)
    with tempfile.TemporaryDirectory() as tmp:
        import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", tmp)
        ds = load_dataset(tmp)
    X = torch.from_numpy(ds.features(ds.feature_spec()))
    rows = Rows.of(ds)
    folds = group_folds(ds.groups, 5, 0)[ds.label_item]
    members = [(f, s) for f in range(5) for s in range(8)]
    train_rows = [np.flatnonzero(folds != f) for f, _ in members]
    seeds = [f * 100 + s for f, s in members]

    single, batched, sliced = [], [], []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for m in range(args.single_models):
            _train(ds, X, rows, [train_rows[m]], [seeds[m]])
        single.append(args.single_models / (time.perf_counter() - start))
        start = time.perf_counter()
        _train(ds, X, rows, train_rows, seeds)
        batched.append(len(members) / (time.perf_counter() - start))
        start = time.perf_counter()
        _train(ds, X, rows, train_rows, seeds, workers=args.workers)
        sliced.append(len(members) / (time.perf_counter() - start))
    result = {
        "config": {"hidden": [25, 25], "batch_size": 64, "steps": [200, 300], "label_rows": len(ds.label_item),
                   "train_rows_per_model": int(np.mean([len(r) for r in train_rows])), "batched_models": len(members),
                   "torch_threads": 1, "workers": args.workers, "cpus": os.cpu_count(), "repeats": args.repeats},
        "one_at_a_time_models_per_s": round(statistics.median(single), 3),
        "one_at_a_time_s_per_model": round(1 / statistics.median(single), 3),
        "batched_models_per_s": round(statistics.median(batched), 3),
        "speedup": round(statistics.median(batched) / statistics.median(single), 2),
        f"batched_{args.workers}_workers_models_per_s": round(statistics.median(sliced), 3),
        f"speedup_{args.workers}_workers": round(statistics.median(sliced) / statistics.median(single), 2),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
