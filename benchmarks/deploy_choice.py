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
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)
from adapt import BENCHMARKS, draws_for, network_predictions, simple_predictions  # noqa: E402
from shift import ROOT, dataset_for, folds_of  # noqa: E402

from calibration.data.splits import group_folds
from calibration.evaluation.baselines import linear_oof
from calibration.evaluation.out_of_fold import oof_network
from calibration.evaluation.releases import MIN_DEPLOY_CONVERSATIONS, item_folds
from calibration.model.settings import Settings

MODELS = ("network", "linear", "ordinal")


def cv_rmse(ds, union: np.ndarray, new: np.ndarray, settings: Settings, seed: int, folds: int = 5) -> dict:
    """{"new": model -> RMSE on the new rows, "union": model -> RMSE on every row}, out of fold, of cv on the
    label rows `union` (new: those of the new side)."""
    t = ds.target_index
    sub = ds.with_label_rows(union)
    is_new = np.isin(union, new)
    new_items = np.zeros(len(ds.items), bool)
    new_items[sub.label_item[is_new]] = True
    shared = bool(np.intersect1d(sub.label_item[is_new], sub.label_item[~is_new]).size)
    if shared:  # new judges on old conversations: a conversation cannot belong to one side
        fold_of_item = group_folds(sub.groups, folds, seed)
    else:
        fold_of_item = item_folds(dataclasses.replace(sub, items=sub.items.assign(
            dataset=np.where(new_items, "new", "old"))), None, folds, seed)
    fold_of_row = fold_of_item[sub.label_item]
    probs = {"network": oof_network(sub, settings, fold_of_row, folds, seed),
             "linear": linear_oof(sub, fold_of_row, folds, seed, kind="multinomial"),
             "ordinal": linear_oof(sub, fold_of_row, folds, seed, kind="ordinal")}
    values = ds.option_values()[t, : int(ds.n_options[t])]
    y = values[sub.answers[:, t]]
    out = {"new": {}, "union": {}}
    for model, p in probs.items():
        err = (p[:, : len(values)] @ values - y) ** 2
        out["new"][model] = float(np.sqrt(err[is_new].mean()))
        out["union"][model] = float(np.sqrt(err.mean()))
    return out


def run_benchmark(ds, name: str, ks: list[int], n_draws: int, max_units: int, settings: Settings, seed: int) -> dict:
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
        preds = {"network": network_predictions(ds, settings, fold_of_row, draws, seed, None),
                 "linear": simple_predictions(ds, "multinomial", fold_of_row, draws, seed),
                 "ordinal": simple_predictions(ds, "ordinal", fold_of_row, draws, seed)}
        everything_new = [per[:n_f] for per in draws_for(ds, fold_of_row, folds, 0, 1)][0]
        stale = network_predictions(ds, settings, fold_of_row, [everything_new], seed, None)[0]  # old side only
        rows = []
        for d, f in units:
            draw = draws[d][f]
            y = values[ds.answers[draw.test, t]]
            test = {m: float(np.sqrt(((preds[m][d][f][:, : len(values)] @ values - y) ** 2).mean())) for m in MODELS}
            none = stale[f][np.searchsorted(everything_new[f].test, draw.test)][:, : len(values)] @ values
            no_adaptation = float(np.sqrt(((none - y) ** 2).mean()))
            union = np.sort(np.concatenate([np.flatnonzero(fold_of_row != f), draw.adapt]))
            cv = cv_rmse(ds, union, draw.adapt, settings, seed)
            by_new = k >= MIN_DEPLOY_CONVERSATIONS
            chosen = min(MODELS, key=(cv["new"] if by_new else cv["union"]).get)
            union_choice = min(MODELS, key=cv["union"].get)
            rows.append({"draw": d, "fold": f, "test_rmse": test, "none_rmse": no_adaptation, "cv_new_rmse": cv["new"],
                         "cv_union_rmse": cv["union"], "chosen": chosen, "union_choice": union_choice,
                         "best": min(MODELS, key=test.get)})
            print(f"deploy_choice: {name} k={k} unit {d},{f}: chose {chosen}, best {rows[-1]['best']} "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
        result["by_k"][str(k)] = {"units": rows, **_rates(rows)}
    result["seconds"] = round(time.perf_counter() - start, 1)
    return result


def _rates(rows: list[dict]) -> dict:
    frame = pd.DataFrame(rows)

    def rate(col: str) -> tuple[float, float]:
        picked = np.array([r["test_rmse"][r[col]] for r in rows])
        best = np.array([min(r["test_rmse"].values()) for r in rows])
        return round(float(np.mean(picked <= best)), 3), round(float(np.mean(picked - best)), 4)

    # the question, network against linear: does cv on the new rows order the two as the test rows do?
    pair = [(r["cv_new_rmse"]["network"] <= r["cv_new_rmse"]["linear"]) == (r["test_rmse"]["network"] <= r["test_rmse"]["linear"])
            for r in rows]
    pair_union = [(r["cv_union_rmse"]["network"] <= r["cv_union_rmse"]["linear"])
                  == (r["test_rmse"]["network"] <= r["test_rmse"]["linear"]) for r in rows]
    hit, regret = rate("chosen")
    union_hit, union_regret = rate("union_choice")
    mean = {m: round(float(np.mean([r["test_rmse"][m] for r in rows])), 4) for m in rows[0]["test_rmse"]}
    return {"n_units": len(frame), "deploy_rate": hit, "regret": regret,
            "network_vs_linear_rate": round(float(np.mean(pair)), 3),
            "network_vs_linear_rate_union": round(float(np.mean(pair_union)), 3),
            "test_rmse": {"chosen": round(float(np.mean([r["test_rmse"][r["chosen"]] for r in rows])), 4),
                          "none": round(float(np.mean([r["none_rmse"] for r in rows])), 4), **mean},
            "vs_union_choice": {"deploy_rate": union_hit, "regret": union_regret}}


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
    parser.add_argument("--partial", type=Path, default=None, help="also write the JSON here after each benchmark")
    add_results_argument(parser, "deploy_choice")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="role-rubric-deploy-"))
    settings = dataclasses.replace(Settings(), ensemble=args.ensemble)
    out = {"k": args.k, "draws": args.draws, "units": args.units, "ensemble": args.ensemble,
           "min_deploy_conversations": MIN_DEPLOY_CONVERSATIONS}
    for name in args.only.split(","):
        out[name] = run_benchmark(dataset_for(name, args.anchors, work), name, args.k, args.draws, args.units,
                                  settings, args.seed)
        if args.partial:
            args.partial.write_text(json.dumps(out, indent=1))
    emit(args.results_name, out, indent=1)


if __name__ == "__main__":
    main()
