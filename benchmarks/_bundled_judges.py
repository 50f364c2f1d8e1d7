"""The bundled part of benchmarks/compare_judges.py: the offline judges of data/role_adherence compared as
docs/how-to/choose-a-judge.md compares them, on every conversation and with the recommendation and its noise as
measured. The embedding judge as it comes against the same judge with `relevance_weight=0` (a stand-in for a
prompt variant), both gathered by `role-rubric gather judge=embedding`, calibrated with model=linear."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from calibration.cli import main as role_rubric
from calibration.judges import compare_judges

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "role_adherence"
VARIANTS = {"embedding": [], "no-relevance": ["judge.params.relevance_weight=0"]}


def bundled_comparison(*, n_boot: int, seed: int) -> dict:
    """Per question: the pick, within noise, the paired RMSE difference with its interval, the runner-up's label
    multiplier with its interval, and the held-out confirmation; each judge's calibrated RMSE and kappa."""
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for name, overrides in VARIANTS.items():
            out = Path(tmp) / name
            argv = [
                "gather",
                f"conversations={DATA / 'conversations.jsonl'}",
                "rubric=role_adherence",
                "judge=embedding",
                "judge.params.threads=1",
                *overrides,
                f"out={out}",
                "progress=false",
            ]
            if role_rubric(argv) != 0:
                raise RuntimeError(f"gather of {name} failed")
            shutil.copy(DATA / "labels.csv", out / "labels.csv")
            dirs.append(out)
        result = compare_judges(dirs, model="linear", n_boot=n_boot, seed=seed)
    out = {"data": "data/role_adherence: every conversation, its labels; model=linear", "questions": {}}
    for qid, block in result["questions"].items():
        r = block["recommendation"]
        runner = block["judges"][r["runner_up"]]
        out["questions"][qid] = {
            "pick": r["pick"],
            "within_noise": r["within_noise"],
            "rmse_difference": round(r["rmse_difference"], 4),
            "interval": [round(r["rmse_difference_low"], 4), round(r["rmse_difference_high"], 4)],
            "p_best": round(r["p_best"][r["pick"]], 3),
            "runner_up_label_multiplier": {k: round(v, 3) for k, v in runner["label_multiplier"].items()},
            "confirmed_on_held_out_half": None
            if block["held_out_confirmation"] is None
            else block["held_out_confirmation"]["confirmed"],
            "rmse": {n: round(j["rmse"], 4) for n, j in block["judges"].items()},
            "kappa": {n: None if j["kappa"] is None else round(j["kappa"], 3) for n, j in block["judges"].items()},
            "line": r["line"],
        }
    out["conversations"] = result["data"]["conversations"]
    out["label_rows"] = result["data"]["label_rows"]
    return out
