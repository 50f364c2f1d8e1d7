"""The bundled part of benchmarks/compare_judges.py: the offline judges of data/role_adherence compared as
docs/how-to/choose-a-judge.md compares them, on every conversation and with the recommendation and its noise as
measured. Three set-ups, each gathered by `role-rubric gather`, calibrated with model=linear: the embedding judge
as it comes, the same judge with `relevance_weight=0` (a stand-in for a prompt variant), and the embedding judge
with the KL reference scorer beside it (`gather scorer=kl scorer.beside=`: one more input the calibrator reads,
the role-adherence paper's reference scorers; on the bundled data its references share words with the replies
by construction, docs/how-to/reference-scorers.md, so its gain there is an upper bound)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from pathlib import Path

from calibration.cli import main as role_rubric
from calibration.judges import compare_judges

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "role_adherence"
VARIANTS = {"embedding": [], "no-relevance": ["judge.params.relevance_weight=0"]}


def gather_judge(name: str, overrides: list[str], conversations: Path, out: Path, cache_dir: Path | None) -> dict:
    """`role-rubric gather` of one judge on the conversations, the labels copied beside: its wall time and
    what gather_summary.json recorded. cache_dir: keep the judge's request cache there (NAME.sqlite), so that a
    rerun asks the model nothing twice."""
    started = time.perf_counter()
    cache = [] if cache_dir is None else [f"cache={cache_dir / (name + '.sqlite')}"]
    argv = ["gather", f"conversations={conversations}", "rubric=role_adherence", *overrides, *cache, f"out={out}",
            "progress=false"]  # fmt: skip
    if role_rubric(argv) != 0:
        raise RuntimeError(f"gather of {name} failed")
    shutil.copy(DATA / "labels.csv", out / "labels.csv")
    summary = json.loads((out / "gather_summary.json").read_text())
    return {"wall_s": round(time.perf_counter() - started, 1), "summary": summary}


def verdict(chosen: dict) -> dict:
    """A recommendation of compare-judges (a question's or the whole judge's) as the benchmarks record it: the
    pick, within noise, the paired RMSE difference with its interval, the line."""
    return {
        "pick": chosen["pick"],
        "within_noise": chosen["within_noise"],
        "rmse_difference": round(chosen["rmse_difference"], 4),
        "interval": [round(chosen["rmse_difference_low"], 4), round(chosen["rmse_difference_high"], 4)],
        "line": chosen["line"],
    }


def with_reference_scorer(judge: Path, out: Path) -> Path:
    """The judge's directory with the KL reference scorer's answers beside its own (`gather scorer=kl
    scorer.beside=`), and the same labels."""
    argv = [
        "gather",
        "scorer=kl",
        f"conversations={DATA / 'conversations.jsonl'}",
        f"scorer.beside={judge}",
        f"out={out}",
        "progress=false",
    ]
    if role_rubric(argv) != 0:
        raise RuntimeError("gather scorer=kl failed")
    shutil.copy(DATA / "labels.csv", out / "labels.csv")
    return out


def bundled_comparison(*, n_boot: int, seed: int) -> dict:
    """Per question: the pick, within noise, the paired RMSE difference with its interval, the runner-up's label
    multiplier with its interval, and the held-out confirmation; each judge's calibrated RMSE and kappa."""
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for name, overrides in VARIANTS.items():
            judge = ["judge=embedding", "judge.params.threads=1", *overrides]
            gather_judge(name, judge, DATA / "conversations.jsonl", Path(tmp) / name, None)
            dirs.append(Path(tmp) / name)
        dirs.append(with_reference_scorer(dirs[0], Path(tmp) / "embedding+kl"))
        result = compare_judges(dirs, model="linear", n_boot=n_boot, seed=seed)
    out: dict = {
        "data": "data/role_adherence: every conversation, its labels; model=linear; embedding, no-relevance "
        "(relevance_weight=0) and embedding+kl (the KL reference scorer beside the embedding judge)",
        "questions": {},
    }
    for qid, block in result["questions"].items():
        r = block["recommendation"]
        runner = block["judges"][r["runner_up"]]
        out["questions"][qid] = verdict(r) | {
            "p_best": round(r["p_best"][r["pick"]], 3),
            "runner_up_label_multiplier": {k: round(v, 3) for k, v in runner["label_multiplier"].items()},
            "confirmed_on_held_out_half": None
            if block["held_out_confirmation"] is None
            else block["held_out_confirmation"]["confirmed"],
            "rmse": {n: round(j["rmse"], 4) for n, j in block["judges"].items()},
            "kappa": {n: None if j["kappa"] is None else round(j["kappa"], 3) for n, j in block["judges"].items()},
        }
    whole = result["overall"]["whole_judge"]
    out["whole_judge"] = verdict(whole) | {"runner_up": whole["runner_up"]}
    out["conversations"] = result["data"]["conversations"]
    out["label_rows"] = result["data"]["label_rows"]
    return out
