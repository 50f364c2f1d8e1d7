"""Active labelling simulated on real labels: how many labels does each `suggest` strategy need?

Per seed, a fifth of the conversations is held out for testing; the rest is the pool, whose label rows
(one per (item, human judge): that judge's answers to the rubric) play the unlabelled candidates, their
answers held back until a strategy asks for them. Every strategy starts from the same random 10% of the
pool and adds 5% per round, chosen by the strategy from the model of the previous round, until the pool is
used up; after each round a fresh ensemble trains on the labels so far (the same training seed for every
strategy, so the curves differ only by the labels chosen) and is scored on the test conversations: RMSE
and NLL of the per-judge target prediction against the test judges' answers.

Label saving of a strategy at equal RMSE: 1 - f, where f is the smallest share of the pool at which its
mean RMSE over seeds reaches random's mean RMSE at 100% (linear between rounds); also per seed, and
`sustained`: from f on the mean curve never goes back above it. Random's own saving (its curve can dip
below its end point) is the noise reference: a strategy is better only by what it saves beyond it.

Smaller ensembles and fewer steps than conf/ keep it to minutes (see `--members`, `--steps`): the curves
compare strategies under one setting, not the default model's accuracy.

    python benchmarks/active_labelling.py [--dataset llm-rubric|role-adherence] [--seeds 0 1 2 3 4]
        [--quick] [--plot curves.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)
from scipy import stats

from calibration import (
    Settings,
    agreement,
    ensemble_proba,
    import_llm_rubric,
    load_dataset,
    mean_nll,
    train_ensemble,
)
from calibration.labelling.suggest import rank_pairs

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"
STRATEGIES = {
    "random": ("random", 0.0),
    "entropy": ("entropy", 0.0),
    "bald": ("bald", 0.0),
    "variance": ("variance", 0.0),
    "bald+diversity": ("bald", 0.5),
}


def load(name: str, tmp: Path, anchors: Path, role_dir: str | None):
    if name == "llm-rubric":
        import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", tmp)
        return load_dataset(tmp)
    if role_dir is None:
        raise SystemExit(
            "--role-data DIR is needed for role-adherence: gather it with "
            "`role-rubric gather conversations=data/role_adherence/conversations.jsonl "
            "rubric=role_adherence judge=embedding out=DIR` and copy labels.csv there."
        )
    return load_dataset(role_dir)


def with_rows(ds, rows: np.ndarray):
    """The dataset with only some label rows (judges kept, so indices stay valid)."""
    return dataclasses.replace(
        ds, label_item=ds.label_item[rows], label_judge=ds.label_judge[rows], answers=ds.answers[rows]
    )


def score(net, X, ds, plan, settings, test_rows: np.ndarray) -> dict:
    t = ds.target_index
    rows = test_rows[ds.answers[test_rows, t] >= 0]
    probs = ensemble_proba(
        net,
        X,
        ds.label_item[rows],
        ds.label_judge[rows],
        pool=settings.pool,
        recalibration=plan.recalibration,
    )[:, t, : ds.n_options[t]]
    values = ds.option_values()[t, : ds.n_options[t]]
    answer = ds.answers[rows, t]
    return {"rmse": agreement(probs @ values, values[answer])["rmse"], "nll": mean_nll(probs, answer)}


def simulate(ds, settings: Settings, seed: int, strategies: dict, start: float, step: float, log) -> dict:
    rng = np.random.default_rng(seed)
    groups = ds.groups
    conversations = rng.permutation(np.unique(groups))
    test_groups = conversations[: max(1, round(0.2 * len(conversations)))]
    in_test = np.isin(groups[ds.label_item], test_groups)
    test_rows, pool = np.flatnonzero(in_test), np.flatnonzero(~in_test)
    first = np.sort(rng.choice(pool, size=max(1, round(start * len(pool))), replace=False))
    batch = max(1, round(step * len(pool)))
    shared: dict[int, tuple] = {}  # the first and the last round are the same for every strategy
    curves = {}
    for name, (strategy, diversity) in strategies.items():
        labelled, curve = first, []
        while True:
            key = len(labelled) if len(labelled) in (len(first), len(pool)) else None
            if key is not None and key in shared:
                point, net, plan, X = shared[key]
            else:
                net, spec, plan = train_ensemble(with_rows(ds, labelled), settings, seed=seed)
                X = torch.from_numpy(ds.features(spec))  # the inputs as this model was trained on them
                point = {
                    "labels": len(labelled),
                    "share": len(labelled) / len(pool),
                    **score(net, X, ds, plan, settings, test_rows),
                }
                if key is not None:
                    shared[key] = point, net, plan, X
            curve.append(point)
            if len(labelled) == len(pool):
                break
            candidates = np.setdiff1d(pool, labelled)
            picked, _ = rank_pairs(
                net,
                X,
                ds,
                ds.label_item[candidates],
                ds.label_judge[candidates],
                batch,
                strategy=strategy,
                diversity=diversity,
                recalibration=plan.recalibration,
                pool=settings.pool,
                seed=seed * 1000 + len(labelled),
                labelled_items=np.unique(ds.label_item[labelled]),
            )
            labelled = np.sort(np.concatenate([labelled, candidates[picked]]))
        curves[name] = curve
        log(f"seed {seed} {name}: rmse {curve[0]['rmse']:.4f} -> {curve[-1]['rmse']:.4f} ({len(curve)} rounds)")
    return {
        "seed": seed,
        "pool_rows": len(pool),
        "test_rows": len(test_rows),
        "batch": batch,
        "curves": curves,
    }


def share_to_reach(shares: np.ndarray, rmse: np.ndarray, goal: float) -> float:
    """The smallest share at which the curve reaches `goal` (linear between rounds); NaN if never.

    >>> share_to_reach(np.array([0.1, 0.2, 0.3]), np.array([0.9, 0.8, 0.7]), 0.75)
    0.25
    """
    for k in range(len(rmse)):
        if rmse[k] <= goal:
            if k == 0:
                return float(shares[0])
            frac = (rmse[k - 1] - goal) / (rmse[k - 1] - rmse[k])
            return float(round(shares[k - 1] + frac * (shares[k] - shares[k - 1]), 6))
    return math.nan


def share_to_stay(shares: np.ndarray, rmse: np.ndarray, goal: float) -> float:
    """The smallest share from which the curve stays at or below `goal` to the end (linear between rounds);
    robust to one lucky round, unlike share_to_reach. NaN if it ends above.

    >>> share_to_stay(np.array([0.1, 0.2, 0.3, 0.4]), np.array([0.7, 0.9, 0.7, 0.7]), 0.8)
    0.25
    """
    above = np.flatnonzero(rmse > goal)
    if len(above) == 0:
        return float(shares[0])
    k = int(above[-1])
    if k == len(rmse) - 1:
        return math.nan
    return share_to_reach(shares[k:], rmse[k:], goal)


def _aligned(run: dict, name: str, key: str, n_rounds: int) -> list[float]:
    """The first n_rounds - 1 rounds and the last (the whole pool): pools differ by a few rows across
    seeds, so the number of 5% rounds can differ by one at the end."""
    curve = run["curves"][name]
    return [p[key] for p in curve[: n_rounds - 1]] + [curve[-1][key]]


def summarise(runs: list[dict], strategies) -> dict:
    out = {}
    n_rounds = min(len(r["curves"]["random"]) for r in runs)
    shares = np.mean([_aligned(r, "random", "share", n_rounds) for r in runs], axis=0)
    random_rmse = np.array([_aligned(r, "random", "rmse", n_rounds) for r in runs])
    goal = float(random_rmse[:, -1].mean())
    for name in strategies:
        rmse = np.array([_aligned(r, name, "rmse", n_rounds) for r in runs])
        nll = np.array([_aligned(r, name, "nll", n_rounds) for r in runs])
        half = (
            stats.t.ppf(0.975, len(runs) - 1) * rmse.std(0, ddof=1) / np.sqrt(len(runs))
            if len(runs) > 1
            else 0 * shares
        )
        reach = share_to_reach(shares, rmse.mean(0), goal)
        stay = share_to_stay(shares, rmse.mean(0), goal)
        per_seed = [share_to_reach(shares, rmse[s], float(random_rmse[s, -1])) for s in range(len(runs))]
        # Paired with random on the same seed (same test conversations, same first labels): the spread
        # between test splits cancels out, which the bands above keep.
        diff = rmse - random_rmse
        diff_half = (
            stats.t.ppf(0.975, len(runs) - 1) * diff.std(0, ddof=1) / np.sqrt(len(runs))
            if len(runs) > 1
            else 0 * shares
        )
        out[name] = {
            "share": [round(float(s), 3) for s in shares],
            "rmse_mean": [round(float(v), 4) for v in rmse.mean(0)],
            "rmse_ci95_half": [round(float(v), 4) for v in np.atleast_1d(half)],
            "nll_mean": [round(float(v), 4) for v in nll.mean(0)],
            "share_to_reach_random_full_rmse": reach,
            "label_saving": None if math.isnan(reach) else round(1 - reach, 3),
            "label_saving_sustained": None if math.isnan(stay) else round(1 - stay, 3),
            "label_saving_per_seed": [None if math.isnan(s) else round(1 - s, 3) for s in per_seed],
            "rmse_minus_random_mean": [round(float(v), 4) for v in diff.mean(0)],
            "rmse_minus_random_ci95_half": [round(float(v), 4) for v in np.atleast_1d(diff_half)],
        }
    return {"random_full_rmse": round(goal, 4), "strategies": out}


def plot(summary: dict, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for name, s in summary["strategies"].items():
        x, y, h = np.array(s["share"]), np.array(s["rmse_mean"]), np.array(s["rmse_ci95_half"])
        ax1.plot(x, y, label=name)
        ax1.fill_between(x, y - h, y + h, alpha=0.15)
        ax2.plot(x, s["nll_mean"], label=name)
    ax1.axhline(summary["random_full_rmse"], color="grey", ls=":", lw=1)
    ax1.set(xlabel="share of the pool labelled", ylabel="test RMSE (target)", title=title)
    ax2.set(xlabel="share of the pool labelled", ylabel="test NLL (target)")
    ax1.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("llm-rubric", "role-adherence"), default="llm-rubric")
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--role-data", help="a gathered role-adherence dataset dir (llm.csv + labels.csv)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--members", type=int, default=2, help="ensemble members per training (conf/: 16)")
    parser.add_argument("--steps", type=int, nargs=2, default=[100, 150], help="pretrain and fine-tune steps")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=list(STRATEGIES))
    parser.add_argument("--start", type=float, default=0.10)
    parser.add_argument("--step", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 seed, 2 members, rounds of 30%%")
    parser.add_argument("--plot", type=Path)
    parser.add_argument("--merge", type=Path, nargs="+", help="summarise the runs of earlier outputs (seeds run apart)")
    add_results_argument(parser, "active_labelling")
    args = parser.parse_args()
    if args.merge:
        outputs = [json.loads(path.read_text()) for path in args.merge]
        runs = sorted((r for out in outputs for r in out["runs"]), key=lambda r: r["seed"])
        summary = summarise(runs, list(runs[0]["curves"]))
        if args.plot:
            plot(summary, args.plot, f"{outputs[0]['dataset']}: {len(runs)} seeds")
        print(
            json.dumps(
                {
                    **{k: v for k, v in outputs[0].items() if k not in ("runs", "strategies", "seconds")},
                    "seeds": [r["seed"] for r in runs],
                    "pool_rows": [r["pool_rows"] for r in runs],
                    "test_rows": [r["test_rows"] for r in runs],
                    **summary,
                    "seconds": round(sum(out["seconds"] for out in outputs), 1),
                    "runs": runs,
                },
                indent=1,
            )
        )
        return
    if args.quick:
        args.seeds, args.members, args.steps, args.step = args.seeds[:1], 2, [40, 60], 0.30
        args.strategies = [s for s in args.strategies if s in ("random", "bald", "bald+diversity")]
    settings = Settings(ensemble=args.members, pretrain_steps=args.steps[0], finetune_steps=args.steps[1])
    strategies = {k: STRATEGIES[k] for k in ["random", *[s for s in args.strategies if s != "random"]]}
    log = lambda msg: print(msg, file=__import__("sys").stderr, flush=True)  # noqa: E731
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        ds = load(args.dataset, Path(tmp), args.anchors, args.role_data)
    runs = [simulate(ds, settings, seed, strategies, args.start, args.step, log) for seed in args.seeds]
    summary = summarise(runs, strategies)
    if args.plot:
        plot(summary, args.plot, f"{args.dataset}: {len(args.seeds)} seeds")
    emit(
        args.results_name,
        {
            "dataset": args.dataset,
            "label_rows": len(ds.label_item),
            "seeds": args.seeds,
            "settings": {
                "ensemble": args.members,
                "pretrain_steps": args.steps[0],
                "finetune_steps": args.steps[1],
                "start": args.start,
                "step": args.step,
                "test_conversations": 0.2,
            },
            "pool_rows": [r["pool_rows"] for r in runs],
            "test_rows": [r["test_rows"] for r in runs],
            **summary,
            "seconds": round(time.perf_counter() - start, 1),
            "runs": runs,
        },
        indent=1,
    )


if __name__ == "__main__":
    main()
