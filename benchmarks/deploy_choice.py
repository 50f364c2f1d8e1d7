"""Does `cv data=[OLD,NEW]`'s deploy line pick the model that is better on the new release? Prints JSON.

For each shift benchmark of benchmarks/adapt.py, each k and each draw (a fold of the benchmark's new side,
k of its conversations labelled; for new_judges and new_chatbot the (draw, fold) pairs up to --units):
- truth: the network, linear and ordinal models trained on the union (and the network on the old side
  alone: no adaptation) (old side + the k conversations) and
  scored on the rest of the new side (the test rows), as adapt.py does;
- cv's choice: 5-fold cv of the three on the union with each side dealt over the folds on its own
  (calibration/evaluation/releases.py `item_folds`; new_judges, whose sides share conversations, takes plain
  folds by conversation), the RMSE of each on the new side's out-of-fold rows (the union's when k is below
  MIN_DEPLOY_CONVERSATIONS), the lowest chosen, the network on a tie.
`deploy_rate`: the share of units where cv's choice has the lowest test RMSE of the three;
`network_vs_linear_rate`: the share where cv on the new rows orders the network and the linear model as their
test RMSEs do (`_union`: cv on every row, the old deploy line); `test_rmse`: the
mean test RMSE of the chosen model ("the default chosen per release"), of no adaptation and of each model;
`regret`: the mean test RMSE of the choice minus the
best's; `vs_union_choice`: the same for the choice over the union's out-of-fold rows (the old deploy line).

    python benchmarks/deploy_choice.py [--k 10 20] [--draws 2] [--units 2] [--ensemble 8]
        [--only far_shift,covariate_shift_down] [--work DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _results import add_results_argument, command, emit  # noqa: E402  (benchmarks/_results.py)
from adapt import BENCHMARKS, as_releases, draws_for, network_predictions, simple_predictions  # noqa: E402
from shift import ROOT, dataset_for, folds_of, metrics  # noqa: E402

from calibration.data.splits import group_folds
from calibration.evaluation.baselines import linear_oof
from calibration.evaluation.out_of_fold import oof_network
from calibration.evaluation.releases import (
    MIN_DEPLOY_CONVERSATIONS,
    PREVIOUS,
    deploy_choice,
    item_folds,
    metrics_by_dataset,
)
from calibration.evaluation.significance import bootstrap_counts
from calibration.model.settings import Settings

MODELS = ("network", "linear", "ordinal")
CANDIDATES = (*MODELS, "none")
"""The shipped models and no adaptation (the network trained on the old side alone, which cv data=[OLD,NEW]
scores on the new rows as `previous`)."""


def cv_rmse(ds, union: np.ndarray, new: np.ndarray, settings: Settings, seed: int, folds: int = 5) -> dict:
    """{"new": model -> RMSE on the new rows, "union": model -> RMSE on every row}, out of fold, of cv on the
    label rows `union` (new: those of the new side); "arrays": the new rows' answers, conversations and each
    model's out-of-fold expected answer (what the decision rules of `rules` read)."""
    t = ds.target_index
    sub = ds.with_label_rows(union)
    is_new = np.isin(union, new)
    shared = bool(np.intersect1d(sub.label_item[is_new], sub.label_item[~is_new]).size)
    releases = as_releases(sub, is_new)  # as `cv data=[OLD,NEW]` reads them: the new side last
    # new judges on old conversations: a conversation cannot belong to one side, plain folds by conversation
    fold_of_item = group_folds(sub.groups, folds, seed) if shared else item_folds(releases, None, folds, seed)
    fold_of_row = fold_of_item[sub.label_item]
    probs = {
        "network": oof_network(releases, settings, fold_of_row, folds, seed),
        "linear": linear_oof(sub, fold_of_row, folds, seed, kind="multinomial"),
        "ordinal": linear_oof(sub, fold_of_row, folds, seed, kind="ordinal"),
    }
    values = ds.option_values()[t, : int(ds.n_options[t])]
    y = values[sub.answers[:, t]]
    out = {"new": {}, "union": {}, "arrays": {"y": y[is_new], "groups": sub.groups[sub.label_item[is_new]]}}
    for model, p in probs.items():
        e = p[:, : len(values)] @ values
        err = (e - y) ** 2
        out["new"][model] = float(np.sqrt(err[is_new].mean()))
        out["union"][model] = float(np.sqrt(err.mean()))
        out["arrays"][model] = e[is_new]
    return out


def run_benchmark(ds, name: str, ks: list[int], n_draws: int, max_units: int, settings: Settings, seed: int) -> dict:
    """{"by_k": {k: [unit]}}: each unit's test and out-of-fold arrays (`_unit_arrays`), before any rule."""
    t = ds.target_index
    values = ds.option_values()[t, : int(ds.n_options[t])]
    fold_of_row, folds = folds_of(ds, name)
    start = time.perf_counter()
    result = {"by_k": {}}
    for k in ks:
        units = [(d, f) for d in range(n_draws) for f in range(folds)][:max_units]
        # only the draws and folds the units take (a fold's position is its index: folds 0..n-1 are kept)
        n_d, n_f = max(d for d, _ in units) + 1, max(f for _, f in units) + 1
        draws = [per[:n_f] for per in draws_for(ds, fold_of_row, folds, k, n_d)]
        # the truth: each model trained on the whole union, scored on the test rows (adapt.py's predictions)
        preds = {
            "network": network_predictions(ds, settings, fold_of_row, draws, seed, None),
            "linear": simple_predictions(ds, "multinomial", fold_of_row, draws, seed),
            "ordinal": simple_predictions(ds, "ordinal", fold_of_row, draws, seed),
        }
        everything_new = [per[:n_f] for per in draws_for(ds, fold_of_row, folds, 0, 1)][0]
        stale = network_predictions(ds, settings, fold_of_row, [everything_new], seed, None)[0]  # old side only
        rows = []
        for d, f in units:
            draw = draws[d][f]
            test = {m: preds[m][d][f][:, : len(values)] @ values for m in MODELS}
            test["none"] = stale[f][np.searchsorted(everything_new[f].test, draw.test)][:, : len(values)] @ values
            test["y"] = values[ds.answers[draw.test, t]]
            test["groups"] = ds.groups[ds.label_item[draw.test]]
            union = np.sort(np.concatenate([np.flatnonzero(fold_of_row != f), draw.adapt]))
            cv = cv_rmse(ds, union, draw.adapt, settings, seed)
            # no adaptation on the k new conversations: the old side's model never saw them, an honest test
            at_adapt = np.searchsorted(everything_new[f].test, np.sort(draw.adapt))
            cv["arrays"]["none"] = stale[f][at_adapt][:, : len(values)] @ values
            rows.append({"draw": d, "fold": f, "test": test, "cv_new": cv["arrays"], "cv_union_rmse": cv["union"]})
            print(
                f"deploy_choice: {name} k={k} unit {d},{f} ({time.perf_counter() - start:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        result["by_k"][str(k)] = rows
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def _rmse(e: np.ndarray, y: np.ndarray) -> float:
    return float(np.sqrt(np.mean((e - y) ** 2)))


def significantly_lower(arrays: dict, model: str, reference: str, n_boot: int, seed: int) -> bool:
    """Whether `model`'s out-of-fold RMSE on the new rows is below `reference`'s with the 95% paired bootstrap
    interval of the difference (resampling whole conversations) wholly below 0."""
    w = bootstrap_counts(arrays["groups"], len(arrays["y"]), rng=np.random.default_rng(seed), n_boot=n_boot)
    diff = metrics(arrays[model], arrays["y"], w)[0] - metrics(arrays[reference], arrays["y"], w)[0]
    return bool(np.nanpercentile(diff, 97.5) < 0)


def deployed(unit: dict) -> str:
    """What `cv data=[OLD,NEW]`'s deploy line ships for one unit (calibration/evaluation/releases.py
    `deploy_choice`, run on the unit's out-of-fold rows of the new side and the old side's model's predictions
    there), as a model name of this benchmark (the network trained without the new rows: "none")."""
    arrays = unit["cv_new"]
    rows = {
        "conversation_id": arrays["groups"].astype(str),
        "turn": np.arange(len(arrays["y"])).astype(str),  # the rows' key (pairing is by key, calibration/evaluation)
        "judge_id": "",
        "answer": arrays["y"],
        "dataset": "new",
    }
    frame = pd.concat(
        [pd.DataFrame(rows | {"method": METHOD_OF[m], "expected": arrays[m]}) for m in MODELS], ignore_index=True
    )
    previous = pd.DataFrame(rows | {"method": PREVIOUS, "expected": arrays["none"]})
    by = metrics_by_dataset(frame, ["old", "new"], previous=previous)
    union = {METHOD_OF[m]: {"rmse": v} for m, v in unit["cv_union_rmse"].items()}
    pick = deploy_choice(union, by, ["old", "new"])
    return {v: k for k, v in METHOD_OF.items()}[pick["method"]]


def choices(unit: dict, k: int, n_boot: int = 2000, seed: int = 0) -> dict[str, str]:
    """rule -> the model it deploys for one unit. Below MIN_DEPLOY_CONVERSATIONS new conversations every rule
    that reads the new rows reads the union's instead (as cv does).
    - lowest_new_cv: the lowest out-of-fold RMSE on the new rows (cv's deploy line);
    - network_unless_significant: the network, unless another model's out-of-fold RMSE on the new rows is
      lower with its paired 95% interval below 0 (then the lowest such model);
    - lowest_union_cv: the lowest out-of-fold RMSE over every row (the old deploy line);
    - always_network: the default, whatever cv says;
    - blend: not a choice but the mean of the network's and the linear model's expected answers, which
      `train` does not ship (scored as a what-if, against the best of the three shipped models);
    - deployed: what cv's deploy line ships now (`deployed`): the network, unless it loses to the old side's
      model on the new rows out of fold in two paired resamples of three; then the linear model, unless that
      is significantly worse than the old side's model there; then no adaptation."""
    arrays = unit["cv_new"]
    new_rmse = {m: _rmse(arrays[m], arrays["y"]) for m in MODELS}
    union = min(MODELS, key=unit["cv_union_rmse"].get)
    if k < MIN_DEPLOY_CONVERSATIONS:
        return {
            "lowest_new_cv": union,
            "network_unless_significant": union,
            "lowest_union_cv": union,
            "always_network": "network",
            "blend": "blend",
            "deployed": union,
        }
    better = [m for m in MODELS[1:] if significantly_lower(arrays, m, "network", n_boot, seed)]
    return {
        "lowest_new_cv": min(MODELS, key=new_rmse.get),
        "network_unless_significant": min(better, key=new_rmse.get) if better else "network",
        "lowest_union_cv": union,
        "always_network": "network",
        "blend": "blend",
        "deployed": deployed(unit) if "none" in arrays else "network",
    }


RULES = ("deployed", "lowest_new_cv", "network_unless_significant", "lowest_union_cv", "always_network", "blend")
METHOD_OF = {"network": "calibrated", "linear": "linear", "ordinal": "ordinal", "none": PREVIOUS}
TOLERANCES = (0.005, 0.01)
"""A pick counts as right within tolerance when its test RMSE is at most the best shipped model's plus this:
0.005 is the issue's own yardstick for "as good as the linear model"; 0.01 about the models' typical gap."""


def summarise(rows: list[dict], k: int) -> dict:
    """Per unit its test RMSEs and each rule's pick; per rule the strict rate (the pick has the lowest test
    RMSE of the three shipped models), the rate within each tolerance and the mean regret (test RMSE of the
    pick minus the best's)."""
    empty = [r for r in rows if not len(r["test"]["y"])]  # k took every new conversation: nothing to test
    rows = [r for r in rows if len(r["test"]["y"])]
    if not rows:
        return {"n_units": 0, "units_without_test_rows": len(empty)}
    units, picks = [], []
    for r in rows:
        test = {m: _rmse(r["test"][m], r["test"]["y"]) for m in (*MODELS, "none")}
        test["blend"] = _rmse((r["test"]["network"] + r["test"]["linear"]) / 2, r["test"]["y"])
        picked = choices(r, k)
        cv_new = {m: round(_rmse(r["cv_new"][m], r["cv_new"]["y"]), 4) for m in CANDIDATES if m in r["cv_new"]}
        units.append(
            {
                "draw": r["draw"],
                "fold": r["fold"],
                "test_conversations": int(len(np.unique(r["test"]["groups"]))),
                "test_rmse": {m: round(v, 4) for m, v in test.items()},
                "cv_new_rmse": cv_new,
                "cv_union_rmse": {m: round(v, 4) for m, v in r["cv_union_rmse"].items()},
                "chosen": picked,
                "best": min(MODELS, key=test.get),
            }
        )
        picks.append((test, picked))
    out = {"n_units": len(units), "units_without_test_rows": len(empty), "rules": {}}
    for rule in RULES:
        regret = np.array([t[p[rule]] - min(t[m] for m in MODELS) for t, p in picks])
        with_none = np.array([t[p[rule]] - min(t[m] for m in CANDIDATES) for t, p in picks])
        out["rules"][rule] = {
            "strict_rate": round(float(np.mean(regret <= 0)), 3),
            **{f"rate_within_{tol}": round(float(np.mean(regret <= tol + 1e-12)), 3) for tol in TOLERANCES},
            "regret": round(float(regret.mean()), 4),
            "regret_with_none": round(float(with_none.mean()), 4),
            "worst_regret_with_none": round(float(with_none.max()), 4),
            "test_rmse": round(float(np.mean([t[p[rule]] for t, p in picks])), 4),
            "vs_none": _versus_none(rows, [p[rule] for _, p in picks]),
            "picks": {
                m: sum(p[rule] == m for _, p in picks)
                for m in (*CANDIDATES, "blend")
                if any(p[rule] == m for _, p in picks)
            },
        }
    out["test_rmse"] = {m: round(float(np.mean([t[m] for t, _ in picks])), 4) for m in (*MODELS, "none", "blend")}
    pair = [
        (u["cv_new_rmse"]["network"] <= u["cv_new_rmse"]["linear"])
        == (u["test_rmse"]["network"] <= u["test_rmse"]["linear"])
        for u in units
    ]
    out["network_vs_linear_rate"] = round(float(np.mean(pair)), 3)
    out["units"] = units
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=Path, default=ROOT.parent / "shared" / "anchors" / "llm_rubric_synth")
    parser.add_argument("--k", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--units", type=int, default=2, help="at most this many (draw, fold) pairs per benchmark")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default=",".join(BENCHMARKS))
    parser.add_argument("--work", type=Path, default=None, help="where imported/gathered data is cached")
    parser.add_argument("--ensemble", type=int, default=8, help="network members (the configured default is 16)")
    parser.add_argument(
        "--arrays",
        type=Path,
        nargs="+",
        default=None,
        help="also pickle every unit's arrays here after each benchmark (with --from-arrays: read "
        "them from these files instead of training, to summarise again; runs of other benchmarks with the "
        "same --k, --draws, --units and --ensemble merge)",
    )
    parser.add_argument("--from-arrays", action="store_true")
    add_results_argument(parser, "deploy_choice")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="role-rubric-deploy-"))
    settings = dataclasses.replace(Settings(), ensemble=args.ensemble)
    if args.from_arrays:
        raw = _merged([pickle.loads(path.read_bytes()) for path in args.arrays or parser.error("--arrays FILE")])
    elif args.arrays and len(args.arrays) > 1:
        parser.error("--arrays takes one file when training (several only with --from-arrays)")
    else:
        args.arrays = args.arrays[0] if args.arrays else None
        raw = {"k": args.k, "draws": args.draws, "units": args.units, "ensemble": args.ensemble, "command": command()}
        for name in args.only.split(","):
            raw[name] = run_benchmark(
                dataset_for(name, args.anchors, work), name, args.k, args.draws, args.units, settings, args.seed
            )
            if args.arrays:
                args.arrays.write_bytes(pickle.dumps(raw))
    out = {key: raw[key] for key in ("k", "draws", "units", "ensemble")}
    out["trained_by"] = raw.get("command")  # with --from-arrays: the run that trained the models
    out |= {"min_deploy_conversations": MIN_DEPLOY_CONVERSATIONS, "tolerances": list(TOLERANCES)}
    for name in (n for n in BENCHMARKS if n in raw):
        out[name] = {
            "seconds": raw[name]["seconds"],
            "by_k": {k: summarise(rows, int(k)) for k, rows in raw[name]["by_k"].items()},
        }
    out["all_benchmarks"] = {k: _pooled(out, k) for k in map(str, raw["k"])}
    emit(args.results_name, out, indent=1)


def _merged(runs: list[dict]) -> dict:
    """The benchmarks of several --arrays runs as one (the later run's where two hold the same benchmark);
    "command": every run's command, the run that trained each benchmark's models."""
    keys = ("k", "draws", "units", "ensemble")
    if any(tuple(r[k] for k in keys) != tuple(runs[0][k] for k in keys) for r in runs):
        raise SystemExit(f"deploy_choice: the --arrays runs differ in {keys}: summarise them apart")
    raw = {k: runs[0][k] for k in keys}
    for run in runs:
        raw |= {name: value for name, value in run.items() if name in BENCHMARKS}
    raw["command"] = [r.get("command") for r in runs] if len(runs) > 1 else runs[0].get("command")
    return raw


def _versus_none(rows: list[dict], picks: list[str], n_boot: int = 1000) -> dict:
    """The picked models' test RMSE minus no adaptation's, the mean over units, with its 95% paired bootstrap
    interval (each unit's test conversations resampled, the same resamples for both, averaged over units)."""
    diffs, points = [], []
    for u, (r, pick) in enumerate(zip(rows, picks, strict=True)):
        test = r["test"]
        e = (test["network"] + test["linear"]) / 2 if pick == "blend" else test[pick]
        w = bootstrap_counts(test["groups"], len(test["y"]), rng=np.random.default_rng(u), n_boot=n_boot)
        diffs.append(metrics(e, test["y"], w)[0] - metrics(test["none"], test["y"], w)[0])
        points.append(_rmse(e, test["y"]) - _rmse(test["none"], test["y"]))
    point = float(np.mean(points))
    low, high = np.percentile(np.mean(diffs, 0), [2.5, 97.5])
    return {"rmse_diff": round(point, 4), "rmse_diff_95": [round(float(low), 4), round(float(high), 4)]}


def _pooled(out: dict, k: str) -> dict:
    """Every benchmark's units at k together: each rule's rates over all of them."""
    units = [u for n in BENCHMARKS if n in out and k in out[n]["by_k"] for u in out[n]["by_k"][k].get("units", [])]
    result = {"n_units": len(units)}
    for rule in RULES:
        regret = np.array([u["test_rmse"][u["chosen"][rule]] - min(u["test_rmse"][m] for m in MODELS) for u in units])
        with_none = np.array(
            [u["test_rmse"][u["chosen"][rule]] - min(u["test_rmse"][m] for m in CANDIDATES) for u in units]
        )
        result[rule] = {
            "strict_rate": round(float(np.mean(regret <= 0)), 3),
            **{f"rate_within_{tol}": round(float(np.mean(regret <= tol + 1e-12)), 3) for tol in TOLERANCES},
            "regret": round(float(regret.mean()), 4),
            "regret_with_none": round(float(with_none.mean()), 4),
            "worst_regret_with_none": round(float(with_none.max()), 4),
        }
    return result


if __name__ == "__main__":
    main()
