"""The real-LLM part of benchmarks/compare_judges.py (--local-llm N): Gemma 3 270M, served by llama-cpp-python
(`judge=local`, role-rubric[local]), against the offline embedding judge, on N conversations of data/role_adherence
spread over its roles, with its labels, compared by `compare-judges model=linear` as the how-to compares judges:
per question and on the whole judge, with the recommendation and its noise as measured, and what each gather cost
in time. The 270M model is far too small to judge roles: the measurement is whether compare-judges says so."""

from __future__ import annotations

import tempfile
from pathlib import Path

from _bundled_judges import gather_judge, verdict  # noqa: E402  (benchmarks/_bundled_judges.py)

from calibration.judges import compare_judges

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "role_adherence"
JUDGES = {
    "gemma-270m": ["judge=local", "judge.allow_low_coverage=true"],
    "embedding": ["judge=embedding", "judge.params.threads=1"],
}


def spread_lines(path: Path, n: int) -> list[str]:
    """n lines spread evenly over the file (its conversations are grouped by role)."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [lines[i * len(lines) // n] for i in range(min(n, len(lines)))]


def local_llm_comparison(n: int, *, n_boot: int, seed: int, repeats: int, cache_dir: Path | None = None) -> dict:
    """Gemma 3 270M against the embedding judge on n spread conversations (module docstring)."""
    with tempfile.TemporaryDirectory() as tmp:
        conversations = Path(tmp) / "conversations.jsonl"
        chosen = spread_lines(DATA / "conversations.jsonl", n)
        conversations.write_text("\n".join(chosen) + "\n", encoding="utf-8")
        gathered = {
            name: gather_judge(name, o, conversations, Path(tmp) / name, cache_dir) for name, o in JUDGES.items()
        }
        dirs = [Path(tmp) / name for name in JUDGES]
        result = compare_judges(
            dirs, model="linear", repeats=repeats, n_boot=n_boot, seed=seed, unmatched_labels="skip"
        )
    questions = {}
    for qid, block in result["questions"].items():
        r = block["recommendation"]
        questions[qid] = verdict(r) | {
            "rmse": {name: round(j["rmse"], 4) for name, j in block["judges"].items()},
            "raw_rmse": {
                name: None if j["raw_rmse"] is None else round(j["raw_rmse"], 4) for name, j in block["judges"].items()
            },
        }
    return {
        "data": f"data/role_adherence: {len(chosen)} conversations spread over its roles, their labels; "
        f"model=linear, repeats={repeats}",
        "conversations": result["data"]["conversations"],
        "label_rows": result["data"]["label_rows"],
        "gather": {
            name: {
                "wall_s": g["wall_s"],
                "requests": g["summary"].get("http_requests"),
                "pairs": g["summary"].get("pairs"),
                "sources": g["summary"].get("sources"),
                "coverage": g["summary"].get("coverage"),
            }
            for name, g in gathered.items()
        },
        "questions": questions,
        "whole_judge": verdict(result["overall"]["whole_judge"]),
    }
