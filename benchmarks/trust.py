"""When not to trust the calibrated numbers: how often the shift check fires on shifted releases and on
in-distribution ones, the transport audit's verdicts where the calibrator's bias is known, and the
alternative annotator test per question. Prints JSON.

Data: benchmarks/shift.py's and benchmarks/estimate.py's splits (LLM-Rubric's synthetic dialogues; the bundled
role-adherence benchmark with the offline embedding judge, leave one role out: a new chatbot).
- shift_check: the label-free check of calibration/model/shift.py. On each shift benchmark (the release is
  the held-out 30% / the held-out role), whether it fires on the whole release and its firing rate on random
  samples of 20 and 40 of the release's conversations; on in-distribution random splits (half the
  conversations summarised as training data, the other half as the release; per role on the bundled
  benchmark), its false-alarm rate. The calibrator's bias on each release's rate (trained with the defaults,
  every release turn labelled) says where it should fire (|bias| > 0.03).
- transport_audit: the verdicts of `estimate`'s audit (calibration/release/audit.py, margin 0.05, 90%
  intervals) over random labelled samples of n = 20, 40 and 80 conversations of each release (where it has
  more), with the bias interval's mean half-width.
- alt_test: `cv` (5 folds, seed 0) with each question as the target in turn, and the reviewer agreement and
  the alternative annotator test of calibration/evaluation/reviewers.py per question; plus two planted
  checks on the target: the judge fed the reviewers' own answers (it must win) and a reviewer replaced by the
  others' mean plus small noise (the judge must not beat them).
- score_overhead: `RoleAdherence.measure_many` on the 112 bundled conversations (answers cached, the judge
  loaded) with on_shift=warn against on_shift=ignore, and the model.json size.

    nice -n 10 python benchmarks/trust.py [--splits 100] [--draws 500] [--work DIR] [--ensemble 4]
        [--only shift_check,transport_audit,alt_test,score_overhead]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _results import add_results_argument, emit  # benchmarks/_results.py
from estimate import splits, train, write_subset  # the same splits and training as benchmarks/estimate.py
from shift import bundled_dir, llm_rubric_dir

from calibration.data.dataset import load_dataset
from calibration.data.union import retargeted
from calibration.evaluation.crossval import cross_validate
from calibration.evaluation.reviewers import alt_test, cv_reviewer_agreement
from calibration.model.files import load_model
from calibration.model.settings import Settings
from calibration.model.shift import check_shift, roles_of, training_summary
from calibration.release.audit import bias_interval, verdict
from calibration.release.turns import judge_probabilities, reviewer_predictions

ROOT = Path(__file__).resolve().parents[1]
SHIFTED = ("llm_rubric_shift_down", "llm_rubric_shift_up", "new_chatbot")


def _subset(ds, conversations: set[str]):
    keep = ds.items["conversation_id"].isin(conversations).to_numpy()
    return dataclasses.replace(
        ds,
        items=ds.items[keep].reset_index(drop=True),
        probs=ds.probs[keep],
        present=ds.present[keep],
        coverage=None if ds.coverage is None else ds.coverage[keep],
    )


def _source(name: str, work: Path, anchors: Path) -> Path:
    return llm_rubric_dir(anchors, work) if name.startswith("llm_rubric") else bundled_dir(work)


def _with_conversations(src: Path, dst: Path, conversations: set[str]) -> Path:
    """write_subset, plus the conversations.jsonl lines of those conversations (their roles)."""
    write_subset(src, dst, conversations)
    if (src / "conversations.jsonl").exists():
        import json

        lines = [
            line
            for line in (src / "conversations.jsonl").read_text().splitlines()
            if line.strip() and json.loads(line)["conversation_id"] in conversations
        ]
        (dst / "conversations.jsonl").write_text("\n".join(lines) + "\n")
    return dst


def models(work: Path, anchors: Path) -> dict:
    """(benchmark, part) -> (model dir, release dir): trained once with the defaults, cached in WORK."""
    out = {}
    for name in ("llm_rubric_in_distribution", *SHIFTED):
        src = _source(name, work, anchors)
        for label, trained, release in splits(name, src):
            tag = f"{name}-{label}".replace("%", "pct").replace(" ", "_")
            model = work / f"{tag}-model"
            if not (model / "model.json").exists():
                train(_with_conversations(src, work / f"{tag}-train", trained), model)
            out[(name, label)] = (model, _with_conversations(src, work / f"{tag}-release", release))
    return out


def _release_preds(model_dir: Path, release_dir: Path):
    model = load_model(model_dir)
    ds = load_dataset(release_dir, rubric=model.rubric)
    X = torch.from_numpy(ds.features(model.spec))
    preds = reviewer_predictions(
        model, ds, X, ds.target_index, kind="rate", adheres_at=3.0, proba=judge_probabilities(model, X)
    )
    return model, ds, preds


def _truth_bias(preds) -> float:
    items = np.unique(preds.row_item)
    return float(preds.calibrator[items].mean() - preds.human_mean())


def shift_check(work: Path, anchors: Path, trained: dict, n_splits: int, draws: int) -> dict:
    rng = np.random.default_rng(0)
    result: dict = {"alpha": 0.01, "shifted": {}, "in_distribution": {}}
    for (name, label), (model_dir, release_dir) in trained.items():
        if name == "llm_rubric_in_distribution":
            continue
        model, ds, preds = _release_preds(model_dir, release_dir)
        roles = roles_of([release_dir])
        summary = model.record.shift_summary()
        whole = check_shift(summary, ds, roles or None)
        convs = np.unique(ds.items["conversation_id"])
        rates = {}
        for n in (20, 40):
            if n >= len(convs):
                rates[str(n)] = None
                continue
            fired = [
                check_shift(summary, _subset(ds, set(rng.choice(convs, n, replace=False))), roles or None, seed=int(s))[
                    "fired"
                ]
                for s in range(draws // 5)
            ]
            rates[str(n)] = float(np.mean(fired))
        bias = _truth_bias(preds)
        result["shifted"][f"{name}/{label}"] = {
            "calibrator_bias_rate": round(bias, 4),
            "should_fire": bool(abs(bias) > 0.03),
            "fired_on_release": whole["fired"],
            "p_adjusted": [g["p_adjusted"] for g in whole["groups"]],
            "distance": [g["distance"] for g in whole["groups"]],
            "outside_support": whole["outside_support"],
            "n_conversations": int(len(convs)),
            "firing_rate_by_n": rates,
        }
    must = [v["fired_on_release"] for v in result["shifted"].values() if v["should_fire"]]
    result["fires_on_every_shift_with_bias_over_0.03"] = bool(all(must)) if must else None
    for name in ("llm_rubric", "role_adherence"):
        src = llm_rubric_dir(anchors, work) if name == "llm_rubric" else bundled_dir(work)
        ds = load_dataset(src)
        roles = roles_of([src]) or None
        convs = np.unique(ds.items["conversation_id"])
        fired, p_min = [], []
        start = time.perf_counter()
        for s in range(n_splits):
            perm = np.random.default_rng(1000 + s).permutation(convs)
            half = len(convs) // 2
            check = check_shift(
                training_summary(_subset(ds, set(perm[:half])), roles), _subset(ds, set(perm[half:])), roles, seed=s
            )
            fired.append(check["fired"])
            p_min.append(min(g["p_adjusted"] for g in check["groups"]))
        result["in_distribution"][name] = {
            "splits": n_splits,
            "false_alarm_rate": float(np.mean(fired)),
            "per_role": roles is not None,
            "median_min_p": float(np.median(p_min)),
            "seconds_per_check": round((time.perf_counter() - start) / n_splits, 4),
        }
    return result


def transport_audit(trained: dict, draws: int, margin: float = 0.05, alpha: float = 0.1) -> dict:
    rng = np.random.default_rng(0)
    out = {"margin": margin, "level": 1 - alpha, "draws": draws, "benchmarks": {}}
    for (name, label), (model_dir, release_dir) in trained.items():
        _, _, preds = _release_preds(model_dir, release_dir)
        convs = np.unique(preds.conversation)
        row_conv = preds.conversation[preds.row_item]
        by_n = {}
        for n in (20, 40, 80):
            if n >= len(convs):
                by_n[str(n)] = None
                continue
            counts, half = {"PASS": 0, "FAIL": 0, "INCONCLUSIVE": 0}, []
            for _ in range(draws):
                sel = np.isin(row_conv, rng.choice(convs, n, replace=False))
                items, inverse = np.unique(preds.row_item[sel], return_inverse=True)
                human = np.bincount(inverse, weights=preds.row_value[sel]) / np.bincount(inverse)
                _, low, high, k = bias_interval(preds.calibrator[items], human, preds.conversation[items], alpha)
                counts[verdict(low, high, margin, k)] += 1
                half.append((high - low) / 2)
            by_n[str(n)] = {k: v / draws for k, v in counts.items()} | {
                "mean_half_width": round(float(np.mean(half)), 4)
            }
        out["benchmarks"][f"{name}/{label}"] = {
            "calibrator_bias_rate": round(_truth_bias(preds), 4),
            "n_conversations": int(len(convs)),
            "by_n": by_n,
        }
    biggest = max(out["benchmarks"].values(), key=lambda b: abs(b["calibrator_bias_rate"]))
    in_dist = out["benchmarks"]["llm_rubric_in_distribution/half"]["by_n"]["40"]
    big40 = biggest["by_n"]["40"]
    out["acceptance"] = {
        "in_distribution_fail_rate_n40": in_dist["FAIL"],
        "largest_bias_benchmark": next(k for k, v in out["benchmarks"].items() if v is biggest),
        "largest_bias_fail_or_inconclusive_n40": None if big40 is None else big40["FAIL"] + big40["INCONCLUSIVE"],
    }
    return out


def _compact(block: dict) -> dict:
    """A question's agreement block without the per-reviewer rows."""
    test = block["alt_test"]
    short = (
        None
        if test is None
        else {k: test[k] for k in ("tested", "winning_rate", "advantage", "outcome")}
        | {"skipped_few_turns": len(test["skipped"])}
    )
    return {
        "reviewers": block["reviewers"],
        "calibrated": block["calibrated"],
        "alt_test": short,
        "verdict": block["verdict"],
    }


def _planted(ds, result) -> dict:
    """On the target: the judge fed the reviewers' answers, and a reviewer planted at the others' mean."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    values = np.asarray(ds.rubric.questions[t].values, float)
    item, judge, value = ds.label_item[rows], ds.label_judge[rows], values[ds.answers[rows, t]]
    n_items = len(ds.items)
    truth = np.full(n_items, np.nan)
    counts = np.bincount(item, minlength=n_items)
    truth[counts > 0] = (np.bincount(item, weights=value, minlength=n_items) / np.maximum(counts, 1))[counts > 0]
    fed = alt_test(item, judge, value, truth, 0.1, ds.judges)
    # the reviewer with the most turns shared with others, replaced by the others' mean + N(0, 0.1)
    total = np.bincount(item, weights=value, minlength=n_items)
    others = (total[item] - value) / np.maximum(counts[item] - 1, 1)
    shared = np.bincount(judge[counts[item] > 1], minlength=len(ds.judges))
    planted_judge = int(shared.argmax())
    mine = (judge == planted_judge) & (counts[item] > 1)
    planted = value.copy()
    planted[mine] = others[mine] + np.random.default_rng(0).normal(0, 0.1, mine.sum())
    calibrated = result.predictions[result.predictions["method"] == "calibrated"]["expected"].to_numpy(float)
    f = np.full(n_items, np.nan)
    f[counts > 0] = (np.bincount(item, weights=calibrated, minlength=n_items) / np.maximum(counts, 1))[counts > 0]
    test = alt_test(item, judge, planted, f, 0.1, ds.judges)
    row = next(r for r in test["reviewers"] if r["judge_id"] == ds.judges[planted_judge])
    return {
        "judge_fed_true_labels": {
            "winning_rate": fed["winning_rate"],
            "outcome": fed["outcome"],
            "tested": fed["tested"],
        },
        "planted_reviewer": {
            "judge_id": row["judge_id"],
            "shared_turns": row["shared_turns"],
            "rho_judge": row["rho_judge"],
            "rho_reviewer": row["rho_reviewer"],
            "judge_beats_it": row["judge_wins"],
        },
        "behave_as_they_should": bool(fed["outcome"] == "passes" and not row["judge_wins"]),
    }


def alt_tests(work: Path, anchors: Path, ensemble: int) -> dict:
    settings = dataclasses.replace(Settings(), ensemble=ensemble)
    out = {"epsilon": 0.1, "folds": 5, "seed": 0, "ensemble": ensemble}
    for name, src in (("llm_rubric", llm_rubric_dir(anchors, work)), ("role_adherence", bundled_dir(work))):
        ds = load_dataset(src)
        per_question, start = {}, time.perf_counter()
        for q in ds.rubric.ids:
            qds = retargeted(ds, q)
            result = cross_validate(qds, settings, folds=5, seed=0, baselines=False)
            per_question[q] = _compact(cv_reviewer_agreement(qds, result, 0.1)["questions"][q])
            if q == ds.rubric.target:
                out.setdefault("planted", {})[name] = _planted(qds, result)
            print(f"trust: alt-test {name} {q}: {per_question[q]['verdict']}", file=sys.stderr, flush=True)
        out[name] = {"questions": per_question, "seconds": round(time.perf_counter() - start, 1)}
    return out


def score_overhead(trained: dict, work: Path, repeats: int = 5) -> dict:
    from calibration.api import RoleAdherence
    from rubric.conversations import load_conversations

    model_dir, _ = trained[("new_chatbot", "airline")]
    convs = load_conversations(ROOT / "data" / "role_adherence" / "conversations.jsonl")
    metric = RoleAdherence(
        calibrator=str(model_dir), judge="embedding", cache=str(work / "score_cache.sqlite"), on_shift="ignore"
    )
    metric.notify = lambda line: None
    metric.measure_many(convs)  # the judge's answers cached, the embedding model loaded
    times: dict[str, list[float]] = {"ignore": [], "warn": []}
    for _ in range(repeats):
        for mode in ("ignore", "warn"):
            metric.on_shift = mode
            tick = time.perf_counter()
            metric.measure_many(convs)
            times[mode].append(time.perf_counter() - tick)
    base, warn = float(np.median(times["ignore"])), float(np.median(times["warn"]))
    return {
        "conversations": len(convs),
        "repeats": repeats,
        "seconds_on_shift_ignore": round(base, 4),
        "seconds_on_shift_warn": round(warn, 4),
        "overhead": round(warn / base - 1, 4),
        "fired": bool(metric.shift["fired"]),
        "model_json_bytes": (model_dir / "model.json").stat().st_size,
        "shift_reference_conversations": len(load_model(model_dir).record.shift_reference.conversations),
        "note": "answers from the request cache and the judge loaded: the check's share of a cold score is smaller",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=Path, default=ROOT.parent / "shared" / "anchors" / "llm_rubric_synth")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--ensemble", type=int, default=4, help="members of the per-question cv of the alt-test")
    parser.add_argument("--only", default="shift_check,transport_audit,alt_test,score_overhead")
    parser.add_argument("--work", type=Path, default=None, help="cache folder (imported / gathered data, models)")
    add_results_argument(parser, "trust")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="trust-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    only = args.only.split(",")
    start = time.perf_counter()
    result: dict = {"splits": args.splits, "draws": args.draws}
    trained = models(work, args.anchors) if {"shift_check", "transport_audit", "score_overhead"} & set(only) else {}
    print(f"trust: models ready ({time.perf_counter() - start:.0f}s)", file=sys.stderr, flush=True)
    if "shift_check" in only:
        result["shift_check"] = shift_check(work, args.anchors, trained, args.splits, args.draws)
    if "transport_audit" in only:
        result["transport_audit"] = transport_audit(trained, args.draws)
    if "score_overhead" in only:
        result["score_overhead"] = score_overhead(trained, work)
    if "alt_test" in only:
        result["alt_test"] = alt_tests(work, args.anchors, args.ensemble)
    result["seconds"] = round(time.perf_counter() - start, 1)
    emit(args.results_name, result, indent=1)


if __name__ == "__main__":
    main()
