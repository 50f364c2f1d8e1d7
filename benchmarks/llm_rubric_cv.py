"""The cross-validation table on the LLM-Rubric synthetic data with the default settings (conf/).

Runs `cv` (5 folds grouped by dialogue, fixed fold assignment) once per training seed, and prints JSON:
per-seed pooled Q0 metrics of the calibrated model, their mean and standard deviation, the baselines,
the smECE of the calibrated Q0 distribution one-vs-rest for every answer value, and cv wall times
(start-up excluded).

    python benchmarks/llm_rubric_cv.py [--anchors ../shared/anchors/llm_rubric_synth] [--seeds 0 1 2 3 4]
"""

from __future__ import annotations

import argparse
import os
import statistics

import relplot
from _anchors import add_anchors_argument, load_llm_rubric  # noqa: E402  (benchmarks/_anchors.py)
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.evaluation.crossval import cross_validate
from calibration.schema.build import command_config

REFERENCE = {
    "released_pytorch_code_21_seeds": {"pearson": "0.406 +- 0.019", "rmse": "0.766 +- 0.010"},
    "per_judge_mean": {"rmse": 0.78, "pearson": 0.34},
    "constant": {"rmse": 0.82},
}


def smece_per_value(predictions, values: list[float]) -> dict[str, float]:
    """smECE of P(answer = v) against the indicator, one-vs-rest, for every answer value v."""
    calibrated = predictions[predictions["method"] == "calibrated"]
    out = {}
    for v in values:
        key = f"p_{v:g}"
        f = calibrated[key].to_numpy(float)
        y = (calibrated["answer"].to_numpy(float) == v).astype(float)
        out[f"{v:g}"] = round(float(relplot.smECE(f, y)), 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_anchors_argument(parser)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--override", nargs="*", default=[], help="Hydra overrides, e.g. train.ensemble=8")
    add_results_argument(parser, "llm_rubric_cv")
    args = parser.parse_args()
    ds = load_llm_rubric(args.anchors)
    settings = command_config("cv", ["data=unused", "out=unused", *args.override]).settings
    values = ds.rubric.question("Q0").values
    per_seed, baselines, smece = [], None, {}
    for seed in args.seeds:
        result = cross_validate(ds, settings, folds=5, seed=seed, fold_seed=0)
        m = result.metrics["calibrated"]
        per_seed.append(
            {
                "seed": seed,
                **{k: round(m[k], 4) for k in ("pearson", "rmse", "spearman", "kendall", "nll")},
                "cv_seconds": round(result.seconds, 2),
            }
        )
        smece[str(seed)] = smece_per_value(result.predictions, values)
        if baselines is None:
            baselines = {
                name: {k: round(v, 4) if isinstance(v, float) else v for k, v in met.items()}
                for name, met in result.metrics.items()
            }

    def stats(key):
        xs = [r[key] for r in per_seed]
        return {
            "mean": round(statistics.mean(xs), 4),
            "std": round(statistics.stdev(xs), 4) if len(xs) > 1 else 0.0,
            "min": min(xs),
            "max": max(xs),
        }

    emit(
        args.results_name,
        {
            "data": "LLM-Rubric synthetic, Q0, 5-fold CV grouped by dialogue (fold_seed=0)",
            "settings": settings.to_dict(),
            "per_seed": per_seed,
            "calibrated": {
                "pearson": stats("pearson"),
                "rmse": stats("rmse"),
                "spearman": stats("spearman"),
                "kendall": stats("kendall"),
            },
            "smece_one_vs_rest": smece,
            "smece_max": max(v for s in smece.values() for v in s.values()),
            "cv_seconds_median": round(statistics.median(r["cv_seconds"] for r in per_seed), 2),
            "baselines_seed0": baselines,
            "reference": REFERENCE,
            "threads": int(os.environ.get("OMP_NUM_THREADS", "0")) or None,
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
        indent=2,
    )


if __name__ == "__main__":
    main()
