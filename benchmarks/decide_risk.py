"""`decide` checked on held-out turns: does the realised disagreement respect the risk bound?

Every item gets an out-of-fold adherence probability (5 folds grouped by conversation; each fold's
ensemble trains on the other four, then predicts its items for every training judge, averaged). Then, 20
times, a random half of the conversations calibrates the threshold (Learn-then-Test, calibration/release/decide.py)
and the other half measures the disagreement on the turns it decides and the share it decides. The
guarantee asks the realised disagreement to be <= risk in at least 1 - delta of the splits (finite test
halves add their own noise, so this is a check of the method, not the exact promise).

    python benchmarks/decide_risk.py [--dataset llm-rubric|role-adherence --role-data DIR] [--members 16]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
from _anchors import load_llm_rubric  # noqa: E402  (benchmarks/_anchors.py)
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration import Settings, load_dataset, train_ensemble
from calibration.evaluation.risk_control import RISK_LEVELS, validate
from calibration.release.decide import adherence_probability, default_adheres_at, jsonable, turn_votes

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"


class _Fold:
    """What adherence_probability needs of a model: its judges, settings, spec and proba."""

    def __init__(self, net, spec, plan, ds, settings):
        self.net, self.spec, self.recalibration, self.settings = net, spec, plan.recalibration, settings
        self.judges = list(ds.judges)

    def proba(self, X, item, judge):
        from calibration import ensemble_proba

        return ensemble_proba(self.net, X, item, judge, pool=self.settings.pool, recalibration=self.recalibration)


def out_of_fold(ds, settings: Settings, folds: int, seed: int, adheres_at: float) -> np.ndarray:
    import dataclasses

    rng = np.random.default_rng(seed)
    fold_of_group = rng.permutation(np.arange(ds.groups.max() + 1) % folds)
    fold = fold_of_group[ds.groups]  # (N,) fold of each item
    p = np.full(len(ds.items), math.nan)
    for f in range(folds):
        rows = np.flatnonzero(fold[ds.label_item] != f)
        train = dataclasses.replace(
            ds, label_item=ds.label_item[rows], label_judge=ds.label_judge[rows], answers=ds.answers[rows]
        )
        net, spec, plan = train_ensemble(train, settings, seed=seed)
        held = np.flatnonzero(fold == f)
        p[held] = adherence_probability(_Fold(net, spec, plan, ds, settings), ds, adheres_at)[held]
        print(f"fold {f}: {len(rows)} training rows, {len(held)} held-out items", file=sys.stderr, flush=True)
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("llm-rubric", "role-adherence"), default="llm-rubric")
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--role-data", help="a gathered role-adherence dataset dir (llm.csv + labels.csv)")
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--splits", type=int, default=20)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--against", choices=("majority", "reviewers"), default="majority")
    add_results_argument(parser, "decide_risk")
    args = parser.parse_args()
    start = time.perf_counter()
    ds = load_llm_rubric(args.anchors) if args.dataset == "llm-rubric" else load_dataset(args.role_data)
    adheres_at = default_adheres_at(ds.rubric.question(ds.rubric.target))
    p = out_of_fold(ds, Settings(ensemble=args.members), 5, args.seed, adheres_at)
    votes = turn_votes(ds, adheres_at)
    item = votes["item"].to_numpy()
    n_yes, n_all = votes["n_adheres"].to_numpy(), votes["n_reviewers"].to_numpy()
    levels = {}
    for risk in RISK_LEVELS:
        v = validate(
            p[item],
            n_yes,
            n_all,
            ds.groups[item],
            risk=risk,
            delta=args.delta,
            against=args.against,
            splits=args.splits,
            seed=args.seed,
        )
        levels[str(risk)] = {k: (round(x, 4) if isinstance(x, float) else x) for k, x in v.items() if k != "per_split"}
        if risk == 0.1:
            per_split = [{k: round(x, 4) for k, x in r.items()} for r in v["per_split"]]
    majority_adheres = float(np.mean(2 * n_yes > n_all))
    emit(
        args.results_name,
        jsonable(
            {
                "dataset": args.dataset,
                "turns": len(item),
                "reviewers_per_turn": round(float(n_all.mean()), 2),
                "adheres_at": adheres_at,
                "share_majority_adheres": round(majority_adheres, 4),
                "share_ties": round(float(np.mean(2 * n_yes == n_all)), 4),
                "settings": {
                    "ensemble": args.members,
                    "folds": 5,
                    "seed": args.seed,
                    "delta": args.delta,
                    "against": args.against,
                    "splits": args.splits,
                },
                "levels": levels,
                "risk_0.1_per_split": per_split,
                "seconds": round(time.perf_counter() - start, 1),
            }
        ),
        indent=1,
    )


if __name__ == "__main__":
    main()
