"""Models trained per second: one at a time against batched (a leading model axis), side by side.

The paper's configuration: hidden 25 and 25, batch 64, 200 pretraining and 300 fine-tuning steps
(no early stopping, so every model runs all 500 steps), on the LLM-Rubric synthetic label rows.
Batched = 5 folds x 8 seeds = 40 models in one computation, timed twice: in one slice on one core
(workers=1) and split into slices trained by Python threads (workers=N, the default on N cores; see
calibration.model.train.fit_models). One at a time is one model per computation, one thread: a single tiny
model cannot use a second core. Prints JSON with medians over repeats, all measured side by side.

`per_model_step_ms` splits one batched step of the 40 models (one core) into forward + backward and the
Adam update, per model, beside the budget a 30x speed-up leaves per model and step (one model's step /
30 on one core, twice that with two cores at perfect scaling): it shows where the time goes.

    python benchmarks/train_speed.py [--anchors ../shared/anchors/llm_rubric_synth] [--repeats 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import torch
from _anchors import add_anchors_argument, load_llm_rubric  # noqa: E402  (benchmarks/_anchors.py)
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.data.splits import group_folds
from calibration.model.settings import Settings, torch_threads
from calibration.model.train import Plan, Rows, _adam, _batch_indices, _lazy_adam, fit_dataset, new_models

PAPER = Settings(
    hidden1=25,
    hidden2=25,
    batch_size=64,
    pretrain_steps=200,
    finetune_steps=300,
    lr=0.01,
    finetune_lr=0.01,
    val_fraction=0.0,
    ensemble=1,
)


def _train(ds, X, rows, plan_rows, seeds, workers=1):
    plan = Plan(plan_rows, [r[:0] for r in plan_rows], seeds)
    return fit_dataset(ds, X, plan, PAPER, rows=rows, threads=1, workers=workers)


def _batched_step_parts(ds, X, rows, train_rows, seeds, steps=40) -> tuple[float, float]:
    """Median ms of one batched training step's forward + backward and of its Adam update, one core."""
    net = new_models(PAPER, seeds, X, len(ds.judges), ds.n_options.tolist())
    optimiser, lazy = _adam(net, PAPER, PAPER.lr), _lazy_adam(net, PAPER, PAPER.lr)  # as training steps
    batches = torch.from_numpy(_batch_indices(train_rows, seeds, steps, PAPER.batch_size, 0))
    weights = torch.ones(len(ds.n_options))
    forward_backward, adam = [], []
    with torch_threads(1):
        for step in range(steps):
            b = batches[:, step]
            start = time.perf_counter()
            offsets = net.judge_offsets(rows.judge[b], leaves=True)
            loss = net.loss(X[rows.item[b]], rows.judge[b], rows.answers[b], weights, offsets=offsets)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            middle = time.perf_counter()
            optimiser.step()
            lazy.step(offsets)
            forward_backward.append(middle - start)
            adam.append(time.perf_counter() - middle)
    return statistics.median(forward_backward) * 1e3, statistics.median(adam) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_anchors_argument(parser)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--single-models", type=int, default=4, help="models timed one at a time per repeat")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="slices for the sliced batched run")
    add_results_argument(parser, "train_speed")
    args = parser.parse_args()
    ds = load_llm_rubric(args.anchors)
    X = torch.from_numpy(ds.features(ds.feature_spec()))
    rows = Rows.of(ds)
    folds = group_folds(ds.groups, 5, 0)[ds.label_item]
    members = [(f, s) for f in range(5) for s in range(8)]
    train_rows = [np.flatnonzero(folds != f) for f, _ in members]
    seeds = [f * 100 + s for f, s in members]

    single, batched, sliced, parts = [], [], [], []
    for _ in range(args.repeats):
        parts.append(_batched_step_parts(ds, X, rows, train_rows, seeds))
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
        "config": {
            "hidden": [25, 25],
            "batch_size": 64,
            "steps": [200, 300],
            "label_rows": len(ds.label_item),
            "train_rows_per_model": int(np.mean([len(r) for r in train_rows])),
            "batched_models": len(members),
            "torch_threads": 1,
            "workers": args.workers,
            "cpus": os.cpu_count(),
            "repeats": args.repeats,
        },
        "one_at_a_time_models_per_s": round(statistics.median(single), 3),
        "one_at_a_time_s_per_model": round(1 / statistics.median(single), 3),
        "batched_models_per_s": round(statistics.median(batched), 3),
        "speedup": round(statistics.median(batched) / statistics.median(single), 2),
        f"batched_{args.workers}_workers_models_per_s": round(statistics.median(sliced), 3),
        f"speedup_{args.workers}_workers": round(statistics.median(sliced) / statistics.median(single), 2),
        "per_model_step_ms": _per_model_step(parts, statistics.median(single), len(members)),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    emit(args.results_name, result, indent=2)


def _per_model_step(parts: list[tuple[float, float]], single_models_per_s: float, models: int) -> dict:
    one = 1e3 / single_models_per_s / (PAPER.pretrain_steps + PAPER.finetune_steps)
    return {
        "one_at_a_time": round(one, 4),
        "batched_forward_backward": round(statistics.median(p[0] for p in parts) / models, 4),
        "batched_adam": round(statistics.median(p[1] for p in parts) / models, 4),
        "budget_for_30x_one_core": round(one / 30, 4),
        "budget_for_30x_two_cores": round(2 * one / 30, 4),
    }


if __name__ == "__main__":
    main()
