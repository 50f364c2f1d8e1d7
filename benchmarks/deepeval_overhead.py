"""What deepeval adds to a role-rubric measurement: the bundled conversations scored by RoleAdherence directly
and by RoleRubricMetric inside deepeval's `evaluate` (async), with the same judge and a warm request cache, so
the difference is deepeval's and the metric's own work, not the judge's. Also checks that both give the same
session scores.

    DEEPEVAL_TELEMETRY_OPT_OUT=YES python benchmarks/deepeval_overhead.py [--limit 112] [--repeats 3]

Runs in a temporary working directory (deepeval writes `.deepeval/` there); prints JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # before deepeval is imported
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=112, help="conversations from data/role_adherence")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of each path (the best is kept)")
    args = ap.parse_args(argv)

    started = time.perf_counter()
    import deepeval
    from deepeval import evaluate
    from deepeval.evaluate.configs import DisplayConfig
    from deepeval.test_case import ConversationalTestCase, Turn

    import_s = time.perf_counter() - started
    from calibration.api import RoleAdherence
    from calibration.integrations.deepeval import RoleRubricMetric
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
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        adherence = RoleAdherence(judge="embedding", cache=Path(tmp) / "cache.sqlite")
        t0 = time.perf_counter()
        direct = adherence.measure_many(convs)  # cold: the judge answers every question, the cache fills
        cold_s = time.perf_counter() - t0
        direct_s, deepeval_s = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            direct = adherence.measure_many(convs)
            direct_s.append(time.perf_counter() - t0)
            metric = RoleRubricMetric(adherence=adherence)
            t0 = time.perf_counter()
            result = evaluate(test_cases=cases, metrics=[metric], display_config=quiet)
            deepeval_s.append(time.perf_counter() - t0)
        via = {t.name: t.metrics_data[0].score for t in result.test_results}
        worst = max(abs(via[r.conversation_id] - r.score) for r in direct)
    turns = sum(len(c.turns) for c in convs)
    return {
        "command": "python benchmarks/deepeval_overhead.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "deepeval": deepeval.__version__,
        "judge": "embedding (all-MiniLM-L6-v2), not calibrated",
        "conversations": len(convs),
        "assistant_turns": turns,
        "import_deepeval_s": round(import_s, 2),
        "cold_gather_s": round(cold_s, 2),
        "warm_direct_s": round(min(direct_s), 3),
        "warm_deepeval_evaluate_s": round(min(deepeval_s), 3),
        "deepeval_overhead_ms_per_conversation": round(1000 * (min(deepeval_s) - min(direct_s)) / len(convs), 1),
        "max_score_difference": worst,
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
