"""Where every benchmark puts its figures: benchmarks/results/NAME.json, with the machine and the command.

Each benchmark still prints its JSON on stdout (the tests read it there); `write_results` also saves it,
wrapped with what is needed to trust and reproduce a number: the exact command, the date, the machine
(cores, CPU model, torch version) and the load at the end. The docs' results pages render their tables
from these files (docs/hooks.py), so a number in the docs is always one a benchmark wrote.

ROLE_RUBRIC_RESULTS=DIR sends the files elsewhere (the tests use it, so a small test run never replaces
the committed results); `--results-name NAME` (added by `add_results_argument`) names a variant, e.g. a
run on another dataset.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
_STARTED = time.time()


def add_results_argument(parser: argparse.ArgumentParser, default: str) -> None:
    """--results-name: the file name (without .json) under benchmarks/results/."""
    parser.add_argument(
        "--results-name", default=default, help=f"write benchmarks/results/NAME.json (default {default})"
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> dict[str, Any]:
    """The machine a figure was measured on."""
    import torch

    return {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def command() -> str:
    """The command line that reproduces the run, from the repository root."""
    script = Path(sys.argv[0])
    with contextlib.suppress(ValueError):  # a script outside the checkout keeps its path
        script = script.resolve().relative_to(Path(__file__).resolve().parents[1])
    return shlex.join(["python", str(script), *sys.argv[1:]])


def write_results(name: str, result: dict[str, Any]) -> Path:
    """Save `result` as benchmarks/results/NAME.json (or under $ROLE_RUBRIC_RESULTS) and say where."""
    out_dir = Path(os.environ.get("ROLE_RUBRIC_RESULTS") or RESULTS)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{name}.json"
    record = {
        "benchmark": name,
        "command": command(),
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": round(time.time() - _STARTED, 1),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "machine": machine(),
        "result": result,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)  # never a half-written results file
    print(f"{name}: wrote {path}", file=sys.stderr)
    return path


def emit(name: str, result: dict[str, Any], indent: int = 1) -> Path:
    """Print the benchmark's JSON on stdout (as before) and save it with its provenance."""
    print(json.dumps(result, indent=indent), flush=True)
    return write_results(name, result)
