"""`gather mode=batch` at scale against the fake judge's Batch API; prints JSON.

    python benchmarks/batch_gather.py [--conversations 2000] [--turns 5] [--results-name batch_gather]

2,000 conversations x 5 turns x the 5-question rubric = 50,000 requests by default (the OpenAI Batch
API's limit per file). The fake judge (rubric/servers/fake.py) runs in its own process, as a real
endpoint would. Phases, each timed (wall and this process's CPU): writing the batch files
(`submit=false`), submitting them and waiting (upload, create, poll every 0.2 s, download, read the
results into the cache, write llm.csv), reading the same results again from a file as for vLLM's runner
(`results=`, into a fresh out folder), and a rerun from the cache. The batch file's size says where the
200 MB limit per file falls for this rubric. The JSON goes to stdout and benchmarks/results/NAME.json
(benchmarks/_results.py); the gathers' own lines are kept off stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from calibration.cli import main as cli_main  # noqa: E402
from rubric.conversations import Conversation, Turn, save_conversations  # noqa: E402

ROLE = "Customer-support agent for a bank: account inquiries, transactions and cards only; never investment advice."


def make_conversations(n: int, turns: int) -> list[Conversation]:
    return [
        Conversation(
            f"c{i}",
            ROLE,
            tuple(
                Turn(
                    f"Question {j} of conversation {i} about my card.",
                    f"Reply {j}: let me check card {i}-{j}.",
                )
                for j in range(turns)
            ),
        )
        for i in range(n)
    ]


def main(argv: list[str]) -> int:
    """The CLI with its status lines kept off stdout, which holds the JSON."""
    with contextlib.redirect_stdout(io.StringIO()):
        return cli_main(argv)


def timed(argv: list[str]) -> dict[str, float]:
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    code = main(argv)
    after = resource.getrusage(resource.RUSAGE_SELF)
    assert code == 0, f"exit {code}"
    return {
        "wall_s": round(time.perf_counter() - start, 1),
        "cpu_s": round(after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime, 1),
    }


def run(conversations: int, turns: int) -> dict:
    server = subprocess.Popen(
        [sys.executable, "-m", "rubric.servers.fake", "--latency", "0", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            save_conversations(make_conversations(conversations, turns), root / "c.jsonl")
            base = [
                f"conversations={root / 'c.jsonl'}",
                "judge=fake",
                f"judge.base_url=http://127.0.0.1:{port}/v1",
                "progress=false",
                "batch.poll_s=0.2",
                "mode=batch",
            ]
            out = [f"out={root / 'out'}"]
            phases = {"write_files": timed(["gather", *base, *out, "submit=false"])}
            files = sorted((root / "out/batch").glob("input-*.jsonl"))
            size = sum(p.stat().st_size for p in files)
            phases["submit_wait_read"] = timed(["gather", *base, *out])
            results = root / "out/batch/input-000.output.jsonl"
            again = [f"out={root / 'again'}", f"cache={root / 'again.sqlite'}"]
            main(["gather", *base, *again, "submit=false"])
            phases["read_results_file"] = timed(["gather", *base, *again, f"results={results}"])
            phases["rerun_from_cache"] = timed(["gather", *base, *out])
            same = (root / "out/llm.csv").read_bytes() == (root / "again/llm.csv").read_bytes()
    finally:
        server.terminate()
        server.wait()
    requests = conversations * turns * 5
    return {
        "requests": requests,
        "batch_files": len(files),
        "batch_bytes": size,
        "bytes_per_request": round(size / requests),
        "requests_per_200mb_file": int(200e6 / (size / requests)),
        "phases": phases,
        "results_file_llm_csv_identical": same,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--turns", type=int, default=5)
    add_results_argument(parser, "batch_gather")
    a = parser.parse_args()
    emit(a.results_name, run(a.conversations, a.turns))
