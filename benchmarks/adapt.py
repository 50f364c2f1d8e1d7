"""A few labels of the new release, trained on with the old ones: how much they help each calibrator on the
shift benchmarks of benchmarks/shift.py. Prints JSON.

For each shift benchmark (covariate_shift_down, covariate_shift_up, new_judges, new_chatbot; their held-out
side is "the new release") and each k, k labelled conversations of the new side join the training data and
the rest of the new side is the test set (for new_judges: those judges' labels of k conversations; for
new_chatbot: k conversations of the held-out role, each role in turn). The same draws (--draws, seeded) for
every method:
- none: the default network trained on the old side only (what a stale calibrator gives);
- network: the default network on the union (`train data=[OLD,NEW]`, the new side as the last directory:
  its recalibration gives the new rows half its weight, calibration/model/ensemble.py);
- network_one_directory: the same ensembles recalibrated as if the union were one directory (the default
  before; needs "network" among the methods);
- network_weighted: the default with the new rows weighted (`weights=[1,W]`, --weight);
- linear, ordinal: the simple personalised models on the union (`train model=linear|ordinal`).
Each metric is the mean over draws of the RMSE / Pearson of the expected answer on that draw's test rows.
Differences against `none` and against `linear` come with a 95% paired bootstrap interval (1,000 resamples
of each draw's test conversations, averaged over draws).

    python benchmarks/adapt.py [--anchors ../shared/anchors/llm_rubric_synth] [--k 0 10 20 40] [--draws 5]
        [--weight 3] [--only covariate_shift_down,new_chatbot] [--work DIR] [--ensemble 16]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)
from far_shift import separability  # noqa: E402
from shift import ROOT, dataset_for, folds_of, metrics  # noqa: E402

from calibration.evaluation.baselines import linear_oof
from calibration.evaluation.significance import bootstrap_counts
from calibration.model.ensemble import member_logproba, target_recalibration
from calibration.model.recalibrate import pool
from calibration.model.settings import Settings
from calibration.model.train import train_models

BENCHMARKS = (
    "covariate_shift_down",
    "covariate_shift_up",
    "new_judges",
    "new_chatbot",
    "far_shift",
    "new_system",
    "new_system_reviewers",
    "new_system_far_reviewers",
    "new_system_middle",
    "new_system_middle_reviewers",
)
METHODS = ("none", "network", "network_one_directory", "network_weighted", "linear", "ordinal")
DEFAULT = "network"  # what `role-rubric train data=[OLD,NEW]` trains


@dataclasses.dataclass
class Draw:
    """One draw for one held-out fold: the new side's label rows taken into training, and those tested."""

    fold: int
    adapt: np.ndarray
    test: np.ndarray


def draws_for(ds, fold_of_row: np.ndarray, folds: int, k: int, n_draws: int) -> list[list[Draw]]:
    """[draw][fold] the rows of k random new-side conversations (adapt) and the rest of the new side (test);
    draw d of every method and k uses the generator seeded (fold, d), so k = 10 is a subset of k = 20."""
    t = ds.target_index
    conv = ds.groups[ds.label_item]
    out = []
    for d in range(n_draws):
        per_fold = []
        for f in range(folds):
            new = np.flatnonzero((fold_of_row == f) & (ds.answers[:, t] >= 0))
            order = np.random.default_rng([f, d]).permutation(np.unique(conv[new]))
            taken = np.isin(conv[new], order[:k])
            per_fold.append(Draw(f, new[taken], new[~taken]))
        out.append(per_fold)
    return out


def as_releases(ds, new_row: np.ndarray):
    """`ds` as `train data=[OLD,NEW]` reads it: items in a `dataset` column, "old" then "new" (categorical, so
    "new" is the last directory whatever the items' order), the new side's items being those of the rows
    new_row (R,) bool, so the network's recalibration treats the new side as the last directory does. `ds`
    unchanged where an item has rows of both sides (new_judges: new judges on the old conversations, which
    directories could only hold as copies of the items)."""
    new_item = np.zeros(len(ds.items), bool)
    new_item[ds.label_item[new_row]] = True
    if np.intersect1d(ds.label_item[new_row], ds.label_item[~new_row]).size:
        return ds
    release = pd.Categorical(np.where(new_item, "new", "old"), categories=["old", "new"])
    return dataclasses.replace(ds, items=ds.items.assign(dataset=release))


def network_predictions(
    ds,
    settings: Settings,
    fold_of_row: np.ndarray,
    draws: list[list[Draw]],
    seed: int,
    weight: float | None,
    one_directory: list | None = None,
) -> list[dict[int, np.ndarray]]:
    """[draw] {fold: (test rows, K) target distributions} of the pooled, recalibrated ensemble trained on the
    fold's old side plus the draw's adapt rows. One batch per fold: every draw's members side by side.
    one_directory: a list to fill with the same ensembles' predictions recalibrated as one directory's (every
    row as weighted: the default before the new release's rows got half the recalibration), at no training."""
    t = ds.target_index
    out: list[dict[int, np.ndarray]] = [{} for _ in draws]
    if one_directory is not None:
        one_directory[:] = [{} for _ in draws]
    for f in range(len(draws[0])):
        plain = ds
        if weight is not None:  # this fold's new rows count `weight` times (only adapt rows are trained on)
            plain = dataclasses.replace(ds, label_weight=np.where(fold_of_row == f, weight, 1.0))
        fold_ds = as_releases(plain, fold_of_row == f)
        old = np.flatnonzero(fold_of_row != f)
        members = [(d, e) for d in range(len(draws)) for e in range(settings.ensemble)]
        rows = [np.sort(np.concatenate([old, draws[d][f].adapt])) for d, _ in members]
        seeds = [seed * 100_000 + d * 100 + e for d, e in members]
        trained = train_models(fold_ds, rows, seeds, settings)
        tests = [draws[d][f].test for d, _ in members]
        test_logp, val_logp = (
            [
                lp[:, t]
                for lp in member_logproba(
                    trained.net, trained.X, [ds.label_item[r] for r in rr], [ds.label_judge[r] for r in rr]
                )
            ]
            for rr in (tests, trained.plan.val_rows)
        )
        for d in range(len(draws)):
            mine = [m for m, (dd, _) in enumerate(members) if dd == d]
            probs = pool(np.stack([test_logp[m] for m in mine]), settings.pool)
            for target, data in ((out, fold_ds), (one_directory, plain)):
                if target is None:
                    continue
                recal = target_recalibration(
                    data, settings, [trained.plan.val_rows[m] for m in mine], [val_logp[m] for m in mine]
                )
                target[d][f] = probs if recal is None else recal.apply_target(probs)
    return out


def simple_predictions(
    ds, kind: str, fold_of_row: np.ndarray, draws: list[list[Draw]], seed: int
) -> list[dict[int, np.ndarray]]:
    """As network_predictions for the personalised linear (`kind` multinomial or ordinal) model, its L2 chosen
    by inner cv on its own training rows (the fold's old side and the draw's adapt rows: all but the tested)."""
    out: list[dict[int, np.ndarray]] = [{} for _ in draws]
    for d, per_fold in enumerate(draws):
        for draw in per_fold:
            tested = np.full(len(fold_of_row), -1)
            tested[draw.test] = 0
            out[d][draw.fold] = linear_oof(ds, tested, 1, seed, kind=kind)[draw.test]
    return out


def expected(ds, preds: list[dict[int, np.ndarray]], draws: list[list[Draw]]) -> list[np.ndarray]:
    """[draw] expected target answer of every test row (folds concatenated in order)."""
    t = ds.target_index
    values = ds.option_values()[t, : int(ds.n_options[t])]
    return [
        np.concatenate([preds[d][f][:, : len(values)] @ values for f in sorted(preds[d])]) for d in range(len(draws))
    ]


def run_benchmark(
    ds,
    name: str,
    ks: list[int],
    n_draws: int,
    settings: Settings,
    weight: float,
    seed: int,
    n_boot: int = 1000,
    methods=METHODS,
) -> dict:
    t = ds.target_index
    fold_of_row, folds = folds_of(ds, name)
    values = ds.option_values()[t, : int(ds.n_options[t])]
    start = time.perf_counter()
    result = {
        "folds": folds,
        "separability": separability(ds, fold_of_row, folds),
        "new_conversations": int(len(np.unique(ds.groups[ds.label_item[fold_of_row >= 0]]))),
        "by_k": {},
    }
    everything_new = draws_for(ds, fold_of_row, folds, 0, 1)[0]  # per fold, every new-side row as test rows
    stale = None
    for k in ks:
        draws = draws_for(ds, fold_of_row, folds, k, n_draws)
        if min(len(dr.test) for per in draws for dr in per) == 0:
            result["by_k"][str(k)] = None  # k takes every new conversation of some fold: nothing left to test
            continue
        if stale is None and "none" in methods:  # the old side alone: one training serves every k and draw
            stale = network_predictions(ds, settings, fold_of_row, [everything_new], seed, None)[0]
        preds = {}
        for method in methods:
            if method == "none":
                # each draw's test rows, picked out of the stale predictions of the whole new side (sorted rows)
                preds[method] = [
                    {f: stale[f][np.searchsorted(everything_new[f].test, dr.test)] for f, dr in enumerate(per)}
                    for per in draws
                ]
            elif method == "network_one_directory":
                continue  # filled by "network" below
            elif method.startswith("network"):
                w = weight if method == "network_weighted" and k > 0 else None
                plain = [] if method == "network" and "network_one_directory" in methods else None
                preds[method] = network_predictions(ds, settings, fold_of_row, draws, seed, w, plain)
                if plain is not None:
                    preds["network_one_directory"] = plain
            else:
                preds[method] = simple_predictions(
                    ds, "multinomial" if method == "linear" else "ordinal", fold_of_row, draws, seed
                )
        result["by_k"][str(k)] = _summarise(
            ds, draws, {m: expected(ds, p, draws) for m, p in preds.items()}, values, n_boot
        )
        print(f"adapt: {name} k={k} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["acceptance_k20"] = _acceptance(result["by_k"].get("20"))
    return result


def _summarise(ds, draws, exp: dict[str, list[np.ndarray]], values, n_boot: int) -> dict:
    t = ds.target_index
    tests = [np.concatenate([dr.test for dr in per]) for per in draws]
    y = [values[ds.answers[rows, t]] for rows in tests]
    one = [np.ones((1, len(rows))) for rows in tests]
    boots = [
        bootstrap_counts(ds.groups[ds.label_item[rows]], len(rows), rng=np.random.default_rng(d), n_boot=n_boot)
        for d, rows in enumerate(tests)
    ]
    out = {
        "test_rows_mean": round(float(np.mean([len(r) for r in tests])), 1),
        "methods": {},
        "vs_none": {},
        "vs_linear": {},
    }
    boot = {}
    for method, per_draw in exp.items():
        point = [metrics(e, yy, o) for e, yy, o in zip(per_draw, y, one, strict=True)]
        out["methods"][method] = {
            "rmse": round(float(np.mean([p[0][0] for p in point])), 4),
            "pearson": round(float(np.mean([p[1][0] for p in point])), 4),
        }
        reps = [metrics(e, yy, w) for e, yy, w in zip(per_draw, y, boots, strict=True)]
        boot[method] = (np.mean([r[0] for r in reps], 0), np.nanmean([r[1] for r in reps], 0))
    for ref, key in (("none", "vs_none"), ("linear", "vs_linear")):
        if ref in boot:
            out[key] = {m: _difference(out["methods"], boot, m, ref) for m in boot if m != ref}
    return out


def _difference(methods: dict, boot: dict, method: str, ref: str) -> dict:
    d_rmse, d_pearson = boot[method][0] - boot[ref][0], boot[method][1] - boot[ref][1]
    return {
        "rmse_diff": round(methods[method]["rmse"] - methods[ref]["rmse"], 4),
        "rmse_diff_95": [round(float(x), 4) for x in np.nanpercentile(d_rmse, [2.5, 97.5])],
        "pearson_diff": round(methods[method]["pearson"] - methods[ref]["pearson"], 4),
        "pearson_diff_95": [round(float(x), 4) for x in np.nanpercentile(d_pearson, [2.5, 97.5])],
    }


def _acceptance(at20: dict | None) -> dict | None:
    """The issue's bar at k = 20: the default on the union beats no adaptation (RMSE and Pearson) and is no
    worse than the linear model on the union by more than 0.005 RMSE."""
    if not at20 or not {"none", DEFAULT, "linear"} <= set(at20["methods"]):
        return None
    m = at20["methods"]
    return {
        "beats_none": bool(m[DEFAULT]["rmse"] < m["none"]["rmse"] and m[DEFAULT]["pearson"] > m["none"]["pearson"]),
        "within_0.005_of_linear": bool(m[DEFAULT]["rmse"] <= m["linear"]["rmse"] + 0.005),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=Path, default=ROOT.parent / "shared" / "anchors" / "llm_rubric_synth")
    parser.add_argument("--k", type=int, nargs="+", default=[0, 10, 20, 40])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--weight", type=float, default=3.0, help="network_weighted: the new rows' weight")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(BENCHMARKS))
    parser.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, among {','.join(METHODS)}")
    parser.add_argument("--work", type=Path, default=None, help="where imported/gathered data is cached")
    parser.add_argument("--ensemble", type=int, default=None, help="members (default: the configured 16)")
    parser.add_argument(
        "--settings", type=json.loads, default={}, help="Settings overrides of the network methods, as JSON"
    )
    add_results_argument(parser, "adapt")
    args = parser.parse_args()
    methods = args.methods.split(",")
    if unknown := sorted(set(methods) - set(METHODS)):
        parser.error(f"unknown method(s) {unknown}; choose among {list(METHODS)}")
    if "network_one_directory" in methods and "network" not in methods:
        parser.error("network_one_directory reuses the ensembles of network: add network to --methods")
    work = args.work or Path(tempfile.mkdtemp(prefix="role-rubric-adapt-"))
    settings = dataclasses.replace(Settings(), **args.settings).checked()
    if args.ensemble:
        settings = dataclasses.replace(settings, ensemble=args.ensemble)
    out = {"k": args.k, "draws": args.draws, "weight": args.weight, "settings": settings.to_dict(), "methods": methods}
    for name in args.only.split(","):
        ds = dataset_for(name, args.anchors, work)
        out[name] = run_benchmark(ds, name, args.k, args.draws, settings, args.weight, args.seed, methods=methods)
    emit(args.results_name, out, indent=1)


if __name__ == "__main__":
    main()
