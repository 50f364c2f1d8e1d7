"""Does `compare-judges` prefer the better judge? The LLM-Rubric anchors' real GPT-3.5 answer distributions
against degraded copies of the whole judge, with the real reviewers, at 20, 50 and 100 labelled conversations.

A degraded copy is the whole judge made worse, every question's distributions together, as a worse model or
prompt would be, and nothing in it is invented: it is the real distributions resampled across dialogues, or the
anchors' own sampled answers.
  - shuffled-25 / shuffled-50 / shuffled-100: a quarter / half / all of the dialogues (drawn at random) get the
    distributions of another of those dialogues, for every question at once (a random permutation among them);
    shuffled-100 is a judge that reads the wrong conversation, one with no information at all;
  - mixed-50: every dialogue's distributions are averaged 50/50 with those of one random other dialogue
    (the same other dialogue for every question);
  - no-logprobs: the judge without its log-probabilities, its one sampled answer per question (the anchors'
    `sample_llm` column, a real GPT-3.5 sample) as a one-hot distribution.
Flattening toward uniform (a temperature) is left out: it can be undone, so a calibrator loses little by it
and a copy that is not worse would only measure ties.

Each copy is compared with the real judge pairwise, as a team compares two set-ups. Per draw, n dialogues
(seeded) are the labelled ones; every judge is calibrated out of fold on them once (model=linear, the simple
calibrator, so that many draws fit in minutes; 5 shared folds, the out-of-fold predictions averaged over 3 splits
as compare-judges does by default) and `compare_loaded` (the stage of
`role-rubric compare-judges`) compares the real judge with each copy. The truth of that draw: each judge's
calibrator trained on the same n dialogues and scored (RMSE) on the held-out ones (the other 223 - n).
Reported per size, question and copy, under three rules computed on the same draws and bootstrap resamples:
the per-question rule (each question's own paired RMSE difference), the pooled one (the differences shrunk
toward the pair's mean over the questions, normal-normal empirical Bayes with the between-question variance
estimated from the data: choice.py `shrink`) and the whole judge (the RMSE averaged over the questions:
choice.py `whole_judge`): how often the recommendation picks the real judge, how often the pick is flagged
within noise, how often the real judge is better held out, and the label multiplier (the copy's labelled
conversations for the same release-estimate width, as a multiple of the real judge's).

The information ceiling (`information`): on all 223 dialogues, the real judge against shuffled-100 per question.
Where even a judge with no information at all is within noise of the real one with every dialogue labelled,
the real judge tells the reviewers' answers to that question little beyond what each reviewer's habits
already do, and no rule can prefer it reliably from 50 labelled conversations. The acceptance (issue 62): the
recommendation picks the real judge in most draws on every question and against every copy from 50 labelled
conversations on; `acceptance` (per-question rule) and `acceptance_pooled` say where it holds as written,
`acceptance_informative` on the questions the ceiling finds informative, and `acceptance_whole_judge` for the
verdict on the whole judge. The one-question scenario (ONE_QUESTION, SCENARIO) checks that pooling still finds a
judge better on one question only.

The bundled part (benchmarks/_bundled_judges.py): the offline judges of data/role_adherence compared as the
how-to compares them, on every conversation, with the recommendation and its noise as measured.

    python benchmarks/compare_judges.py [--anchors ../shared/anchors/llm_rubric_synth] [--draws 10] [--no-bundled]
    python benchmarks/compare_judges.py --local-llm 20 --results-name compare_judges_local_llm [--cache-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _anchors import add_anchors_argument  # noqa: E402  (benchmarks/_anchors.py)
from _bundled_judges import bundled_comparison  # noqa: E402
from _judge_copies import COPIES, NO_INFORMATION, ONE_QUESTION, SCENARIO, SPOILED, write_judges  # noqa: E402
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.data.union import retargeted
from calibration.evaluation.baselines import linear
from calibration.judges.calibrate import answered_questions, calibrate_repeated
from calibration.judges.data import fold_of_rows, load_judges
from calibration.judges.stage import compare_loaded

SIZES = (20, 50, 100)
PAIRS = [("real", c) for c in COPIES] + [(SCENARIO, "shuffled-50")]
ACCEPT_FROM = 50
ACCEPT_SHARE = 0.5
"""The acceptance: from ACCEPT_FROM labelled conversations on, the real judge is the pick in more than this
share of the draws, on every question and against every copy."""


def held_out_rmse(judge, question: str, selected: np.ndarray, seed: int) -> float:
    """RMSE on the held-out label rows of the judge's calibrator trained on the selected ones (linear)."""
    ds = retargeted(judge.ds, question)
    q = ds.rubric.ids.index(question)
    fold = fold_of_rows(judge, selected.astype(np.int64))  # the judge's own rows: 1 selected, 0 held out
    probs = linear(ds, fold, 1, seed)  # trains on the rows outside fold 0 (selected), predicts fold 0
    rows = np.flatnonzero((fold == 0) & (ds.answers[:, q] >= 0))
    values = np.asarray(ds.rubric.question(question).values, float)
    expected = probs[rows, : len(values)] @ values
    return float(np.sqrt(np.mean((expected - values[ds.answers[rows, q]]) ** 2)))


def pair_name(ref: str, other: str) -> str:
    return other if ref == "real" else f"{ref} vs {other}"


def pairwise(
    judges, *, n_boot: int, seed: int, repeats: int, folds: int = 5, pairs=PAIRS
) -> dict[str, dict[str, dict]]:
    """pair -> question -> the reference judge against the other alone (PAIRS; a copy's name stands for real
    against it), under both rules on the same resamples: the per-question pick and within noise, the pooled
    pick and within noise, the paired RMSE differences (other - reference; the question's own and the pooled)
    and the other's label multiplier against the reference. Every judge is calibrated once on the shared
    folds; `compare_loaded` compares each pair from those distributions."""
    questions = answered_questions(judges[0])
    probs = calibrate_repeated(judges, questions, folds=folds, fold_seed=0, repeats=repeats, model="linear",
                               settings=None, seed=seed)  # fmt: skip
    by_name = {j.name: j for j in judges}
    out: dict[str, dict[str, dict]] = {}
    for ref, other in pairs:
        result = compare_loaded(
            [by_name[ref], by_name[other]], model="linear", folds=folds, repeats=repeats, n_boot=n_boot, seed=seed,
            calibrated=probs,
        )  # fmt: skip
        name = pair_name(ref, other)
        out[name] = {}
        whole = result["overall"]["whole_judge"]
        wsign = 1.0 if whole["pick"] == ref else -1.0
        whole_record = {
            "whole_picks_ref": whole["pick"] == ref,
            "whole_within_noise": whole["within_noise"],
            "whole_other_minus_ref": -wsign * whole["rmse_difference"],
            "whole_interval": sorted([-wsign * whole["rmse_difference_low"], -wsign * whole["rmse_difference_high"]]),
        }
        for qid, block in result["questions"].items():
            r, p, js = block["recommendation"], block["recommendation_pooled"], block["judges"]
            sign = 1.0 if r["pick"] == ref else -1.0  # the difference as other - reference
            psign = 1.0 if p["pick"] == ref else -1.0
            out[name][qid] = {
                "picks_ref": r["pick"] == ref,
                "within_noise": r["within_noise"],
                "pooled_picks_ref": p["pick"] == ref,
                "pooled_within_noise": p["within_noise"],
                "rmse_other_minus_ref": -sign * r["rmse_difference"],
                "interval": sorted([-sign * r["rmse_difference_low"], -sign * r["rmse_difference_high"]]),
                "pooled_other_minus_ref": -psign * p["rmse_difference"],
                "pooled_interval": sorted([-psign * p["rmse_difference_low"], -psign * p["rmse_difference_high"]]),
                "shrinkage": p["shrinkage"],
                "label_multiplier": js[other]["label_multiplier"]["multiplier"]
                / js[ref]["label_multiplier"]["multiplier"],
            } | whole_record  # the same whole-judge verdict on every question's record
    return out


def one_draw(judges, conversation: np.ndarray, n: int, seed: int, n_boot: int, repeats: int, pairs=PAIRS) -> dict:
    """The pairwise recommendations from n labelled dialogues, and the held-out truth, per copy and question."""
    rng = np.random.default_rng([seed, n])
    chosen = rng.choice(conversation.max() + 1, size=n, replace=False)
    selected = np.isin(conversation, chosen)
    subset = [j.subset(np.flatnonzero(selected)) for j in judges]
    found = pairwise(subset, n_boot=n_boot, seed=seed, repeats=repeats, pairs=pairs)
    questions = {q for per_q in found.values() for q in per_q}
    held = {q: {j.name: held_out_rmse(j, q, selected, seed) for j in judges} for q in sorted(questions)}
    for ref, other in pairs:
        mean_ref = np.mean([held[q][ref] for q in held])
        mean_other = np.mean([held[q][other] for q in held])
        for q, rec in found[pair_name(ref, other)].items():
            rec["ref_better_held_out"] = held[q][ref] < held[q][other]
            rec["whole_ref_better_held_out"] = bool(mean_ref < mean_other)
    return found


def summarise(draws: list[dict]) -> dict[str, dict[str, dict]]:
    """pair -> question -> under each rule (per question, pooled) the shares of draws in which the
    recommendation picks the reference judge (the real one against a copy), is flagged within noise, picks it
    clear of noise, and agrees with the held-out truth; the share in which the reference is better held out;
    the label multiplier's median (and quartiles) over the draws."""
    out: dict[str, dict[str, dict]] = {}
    for name in draws[0]:
        out[name] = {}
        for q in sorted({q for d in draws for q in d[name]}):
            rows = [d[name][q] for d in draws if q in d[name]]
            truth = np.array([r["ref_better_held_out"] for r in rows])
            mult = np.array([r["label_multiplier"] for r in rows])
            cell: dict = {}
            for prefix in ("", "pooled_"):
                ref = np.array([r[f"{prefix}picks_ref"] for r in rows])
                noise = np.array([r[f"{prefix}within_noise"] for r in rows])
                cell |= {
                    f"{prefix}picks_real": round(float(ref.mean()), 3),
                    f"{prefix}within_noise": round(float(noise.mean()), 3),
                    f"{prefix}picks_real_clear_of_noise": round(float((ref & ~noise).mean()), 3),
                    f"{prefix}pick_agrees_with_held_out": round(float((ref == truth).mean()), 3),
                }
            whole_truth = np.array([r["whole_ref_better_held_out"] for r in rows])
            whole = np.array([r["whole_picks_ref"] for r in rows])
            whole_noise = np.array([r["whole_within_noise"] for r in rows])
            cell |= {
                "whole_picks_real": round(float(whole.mean()), 3),
                "whole_within_noise": round(float(whole_noise.mean()), 3),
                "whole_picks_real_clear_of_noise": round(float((whole & ~whole_noise).mean()), 3),
                "whole_pick_agrees_with_held_out": round(float((whole == whole_truth).mean()), 3),
                "whole_real_better_held_out": round(float(whole_truth.mean()), 3),
            }
            cell |= {
                "real_better_held_out": round(float(truth.mean()), 3),
                "shrinkage_median": round(float(np.median([r["shrinkage"] for r in rows])), 3),
                "label_multiplier": round(float(np.nanmedian(mult)), 3),
                "label_multiplier_quartiles": [round(float(v), 3) for v in np.nanpercentile(mult, [25, 75])],
                "draws": len(rows),
            }
            out[name][q] = cell
    return out


def acceptance(by_size: dict[str, dict], prefix: str = "", questions: list[str] | None = None) -> dict:
    """Where the acceptance holds under one rule (prefix "" per question, "pooled_", "whole_"): per size from
    ACCEPT_FROM on, the (copy, question) pairs whose share of draws picking the real judge is not above
    ACCEPT_SHARE (the copies of COPIES only; the one-question scenario is reported beside it); questions: only
    these (None: every question; the whole judge's verdict is one per copy, reported once)."""
    where = "on every question" if questions is None else f"on the questions {', '.join(questions)}"
    if prefix == "whole_":
        where = "on the whole judge (its RMSE averaged over the questions)"
    out = {
        "criterion": f"from {ACCEPT_FROM} labelled conversations on, the real judge is the pick in more than "
        f"{ACCEPT_SHARE:.0%} of the draws {where}, against every copy"
    }
    failing = {}
    for size, per_copy in by_size.items():
        if int(size) >= ACCEPT_FROM:
            failing[size] = [
                {"copy": c, "question": q, "picks_real": s[f"{prefix}picks_real"]}
                for c, per_q in per_copy.items()
                if c in COPIES
                for q, s in (list(per_q.items())[:1] if prefix == "whole_" else per_q.items())
                if (questions is None or q in questions or prefix == "whole_")
                and not s[f"{prefix}picks_real"] > ACCEPT_SHARE
            ]
            if prefix == "whole_":
                for f in failing[size]:
                    f.pop("question")
    out["failing"] = failing
    out["holds"] = bool(failing) and not any(failing.values())
    return out


def information(full: dict) -> dict:
    """The information ceiling from the full-data comparison: per question, the real judge against
    NO_INFORMATION (a judge reading the wrong conversation), the RMSE difference with its 95% interval; a
    question is informative where that interval is clear of 0 with every dialogue labelled."""
    per_q = full[NO_INFORMATION]
    first = next(iter(per_q.values()))  # the whole-judge verdict, the same on every question's record
    return {
        "what": f"all 223 dialogues labelled: the real judge against {NO_INFORMATION}, a judge with no information; "
        "informative where the paired 95% interval of the RMSE difference is clear of 0",
        "questions": {
            q: {"rmse_no_information_minus_real": r["rmse_other_minus_ref"], "interval": r["interval"]}
            for q, r in per_q.items()
        },
        "informative": [q for q, r in per_q.items() if r["interval"][0] > 0],
        "whole_judge": {
            "rmse_no_information_minus_real": first["whole_other_minus_ref"],
            "interval": first["whole_interval"],
        },
    }


def full_data(judges, n_boot: int, seed: int, repeats: int, pairs=PAIRS) -> dict:
    """The pairwise comparison on all 223 dialogues (no held-out truth: every dialogue is labelled), both rules."""
    found = pairwise(judges, n_boot=n_boot, seed=seed, repeats=repeats, pairs=pairs)
    return {
        name: {
            q: {
                "picks_ref": r["picks_ref"],
                "within_noise": r["within_noise"],
                "rmse_other_minus_ref": round(r["rmse_other_minus_ref"], 4),
                "interval": [round(v, 4) for v in r["interval"]],
                "pooled_picks_ref": r["pooled_picks_ref"],
                "pooled_within_noise": r["pooled_within_noise"],
                "pooled_other_minus_ref": round(r["pooled_other_minus_ref"], 4),
                "pooled_interval": [round(v, 4) for v in r["pooled_interval"]],
                "whole_picks_ref": r["whole_picks_ref"],
                "whole_within_noise": r["whole_within_noise"],
                "whole_other_minus_ref": round(r["whole_other_minus_ref"], 4),
                "whole_interval": [round(v, 4) for v in r["whole_interval"]],
                "label_multiplier": round(r["label_multiplier"], 3),
            }
            for q, r in per_q.items()
        }
        for name, per_q in found.items()
    }


def spoiled_one(args: argparse.Namespace, started: float) -> None:
    """The real judge against SPOILED alone, under both rules on the same draws: does pooling still find a judge
    better on one question?"""
    with tempfile.TemporaryDirectory() as tmp:
        judges = load_judges(write_judges(Path(args.anchors), Path(tmp), args.seed, spoil_one=True))
    ds = judges[0].ds
    conversation = pd.factorize(ds.items["conversation_id"].to_numpy()[ds.label_item[judges[0].rows]], sort=True)[0]
    pairs = [("real", SPOILED)]
    by_size = {}
    for n in args.sizes:
        draws = [
            one_draw(judges, conversation, n, args.seed + d, args.n_boot, args.repeats, pairs)
            for d in range(args.draws)
        ]
        by_size[str(n)] = summarise(draws)
        print(f"compare_judges: n={n}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    result = {
        "data": f"LLM-Rubric synthetic anchors: the real judge against {SPOILED}, the real judge with "
        f"{ONE_QUESTION}'s distributions alone permuted across every dialogue (the calibrator of every question "
        f"reads every question's distributions, so the other questions lose a little through {ONE_QUESTION})",
        "calibrator": f"linear (compare-judges model=linear), 5 shared folds per draw, repeats={args.repeats}",
        "draws_per_size": args.draws,
        "n_boot": args.n_boot,
        "truth": "per draw, each judge calibrated on the same n dialogues and scored on the held-out ones",
        "by_size": by_size,
        "full_data": full_data(judges, args.n_boot, args.seed, args.repeats, pairs),
        "seconds": round(time.perf_counter() - started, 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }
    emit(args.results_name, result)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_anchors_argument(parser)
    parser.add_argument("--draws", type=int, default=10, help="draws of labelled dialogues per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3, help="compare-judges repeats= (splits into folds averaged)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-bundled", action="store_true", help="leave out the bundled data's comparison")
    parser.add_argument(
        "--spoil-one-question", action="store_true", help=f"only the real judge against {SPOILED} (SPOILED)"
    )
    parser.add_argument(
        "--local-llm",
        type=int,
        default=0,
        metavar="N",
        help="only Gemma 3 270M (judge=local, role-rubric[local]) against the embedding judge on N bundled "
        "conversations (benchmarks/_local_judge.py)",
    )
    parser.add_argument("--cache-dir", default=None, help="--local-llm: keep each judge's request cache here")
    add_results_argument(parser, "compare_judges")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.spoil_one_question:
        spoiled_one(args, started)
        return
    if args.local_llm:
        from _local_judge import local_llm_comparison  # noqa: E402  (benchmarks/_local_judge.py)

        cache = None if args.cache_dir is None else Path(args.cache_dir)
        result = local_llm_comparison(args.local_llm, n_boot=args.n_boot, seed=args.seed, repeats=args.repeats,
                                      cache_dir=cache)  # fmt: skip
        emit(args.results_name, result | {"seconds": round(time.perf_counter() - started, 1)})
        return
    with tempfile.TemporaryDirectory() as tmp:
        judges = load_judges(write_judges(Path(args.anchors), Path(tmp), args.seed))
    ds = judges[0].ds
    conversation = pd.factorize(ds.items["conversation_id"].to_numpy()[ds.label_item[judges[0].rows]], sort=True)[0]
    full = full_data(judges, args.n_boot, args.seed, args.repeats)
    ceiling = information(full)
    print(f"compare_judges: full data: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    by_size = {}
    for n in args.sizes:
        draws = [one_draw(judges, conversation, n, args.seed + d, args.n_boot, args.repeats) for d in range(args.draws)]
        by_size[str(n)] = summarise(draws)
        print(f"compare_judges: n={n}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    result = {
        "data": "LLM-Rubric synthetic anchors: 223 dialogues, the real reviewers; the real GPT-3.5 distributions "
        "against whole-judge copies resampled across dialogues (shuffled-25 / shuffled-50 / shuffled-100: a "
        "quarter / half / all of the dialogues permuted among themselves, every question together; mixed-50: "
        "each dialogue averaged 50/50 with one random other dialogue's, every question together) and the judge "
        "without log-probabilities (no-logprobs: its one sampled answer per question, the anchors' sample_llm)",
        "calibrator": f"linear (compare-judges model=linear), 5 shared folds per draw, out-of-fold predictions averaged "
        f"over {args.repeats} splits (repeats={args.repeats}); each copy against the real judge alone (pairwise)",
        "draws_per_size": args.draws,
        "n_boot": args.n_boot,
        "truth": "per draw, each judge calibrated on the same n dialogues and scored on the held-out ones",
        "by_size": by_size,
        "acceptance": acceptance(by_size),
        "acceptance_pooled": acceptance(by_size, "pooled_"),
        "acceptance_informative": acceptance(by_size, "", ceiling["informative"]),
        "acceptance_informative_pooled": acceptance(by_size, "pooled_", ceiling["informative"]),
        "acceptance_whole_judge": acceptance(by_size, "whole_"),
        "information": ceiling,
        "pooling": "the pooled rule (calibration/judges/choice.py `shrink`): each pair's per-question RMSE "
        "differences shrunk toward their mean over the questions (normal-normal empirical Bayes, the "
        "between-question variance estimated from the data), its interval and within-noise flag from the same "
        "bootstrap resamples as the per-question rule's",
        "one_question_scenario": f"{SCENARIO}: shuffled-50's kind of copy (another permutation) on every question "
        f"but {ONE_QUESTION}, where it keeps the real judge's distributions; compared with shuffled-50 it is "
        f"better on {ONE_QUESTION}'s own distributions alone; the calibrator of every question reads every question's "
        f"distributions, so {ONE_QUESTION}'s also help the others a little (the held-out truth says how much)",
        "full_data": full,
    }
    if not args.no_bundled:
        result["bundled"] = bundled_comparison(n_boot=args.n_boot, seed=args.seed)
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["load_avg_1m"] = round(os.getloadavg()[0], 2)
    emit(args.results_name, result)


if __name__ == "__main__":
    main()
