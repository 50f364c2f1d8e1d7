"""`estimate crossfit=K` where the truth is known: coverage and width of the cross-fitted ppi interval against
the unadapted model's on the same labels. Prints JSON.

The covariate-shift splits of benchmarks/estimate.py (LLM-Rubric; the calibrator trained on one 70%, the
release the other 30%). Each draw labels n conversations of the release at random; the unadapted model
estimates from them (a plain `estimate`), and K fold calibrators trained on the training directory plus the
labels outside each fold (`estimate crossfit=K`, the unadapted model's predictions as a second control
variate; "crossfit_alone": the K calibrators without it) estimate from the same labels; and the team that adapts
first and then labels n fresh conversations for the estimate (2n labels: "adapt then label again") estimates
with the calibrator trained on everything. Every calibrator here uses
the default settings with a smaller ensemble (--ensemble, 4: a draw trains K of them), the unadapted one too.
Draws run in parallel processes until --seconds has passed (a time box), so the number of draws is reported.

    python benchmarks/estimate_crossfit.py --work DIR [--n 20] [--k 4] [--ensemble 4] [--workers 16] [--seconds 420]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

import numpy as np
import pandas as pd
from _results import add_results_argument, emit

READ = {"dtype": {"conversation_id": str, "turn": str, "judge_id": str}, "keep_default_na": False}


def _light_model(train_dir: Path, out: Path, ensemble: int) -> Path:
    from calibration.data.union import load_training_data
    from calibration.model.ensemble import train_ensemble
    from calibration.model.files import save_model
    from calibration.model.provenance import training_records
    from calibration.model.settings import Settings

    if (out / "model.json").exists():
        return out
    data = load_training_data([train_dir])
    settings = dataclasses.replace(Settings(), ensemble=ensemble)
    net, spec, plan = train_ensemble(data.ds, settings, seed=0)
    save_model(
        out,
        net,
        data.ds,
        spec,
        settings,
        history=plan.history,
        recalibration=plan.recalibration,
        judge=data.judge,
        trained_on=training_records(data),
    )
    return out


def _interval(preds, ppi_mean, classical_mean):
    s = preds.sample()
    ppi, humans = ppi_mean(s, bounds=(0.0, 1.0)), classical_mean(s, bounds=(0.0, 1.0))
    return ppi, humans


def one_draw(args) -> dict:
    import torch

    torch.set_num_threads(1)
    from calibration.data.dataset import load_dataset
    from calibration.model.files import load_model
    from calibration.release.crossfit import train_folds
    from calibration.release.inference import classical_mean, ppi_mean
    from calibration.release.turns import reviewer_predictions

    release, model_dir, train_dir, picked, fresh, k, seed, work = args
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    rel = work / "release"
    rel.mkdir(exist_ok=True)
    for name in ("llm.csv", "rubric.yaml"):
        shutil.copy(Path(release) / name, rel / name)
    labels = pd.read_csv(Path(release) / "labels.csv", **READ)
    labels[labels.conversation_id.isin(picked)].to_csv(rel / "labels.csv", index=False)
    model = load_model(model_dir)
    moved = [r.model_copy(update={"data": str(train_dir)}) for r in model.record.trained_on]
    model.record = model.record.model_copy(update={"trained_on": moved})
    ds = load_dataset(rel, rubric=model.rubric)
    X = torch.from_numpy(ds.features(model.spec))
    t = ds.target_index
    plain, humans = _interval(
        reviewer_predictions(model, ds, X, t, kind="rate", adheres_at=3.0), ppi_mean, classical_mean
    )
    folds = train_folds(model, model_dir, rel, sorted(picked), k, work / "folds", work / "adapted", seed=seed)
    crossed_preds = folds.predictions(ds, t, kind="rate", adheres_at=3.0)
    crossed, _ = _interval(crossed_preds, ppi_mean, classical_mean)  # with the unadapted model beside
    alone, _ = _interval(dataclasses.replace(crossed_preds, other=None), ppi_mean, classical_mean)
    # adapt, then label n fresh conversations and estimate with the adapted model: 2n labels in all
    labels[labels.conversation_id.isin(fresh)].to_csv(rel / "labels.csv", index=False)
    again_ds = load_dataset(rel, rubric=model.rubric)
    adapted = load_model(work / "adapted")
    again, _ = _interval(
        reviewer_predictions(
            adapted,
            again_ds,
            torch.from_numpy(again_ds.features(adapted.spec)),
            again_ds.target_index,
            kind="rate",
            adheres_at=3.0,
        ),
        ppi_mean,
        classical_mean,
    )
    shutil.rmtree(work, ignore_errors=True)
    return {
        k: [iv.low, iv.high, iv.lam if iv.lam is not None else 0.0]
        for k, iv in (
            ("unadapted", plain),
            ("humans", humans),
            ("crossfit", crossed),
            ("crossfit_alone", alone),
            ("adapt_then_label_again", again),
        )
    }


def _paired_ratio_interval(rows: list[dict], a: str, b: str, resamples: int = 2000) -> list[float] | None:
    """95% bootstrap interval (draws resampled, each draw's two widths kept together) of mean width a over
    mean width b: whether a ratio like 1.01 is more than the draws' noise."""
    if len(rows) < 2:
        return None
    wa = np.array([r[a][1] - r[a][0] for r in rows])
    wb = np.array([r[b][1] - r[b][0] for r in rows])
    idx = np.random.default_rng(0).integers(0, len(rows), size=(resamples, len(rows)))
    ratios = wa[idx].mean(1) / wb[idx].mean(1)
    return [float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="holds <split>-train and <split>-release folders")
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--ensemble", type=int, default=4)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--seconds", type=float, default=420)
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    add_results_argument(parser, "estimate_crossfit")
    args = parser.parse_args()
    start = time.perf_counter()
    from calibration.data.dataset import load_dataset
    from calibration.model.files import load_model
    from calibration.release.turns import reviewer_predictions

    splits = ["llm_rubric_shift_down-30pct", "llm_rubric_shift_up-30pct"]
    setup = {}
    for split in splits:
        train_dir, release = args.work / f"{split}-train", args.work / f"{split}-release"
        model_dir = _light_model(train_dir, args.work / f"{split}-light-model", args.ensemble)
        model = load_model(model_dir)
        import torch

        ds = load_dataset(release, rubric=model.rubric)
        preds = reviewer_predictions(
            model, ds, torch.from_numpy(ds.features(model.spec)), ds.target_index, kind="rate", adheres_at=3.0
        )
        setup[split] = (release, model_dir, train_dir, preds.human_mean(), np.unique(preds.conversation))
    print(f"estimate_crossfit: base models ready ({time.perf_counter() - start:.0f}s)", file=sys.stderr)
    rng = np.random.default_rng(0)
    tmp = Path(tempfile.mkdtemp(prefix="crossfit-bench-"))
    results = {s: [] for s in splits}
    deadline = start + args.seconds
    with ProcessPoolExecutor(args.workers) as pool:
        pending, i = {}, 0
        while True:
            while time.perf_counter() < deadline and len(pending) < args.workers:
                split = splits[i % len(splits)]
                release, model_dir, train_dir, _, convs = setup[split]
                order = rng.permutation(convs)
                picked, fresh = list(order[: args.n]), list(order[args.n : 2 * args.n])
                job = (str(release), str(model_dir), str(train_dir), picked, fresh, args.k, i, str(tmp / f"d{i}"))
                pending[pool.submit(one_draw, job)] = split
                i += 1
            if not pending:
                break
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for f in done:
                results[pending.pop(f)].append(f.result())
    out = {"n": args.n, "k": args.k, "ensemble": args.ensemble, "alpha": 0.1, "benchmarks": {}}
    for split, rows in results.items():
        truth = setup[split][3]
        block = {"draws": len(rows), "truth": truth}
        for key in ("humans", "unadapted", "crossfit", "crossfit_alone", "adapt_then_label_again"):
            lo = np.array([r[key][0] for r in rows])
            hi = np.array([r[key][1] for r in rows])
            block[key] = {
                "coverage": float(((lo <= truth) & (truth <= hi)).mean()),
                "mean_width": float((hi - lo).mean()),
                "lambda_median": float(np.median([r[key][2] for r in rows])),
            }
        block["crossfit_width_over_unadapted"] = block["crossfit"]["mean_width"] / block["unadapted"]["mean_width"]
        block["crossfit_width_over_unadapted_95"] = _paired_ratio_interval(rows, "crossfit", "unadapted")
        block["crossfit_alone_width_over_unadapted"] = (
            block["crossfit_alone"]["mean_width"] / block["unadapted"]["mean_width"]
        )
        block["crossfit_alone_width_over_unadapted_95"] = _paired_ratio_interval(rows, "crossfit_alone", "unadapted")
        block["adapt_then_label_again_width_over_crossfit"] = (
            block["adapt_then_label_again"]["mean_width"] / block["crossfit"]["mean_width"]
        )
        block["coverage_mc_sd"] = float(np.sqrt(0.09 / max(len(rows), 1)))
        out["benchmarks"][split.replace("-30pct", "")] = block
    out["seconds"] = round(time.perf_counter() - start, 1)
    if args.out:
        args.out.write_text(json.dumps(out, indent=1))
    emit(args.results_name, out)


if __name__ == "__main__":
    main()
