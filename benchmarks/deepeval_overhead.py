"""What the deepeval path costs on top of a role-rubric measurement. The bundled conversations are scored with
the same judge and a warm request cache (so nobody waits on the judge) three ways: RoleAdherence.measure_many
(one gather for all), one RoleAdherence.a_measure per conversation run concurrently (what the metric asks of
RoleAdherence), and RoleRubricMetric inside deepeval's async `evaluate`. The differences are the per-call
work of role-rubric and deepeval's own work. Also checks that deepeval reports the same session scores.

    DEEPEVAL_TELEMETRY_OPT_OUT=YES python benchmarks/deepeval_overhead.py [--limit 112] [--repeats 3]

Runs in a temporary working directory (deepeval writes `.deepeval/` there); prints JSON and saves it to
benchmarks/results/deepeval_overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

from _results import add_results_argument, emit  # benchmarks/_results.py: the JSON and its provenance

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # before deepeval is imported
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")

ROOT = Path(__file__).resolve().parents[1]


async def _one_by_one(adherence, convs):
    """Every conversation measured on its own, concurrently, as deepeval's async evaluate asks the metric."""
    return await asyncio.gather(*(adherence.a_measure(c) for c in convs))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=112, help="conversations from data/role_adherence")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each path (the best is kept)")
    add_results_argument(ap, "deepeval_overhead")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    import deepeval
    from deepeval import evaluate
    from deepeval.evaluate.configs import DisplayConfig
    from deepeval.test_case import ConversationalTestCase, Turn

    import_s = time.perf_counter() - started
    from calibration.api import RoleAdherence
    from calibration.connectors.deepeval.metric import RoleRubricMetric
    from rubric import load_conversations

    convs = load_conversations(ROOT / "data" / "role_adherence" / "conversations.jsonl")[: args.limit]
    cases = [
        ConversationalTestCase(
            name=c.conversation_id,
            chatbot_role=c.chatbot_role,
            turns=[Turn(role=r, content=getattr(t, r)) for t in c.turns for r in ("user", "assistant")],
        )
        for c in convs
    ]
    quiet = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)
    home = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        adherence = RoleAdherence(judge="embedding", cache=Path(tmp) / "cache.sqlite")
        t0 = time.perf_counter()
        direct = adherence.measure_many(convs)  # cold: the judge answers every question, the cache fills
        cold_s = time.perf_counter() - t0
        direct_s, single_s, deepeval_s = [], [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            direct = adherence.measure_many(convs)
            direct_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()  # what the metric asks of RoleAdherence: one a_measure per conversation
            asyncio.run(_one_by_one(adherence, convs))
            single_s.append(time.perf_counter() - t0)
            metric = RoleRubricMetric(adherence=adherence)
            t0 = time.perf_counter()
            # deepeval prints its summary whatever print_results says: keep stdout for the JSON
            with contextlib.redirect_stdout(sys.stderr):
                run = evaluate(test_cases=cases, metrics=[metric], display_config=quiet)
            deepeval_s.append(time.perf_counter() - t0)
        via = {t.name: t.metrics_data[0].score for t in run.test_results}
        worst = max(abs(via[r.conversation_id] - r.score) for r in direct)
        os.chdir(home)
    turns = sum(len(c.turns) for c in convs)
    result = {
        "deepeval": deepeval.__version__,
        "judge": "embedding (all-MiniLM-L6-v2), not calibrated",
        "conversations": len(convs),
        "assistant_turns": turns,
        "import_deepeval_s": round(import_s, 2),
        "cold_gather_s": round(cold_s, 2),
        "warm_measure_many_s": round(min(direct_s), 3),
        "warm_a_measure_per_conversation_s": round(min(single_s), 3),
        "warm_deepeval_evaluate_s": round(min(deepeval_s), 3),
        "deepeval_path_ms_per_conversation": round(1000 * (min(deepeval_s) - min(direct_s)) / len(convs), 1),
        "of_which_deepeval_ms_per_conversation": round(1000 * (min(deepeval_s) - min(single_s)) / len(convs), 1),
        "max_score_difference": worst,
    }
    emit(args.results_name, result)
    return result


if __name__ == "__main__":
    main()
