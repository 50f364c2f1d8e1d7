"""Gather throughput against a local OpenAI-protocol server with a fixed latency; prints JSON.

    python benchmarks/gather_throughput.py [--turns 1000] [--latency 0.05] [--concurrency 32 64]
        [--processes auto] [--http-client aiohttp] [--repeats 3]

1,000 turns x 5 questions by default. For each setting (concurrency x --processes x --http-client;
processes: auto, or a number of worker processes, see rubric/judge/parallel.py; http_client: see
rubric/judge/http.py), run --repeats times, interleaved: the processes used, the median wall time (and each
one), the ideal (requests x latency / concurrency) and their ratio. Then a rerun from the SQLite cache (0 requests expected) and
the share of each turn's prompt that its five questions have in common (what a server prefix cache can
reuse).
The server (tests/rubric/openai_server.py) runs in its own process, as a real endpoint would.
`client_cpu_ms_per_request` is the CPU time per request of the gathering process and its worker
processes together (`parent_cpu_ms_per_request`: the gathering process alone): when requests_per_s x
that approaches 1000 ms x processes, the client is CPU-bound and more concurrency cannot help.
`other_processes_cpu_s` is the CPU time the rest of the machine used during the run (Linux): well above
0, the figures are not from a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from _results import add_results_argument, emit  # noqa: E402  (benchmarks/_results.py)

from rubric import Conversation, Turn, gather, iter_items, load_rubric, render_prompt  # noqa: E402
from rubric.judge.http import HTTP_CLIENTS  # noqa: E402

USER = "Hi, I have a question about a payment of {n} pounds to a shop on my statement from last week. Can you check it?"
REPLY = (
    "I'm sorry for the worry. I can see the payment of {n} pounds on your statement; it was made with your card "
    "ending 4411. If you don't recognise it, I can freeze the card and open a dispute for you right now."
)
ROLE = (
    "You are Nova, the customer-support assistant of a retail banking app. Scope: account inquiries, transaction "
    "history and card management. Tone: professional, empathetic and concise. Never give financial or "
    "investment advice. Always end with a concrete next step."
)


def conversations(turns: int, per_conversation: int = 5) -> list[Conversation]:
    n_conv = turns // per_conversation
    return [
        Conversation(
            f"b{i:04d}",
            ROLE,
            tuple(Turn(USER.format(n=i * 10 + j), REPLY.format(n=i * 10 + j)) for j in range(per_conversation)),
        )
        for i in range(n_conv)
    ]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/rubric/openai_server.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = proc.stdout.readline().strip()
    return proc, f"http://127.0.0.1:{port}/v1"


def judge(base_url: str, concurrency: int, processes: int | str = "auto", http_client: str = "aiohttp") -> dict:
    return {
        "http_client": http_client,
        "backend": "chat",
        "model": "bench",
        "base_url": base_url,
        "api_key": "EMPTY",
        "base_url_env": None,
        "api_key_env": None,
        "concurrency": concurrency,
        "processes": processes,
        "timeout": 30.0,
        "backoff": 0.05,
    }


def shared_prefix_share(convs: list[Conversation], rubric) -> float:
    """Mean over turns of (common prefix of the five prompts) / (mean prompt length), in characters."""
    shares = []
    for item in iter_items(convs):
        texts = ["\n".join(m["content"] for m in render_prompt(item, q).messages) for q in rubric.questions]
        prefix = os.path.commonprefix(texts)
        shares.append(len(prefix) / (sum(map(len, texts)) / len(texts)))
    return sum(shares) / len(shares)


def _machine_busy_s() -> float:
    """CPU seconds all processes on the machine have used since boot (Linux; 0 elsewhere)."""
    try:
        with open("/proc/stat") as fh:
            ticks = [int(x) for x in fh.readline().split()[1:9]]
    except OSError:  # pragma: no cover
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _process_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:  # pragma: no cover
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_with_children() -> float:
    """CPU seconds of this process plus its finished (waited-for) child processes; not the server's,
    which is still running."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(convs, rubric, proc, url: str, latency: float, setting: tuple, cache: Path) -> dict:
    """One gather with one (concurrency, processes, http_client) setting, from an empty cache."""
    c, p, h = setting
    t, cpu, own = time.perf_counter(), _cpu_with_children(), time.process_time()
    busy, server = _machine_busy_s(), _process_cpu_s(proc.pid)
    res = gather(convs, rubric, judge(url, c, p, h), cache=cache)
    wall, cpu = time.perf_counter() - t, _cpu_with_children() - cpu
    own = time.process_time() - own
    server = _process_cpu_s(proc.pid) - server
    others = _machine_busy_s() - busy - cpu - server
    n = res.summary.http_requests
    return {
        "processes": res.summary.processes,
        "requests": n,
        "wall_s": wall,
        "ideal_s": n * latency / c,
        "client_cpu_ms_per_request": cpu / n * 1000,
        "parent_cpu_ms_per_request": own / n * 1000,
        "server_cpu_ms_per_request": server / n * 1000,
        "other_processes_cpu_s": max(others, 0.0),
        "failures": res.summary.failures,
    }


def summarise(setting: tuple, runs: list[dict]) -> dict:
    """Medians over the repeats of one setting (walls listed too)."""
    c, p, h = setting
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k not in ("processes", "requests")}
    return {
        "concurrency": c,
        "processes_setting": p,
        "http_client": h,
        "processes": runs[0]["processes"],
        "requests": runs[0]["requests"],
        "wall_s": round(med["wall_s"], 3),
        "wall_s_each": [round(r["wall_s"], 3) for r in runs],
        "ideal_s": round(med["ideal_s"], 3),
        "ratio": round(med["wall_s"] / med["ideal_s"], 3),
        "requests_per_s": round(runs[0]["requests"] / med["wall_s"], 1),
        **{k: round(med[k], 3) for k in med if k.endswith("per_request")},
        "other_processes_cpu_s": round(med["other_processes_cpu_s"], 2),
        "failures": max(r["failures"] for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--processes", nargs="+", default=["auto"], help="auto and/or numbers of worker processes")
    parser.add_argument(
        "--http-client",
        nargs="+",
        default=["aiohttp"],
        choices=HTTP_CLIENTS,
        help="judge.http_client value(s)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs of each setting, interleaved; medians")
    add_results_argument(parser, "gather_throughput")
    args = parser.parse_args()
    rubric = load_rubric(ROOT / "conf/rubric/role_adherence.yaml")
    convs = conversations(args.turns)
    settings = [
        (c, p if p == "auto" else int(p), h) for c in args.concurrency for p in args.processes for h in args.http_client
    ]
    proc, url = start_server(args.latency)
    out: dict = {
        "turns": args.turns,
        "questions": len(rubric.questions),
        "latency_s": args.latency,
        "cpus": os.cpu_count(),
        "repeats": args.repeats,
        "load_avg_1m_before": os.getloadavg()[0],
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            gather(conversations(20), rubric, judge(url, 8))  # warm up imports and the server
            runs: dict[tuple, list[dict]] = {s: [] for s in settings}
            for rep in range(args.repeats):  # interleaved, so a busy spell hits every setting alike
                for s in settings:
                    cache = Path(tmp) / f"{rep}-{'-'.join(map(str, s))}.sqlite"
                    runs[s].append(measure(convs, rubric, proc, url, args.latency, s, cache))
                    print(f"{s}: {runs[s][-1]['wall_s']:.2f} s", file=sys.stderr, flush=True)
            out["runs"] = [summarise(s, runs[s]) for s in settings]
            t = time.perf_counter()
            again = gather(
                convs,
                rubric,
                judge(url, *settings[0]),
                cache=Path(tmp) / f"0-{'-'.join(map(str, settings[0]))}.sqlite",
            )
            out["cache_rerun"] = {
                "pairs": again.summary.pairs,
                "cached": again.summary.cached,
                "requests": again.summary.http_requests,
                "wall_s": round(time.perf_counter() - t, 3),
            }
    finally:
        proc.terminate()
        proc.wait()
    out["shared_prefix_share"] = round(shared_prefix_share(convs, rubric), 3)
    out["load_avg_1m_after"] = os.getloadavg()[0]
    emit(args.results_name, out, indent=2)


if __name__ == "__main__":
    main()
