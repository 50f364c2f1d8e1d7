"""How train and cv time and peak memory of the default calibrator grow with the data (JSON out).

The data: the shared LLM-Rubric synthetic set, grown. Items are resampled with replacement, each copy a
conversation of its own, its LLM distributions jittered (log-probabilities + N(0, 0.3^2) noise,
renormalised over the question's options) and its human label rows copied; each of the 24 human judges is
split into clones (judge j becomes one of the judges j, j + 24, j + 48, ... below the judge count, drawn
per row), so more judges share the same behaviour with fewer labels each. Rows are cut to the exact count.

Each point (label rows x judges) runs in its own process, so its peak memory (max RSS, with its largest
training child's: `peak_mib`) is its own:
`train` (train_ensemble with the default settings: features, the ordinal base by L-BFGS, 16 members with
early stopping, the recalibration) with the base's share timed on its own; `cv` (cross_validate, 5 folds
with baselines, as the `cv` command) where rows <= --cv-max-rows (cv costs ~5 trainings and more, so only
1k rows by default); and the median time of one training step of the 16 members (batch 128, one core).
Slopes are least-squares fits of log(time) on log(rows) at 24 judges and on
log(judges) at --judge-rows rows.

The floor: the matrix-multiply arithmetic of one training step (forward, and backward for inputs and
weights, shared weights and judge offsets, no padding) at the default LLM-Rubric shapes, over the rate
this machine measures for torch.bmm or numpy's matmul (the faster) on the same shapes (one thread), beside
our measured step.

    python benchmarks/scaling.py [--rows 1000 10000 100000] [--judges 24 200 1000] [--judge-rows 10000]
        [--override train.ensemble=8] [--cv-max-rows 1000] [--point-timeout 900]

Each point's JSON also goes to stderr as it finishes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _anchors import add_anchors_argument, load_llm_rubric  # noqa: E402  (benchmarks/_anchors.py)
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.data.dataset import Dataset
from calibration.evaluation.crossval import cross_validate
from calibration.model import train as train_module
from calibration.model.ensemble import train_ensemble
from calibration.model.settings import Settings, torch_threads
from calibration.model.train import (
    Rows,
    _adam,
    _at,
    _base_rows,
    _batch_indices,
    _lazy_adam,
    model_inputs,
    new_models,
    train_step,
)
from calibration.schema.build import command_config


def grown(ds: Dataset, rows: int, judges: int, *, seed: int = 0, jitter: float = 0.3) -> Dataset:
    """`ds` grown to `rows` label rows and `judges` human judges (>= the judges of ds), as described above."""
    n_base = len(ds.judges)
    if judges < n_base:
        raise ValueError(f"judges={judges} is fewer than the {n_base} judges of the data it grows.")
    rng = np.random.default_rng(seed)
    rows_of = [np.flatnonzero(ds.label_item == i) for i in range(len(ds.items))]
    labelled = np.array([i for i, r in enumerate(rows_of) if len(r)])
    per_item = np.mean([len(rows_of[i]) for i in labelled])
    picks = rng.choice(labelled, size=int(rows / per_item * 1.2) + 10)
    picks = picks[: np.searchsorted(np.cumsum([len(rows_of[i]) for i in picks]), rows) + 1]
    source_rows = np.concatenate([rows_of[i] for i in picks])[:rows]
    new_item = np.repeat(np.arange(len(picks)), [len(rows_of[i]) for i in picks])[:rows]
    n_items = int(new_item.max()) + 1
    picks = picks[:n_items]

    k = ds.probs.shape[-1]
    valid = np.arange(k)[None, :] < ds.n_options[:, None]  # (Q, K)
    logp = np.log(np.clip(ds.probs[picks], 1e-6, None)) + rng.normal(0.0, jitter, (n_items, *ds.probs.shape[1:]))
    logp = np.where(valid, logp, -np.inf)
    probs = np.exp(logp - logp.max(-1, keepdims=True))
    probs = probs / probs.sum(-1, keepdims=True) * ds.present[picks][..., None]

    base_judge = ds.label_judge[source_rows]
    clones = (judges - base_judge + n_base - 1) // n_base  # clones of judge j: j, j + n_base, ... < judges
    judge = base_judge + n_base * (rng.random(rows) * clones).astype(np.int64)
    items = pd.DataFrame(
        {"conversation_id": [f"s{n:06d}" for n in range(n_items)], "turn": ds.items["turn"].to_numpy()[picks]}
    )
    return dataclasses.replace(
        ds,
        items=items,
        probs=probs.astype(np.float32),
        present=ds.present[picks].copy(),
        coverage=None if ds.coverage is None else ds.coverage[picks].copy(),
        label_item=new_item,
        label_judge=judge,
        answers=ds.answers[source_rows].copy(),
        judges=[f"h{j:05d}" for j in range(judges)],
        report={},
    )


def step_ms(ds: Dataset, settings: Settings, *, steps: int = 30) -> float:
    """Median ms of one pretraining step (forward, backward, Adam) of settings.ensemble members, one core."""
    _, X, n_base = model_inputs(ds, settings)
    rows = Rows.of(ds)
    seeds = list(range(settings.ensemble))
    net = new_models(settings, seeds, X, len(ds.judges), ds.n_options.tolist(), n_base)
    optimiser, lazy = _adam(net, settings, settings.lr), _lazy_adam(net, settings, settings.lr)
    batches = torch.from_numpy(
        _batch_indices([np.arange(len(ds.label_item))] * len(seeds), seeds, steps + 5, settings.batch_size, 0)
    )
    weights = torch.ones(len(ds.n_options))
    models = torch.arange(len(seeds))
    times = []
    with torch_threads(1):
        base_rows = _base_rows(net, X, rows)  # as training does: the fixed base's log-probabilities, once a phase
        for step in range(steps + 5):  # the first 5 warm up
            start = time.perf_counter()
            b = batches[:, step]
            train_step(net, X, rows, b, weights, optimiser, lazy, base=_at(base_rows, models, b))
            times.append(time.perf_counter() - start)
    return statistics.median(times[5:]) * 1e3


def peak_mib() -> float:
    """This process's peak RSS plus the largest peak of its finished children: training slices run in
    forked children (calibration/model/forked.py) whose memory RUSAGE_SELF does not count. An upper bound
    of the memory used at once: pages the child shares with this process (copy on write) count twice."""
    self_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # Linux: KiB
    return (self_kib + resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def measure_point(anchors: Path, rows: int, judges: int, settings: Settings, cv: bool) -> dict:
    """One point, in this process: train, base, step times, cv; peak memory after train (and after cv)."""
    ds = grown(load_llm_rubric(anchors), rows, judges)
    out: dict = {"rows": rows, "judges": judges, "items": len(ds.items), "mib_before": round(peak_mib())}
    base_seconds = []
    fit_base = train_module.fit_base

    def timed_base(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fit_base(*args, **kwargs)
        finally:
            base_seconds.append(time.perf_counter() - start)

    train_module.fit_base = timed_base  # to time the base's share of train
    start = time.perf_counter()
    _, _, plan = train_ensemble(ds, settings, seed=0)
    out["train_s"] = round(time.perf_counter() - start, 2)
    out["train_base_s"] = round(sum(base_seconds), 2)
    out["train_steps"] = {name: h["steps"] for name, h in plan.history.items()}
    out["train_peak_mib"] = round(peak_mib())
    out["step_ms"] = round(step_ms(ds, settings), 2)
    if cv:
        base_seconds.clear()
        result = cross_validate(ds, settings, folds=5, seed=0, fold_seed=0)
        out["cv_s"] = round(result.seconds, 2)
        out["cv_base_s"] = round(sum(base_seconds), 2)
        out["cv_peak_mib"] = round(peak_mib())
        out["cv_q0_pearson"] = round(result.metrics["calibrated"]["pearson"], 4)
    train_module.fit_base = fit_base
    return out


def matmul_floor(ds: Dataset, settings: Settings, measured_step_ms: float) -> dict:
    """The matmul FLOPs of one training step at ds's shapes against the measured rate of torch.bmm or numpy's
    matmul (the faster) on them."""
    _, X, _ = model_inputs(ds, settings)
    m, b = settings.ensemble, settings.batch_size
    n_qk = len(ds.n_options) * int(ds.n_options.max())
    shapes = [
        (X.shape[1] + 1, settings.hidden1),
        (settings.hidden1 + 1, settings.hidden2),
        (settings.hidden2 + 1, n_qk),
    ]
    # Forward: shared weights and judge offsets, 2 FLOPs a multiply-add each; backward twice that (input
    # and weight gradients).
    flops = 3 * 2 * sum(2 * m * b * n_in * n_out for n_in, n_out in shapes)
    seconds = 0.0
    with torch_threads(1):
        for n_in, n_out in shapes:
            x, w = torch.rand(m, b, n_in), torch.rand(m, n_in, n_out)
            xn, wn = x.numpy(), w.numpy()
            # the faster of torch's bmm and numpy's matmul (which the personalised layers use); 2 (shared +
            # offsets) x 3 (forward, two gradients)
            seconds += 6 * min(
                _median_seconds(lambda x=x, w=w: torch.bmm(x, w)),
                _median_seconds(lambda xn=xn, wn=wn: np.matmul(xn, wn)),
            )
        big = torch.rand(1024, 1024)
        peak = 2 * 1024**3 / _median_seconds(lambda: big @ big, repeats=10)
    return {
        "shapes": {"models": m, "batch": b, "layers_in_out": shapes},
        "matmul_mflop_per_step": round(flops / 1e6, 2),
        "matmul_gflops_at_these_shapes": round(flops / seconds / 1e9, 2),
        "floor_ms_at_these_shapes": round(seconds * 1e3, 3),
        "peak_gflops_1024_matmul": round(peak / 1e9, 2),
        "floor_ms_at_peak_rate": round(flops / peak * 1e3, 3),
        "measured_step_ms": round(measured_step_ms, 2),
        "step_over_floor": round(measured_step_ms / (seconds * 1e3), 1),
        "step_over_peak_floor": round(measured_step_ms / (flops / peak * 1e3), 1),
    }


def _median_seconds(fn, repeats: int = 200) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) on log(x); None with fewer than two points."""
    if len(xs) < 2:
        return None
    return round(float(np.polyfit(np.log(xs), np.log(ys), 1)[0]), 3)


def _run_point(args, rows: int, judges: int) -> dict:
    command = [
        sys.executable,
        __file__,
        "--point",
        str(rows),
        str(judges),
        "--anchors",
        args.anchors,
        "--cv-max-rows",
        str(args.cv_max_rows),
        "--override",
        *args.override,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.point_timeout)
    except subprocess.TimeoutExpired:
        return {"rows": rows, "judges": judges, "error": f"did not finish in {args.point_timeout} s"}
    if done.returncode != 0:
        return {"rows": rows, "judges": judges, "error": done.stderr.strip().splitlines()[-1:]}
    point = json.loads(done.stdout)
    print(json.dumps(point), file=sys.stderr, flush=True)
    return point


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_anchors_argument(parser)
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--judges", type=int, nargs="+", default=[24, 200, 1000])
    parser.add_argument("--judge-rows", type=int, default=10000, help="label rows of the judges sweep")
    parser.add_argument(
        "--largest",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also the point (largest rows, most judges)",
    )
    parser.add_argument("--cv-max-rows", type=int, default=1000, help="cv only at points with at most these rows")
    parser.add_argument("--point-timeout", type=int, default=900)
    parser.add_argument("--override", nargs="*", default=[], help="Hydra overrides, e.g. train.ensemble=8")
    parser.add_argument("--point", type=int, nargs=2, metavar=("ROWS", "JUDGES"), help=argparse.SUPPRESS)
    add_results_argument(parser, "scaling")
    args = parser.parse_args()
    settings = command_config("train", ["data=unused", "out=unused", *args.override]).settings
    if args.point:
        rows, judges = args.point
        print(json.dumps(measure_point(Path(args.anchors), rows, judges, settings, rows <= args.cv_max_rows)))
        return

    base_judges = min(args.judges)
    wanted = [(r, base_judges) for r in args.rows] + [(args.judge_rows, j) for j in args.judges]
    if args.largest:
        wanted.append((max(args.rows), max(args.judges)))
    points = {}
    for key in sorted(set(wanted), key=lambda k: (k[0], -k[1])):  # the cheap points first, then 100k x 1,000
        points[key] = _run_point(args, *key)
    ok = {k: p for k, p in points.items() if "error" not in p}
    by_rows = [ok[(r, base_judges)] for r in args.rows if (r, base_judges) in ok]
    by_judges = [ok[(args.judge_rows, j)] for j in args.judges if (args.judge_rows, j) in ok]

    def slopes(points: list[dict], axis: str) -> dict:
        xs = [p[axis] for p in points]
        out = {key: slope(xs, [p[key] for p in points]) for key in ("train_s", "step_ms")}
        cv = [p for p in points if "cv_s" in p]
        out["cv_s"] = slope([p[axis] for p in cv], [p["cv_s"] for p in cv])
        out["train_s_without_base"] = slope(xs, [p["train_s"] - p["train_base_s"] for p in points])
        return out

    anchor = load_llm_rubric(args.anchors)
    result = {
        "data": "LLM-Rubric synthetic grown: resampled items, jittered distributions, cloned judges",
        "settings": settings.to_dict(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "points": list(points.values()),
        "slope_vs_rows": {"judges": base_judges, **slopes(by_rows, "rows")},
        "slope_vs_judges": {"rows": args.judge_rows, **slopes(by_judges, "judges")},
        "floor": matmul_floor(anchor, settings, step_ms(anchor, settings)),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    emit(args.results_name, result, indent=2)


if __name__ == "__main__":
    main()
