"""Does `compare-judges` pick the better judge? The LLM-Rubric anchors' real GPT-3.5 answer distributions
against degraded copies of themselves, with the real reviewers, at 20, 50 and 100 labelled conversations.

The copies are the real distributions resampled, nothing invented (per question, independently):
  - shuffled-50: half of the dialogues (drawn at random) get another of those dialogues' distribution
    (a random permutation among them);
  - mixed-50: every distribution is averaged 50/50 with that of a random other dialogue;
  - shuffled-100: every dialogue gets another's (the judge's answers tell nothing about the dialogue; its
    other questions' answers still do, as the calibrator reads them all).
Per draw, n dialogues (seeded) are the labelled ones: `compare_loaded` (the stage of `role-rubric
compare-judges`, model=linear: the simple calibrator, so that many draws fit in minutes) recommends a judge
per question from them alone. The truth of that draw: each judge's calibrator trained on the same n
dialogues and scored (RMSE) on the held-out dialogues (the other 223 - n). Reported per size and question:
how often the pick is the held-out best, how often it is the real judge, how often the pick is flagged
within noise, and how often a pick not flagged is right, and the regret (held-out RMSE of the pick minus the best's); and
pairwise, the real judge against each copy alone: how often the lower out-of-fold RMSE is the real judge's,
and how often that agrees with the held-out comparison. The label multiplier (how many times the real
judge's labelled conversations each copy needs for the same release-estimate width) from the whole data.

    python benchmarks/compare_judges.py [--anchors ../shared/anchors/llm_rubric_synth] [--draws 5]
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
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.data.importers import import_llm_rubric
from calibration.data.union import retargeted
from calibration.evaluation.baselines import linear
from calibration.judges.data import fold_of_rows, load_judges
from calibration.judges.stage import compare_loaded

SIZES = (20, 50, 100)
COPIES = {"shuffled-50": 0.5, "mixed-50": 0.5, "shuffled-100": 1.0}


def degrade(llm: pd.DataFrame, kind: str, amount: float, seed: int) -> pd.DataFrame:
    """A copy of the long llm.csv frame whose distributions are the real ones resampled across dialogues
    (module docstring), independently per question."""
    rng = np.random.default_rng(seed)
    out = []
    for _, part in llm.groupby("question_id", sort=False):
        wide = part.pivot(index="conversation_id", columns="option", values="prob")
        probs = wide.to_numpy()
        n = len(probs)
        if kind == "shuffled":
            chosen = np.flatnonzero(rng.random(n) < amount)
            new = probs.copy()
            new[chosen] = probs[rng.permutation(chosen)]
        else:  # mixed: with a random other dialogue's distribution
            other = (np.arange(n) + rng.integers(1, n, size=n)) % n
            new = (1 - amount) * probs + amount * probs[other]
        frame = pd.DataFrame(new, index=wide.index, columns=wide.columns).stack().rename("prob").reset_index()
        out.append(part.drop(columns="prob").merge(frame, on=["conversation_id", "option"], how="left"))
    return pd.concat(out, ignore_index=True)[llm.columns]


def write_judges(anchors: Path, work: Path, seed: int) -> list[Path]:
    """The real judge's directory and one per degraded copy (the same labels and rubric)."""
    real = work / "real"
    import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", real)
    llm = pd.read_csv(real / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    dirs = [real]
    for i, (name, amount) in enumerate(COPIES.items()):
        d = work / name
        d.mkdir()
        for f in ("rubric.yaml", "labels.csv"):
            (d / f).write_bytes((real / f).read_bytes())
        degrade(llm, name.split("-")[0], amount, seed + i).to_csv(d / "llm.csv", index=False)
        dirs.append(d)
    return dirs


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


def one_draw(judges, conversation: np.ndarray, n: int, seed: int, n_boot: int) -> dict:
    """The recommendation from n labelled dialogues, and the held-out truth, per question."""
    rng = np.random.default_rng([seed, n])
    chosen = rng.choice(conversation.max() + 1, size=n, replace=False)
    selected = np.isin(conversation, chosen)
    subset = [j.subset(np.flatnonzero(selected)) for j in judges]
    result = compare_loaded(subset, model="linear", n_boot=n_boot, seed=seed)
    out = {}
    for qid, block in result["questions"].items():
        held = {j.name: held_out_rmse(j, qid, selected, seed) for j in judges}
        r = block["recommendation"]
        oof = {name: j["rmse"] for name, j in block["judges"].items()}
        out[qid] = {
            "pairwise": {  # real against each copy alone: (picked by out-of-fold RMSE, better held out)
                name: [oof["real"] < oof[name], held["real"] < held[name]] for name in oof if name != "real"
            },
            "pick": r["pick"],
            "within_noise": r["within_noise"],
            "held_out_best": min(held, key=held.get),
            "held_out_rmse": held,
        }
    return out


def summarise(draws: list[dict], questions: list[str]) -> dict:
    """Per question and overall: the shares of draws in which the pick is the held-out best, is the real
    judge, is flagged within noise, and is right when not flagged; the mean regret (the pick's held-out RMSE
    minus the held-out best's)."""

    def rates(rows: list[dict]) -> dict:
        clear = [r for r in rows if not r["within_noise"]]
        return {
            "picks_held_out_best": round(float(np.mean([r["pick"] == r["held_out_best"] for r in rows])), 3),
            "picks_real": round(float(np.mean([r["pick"] == "real" for r in rows])), 3),
            "real_is_held_out_best": round(float(np.mean([r["held_out_best"] == "real" for r in rows])), 3),
            "within_noise": round(float(np.mean([r["within_noise"] for r in rows])), 3),
            "held_out_regret": round(
                float(np.mean([r["held_out_rmse"][r["pick"]] - r["held_out_rmse"][r["held_out_best"]] for r in rows])),
                4,
            ),
            "right_when_clear": None
            if not clear
            else round(float(np.mean([r["pick"] == r["held_out_best"] for r in clear])), 3),
            "clear_picks": len(clear),
            "draws": len(rows),
        }

    per_q = {q: rates([d[q] for d in draws]) for q in questions}
    copies = list(draws[0][questions[0]]["pairwise"])
    pairwise = {}
    for name in copies:
        got = np.array([d[q]["pairwise"][name] for d in draws for q in questions], dtype=float)  # (draws*Q, 2)
        per = {q: round(float(np.mean([d[q]["pairwise"][name][0] for d in draws])), 3) for q in questions}
        pairwise[name] = {
            "picks_real": round(float(got[:, 0].mean()), 3),
            "real_better_held_out": round(float(got[:, 1].mean()), 3),
            "pick_agrees_with_held_out": round(float((got[:, 0] == got[:, 1]).mean()), 3),
            "picks_real_per_question": per,
        }
    return {
        "overall": rates([d[q] for d in draws for q in questions]),
        "per_question": per_q,
        "pairwise_real_vs_copy": pairwise,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--anchors", default=str(Path(__file__).resolve().parents[2] / "shared/anchors/llm_rubric_synth")
    )
    parser.add_argument("--draws", type=int, default=5, help="draws of labelled dialogues per size")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    add_results_argument(parser, "compare_judges")
    args = parser.parse_args()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        judges = load_judges(write_judges(Path(args.anchors), Path(tmp), args.seed))
        full = compare_loaded(judges, model="linear", n_boot=args.n_boot, seed=args.seed)
    questions = list(full["questions"])
    conversation = pd.factorize(
        judges[0].ds.items["conversation_id"].to_numpy()[judges[0].ds.label_item[judges[0].rows]], sort=True
    )[0]
    by_size = {}
    for n in args.sizes:
        draws = [one_draw(judges, conversation, n, args.seed + d, args.n_boot) for d in range(args.draws)]
        by_size[str(n)] = summarise(draws, questions)
        print(f"compare_judges: n={n}: {by_size[str(n)]['overall']}", file=sys.stderr, flush=True)
    multiplier = {
        q: {
            name: {k: round(v, 3) for k, v in block["judges"][name]["label_multiplier"].items()}
            for name in block["judges"]
        }
        for q, block in full["questions"].items()
    }
    emit(
        args.results_name,
        {
            "data": "LLM-Rubric synthetic anchors: 223 dialogues, 9 questions, the real reviewers; the real "
            "GPT-3.5 distributions against copies resampled across dialogues (shuffled-50: half the dialogues "
            "permuted among themselves; mixed-50: each averaged 50/50 with a random other dialogue's; "
            "shuffled-100: every dialogue permuted), per question independently",
            "calibrator": "linear (compare-judges model=linear), 5 shared folds per draw",
            "draws_per_size": args.draws,
            "n_boot": args.n_boot,
            "truth": "per draw, each judge calibrated on the same n dialogues and scored on the held-out ones",
            "by_size": by_size,
            "full_data": {
                "pick": {q: b["recommendation"]["pick"] for q, b in full["questions"].items()},
                "within_noise": {q: b["recommendation"]["within_noise"] for q, b in full["questions"].items()},
                "rmse": {
                    q: {name: round(j["rmse"], 4) for name, j in b["judges"].items()}
                    for q, b in full["questions"].items()
                },
                "label_multiplier_vs_pick": multiplier,
            },
            "seconds": round(time.perf_counter() - started, 1),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        },
    )


if __name__ == "__main__":
    main()
