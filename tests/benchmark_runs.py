"""Running a benchmark script from a test, as a user would: `python benchmarks/SCRIPT ARGS` from the checkout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_benchmark(script: str, *args: str, results: Path, timeout: float) -> dict:
    """What benchmarks/`script` printed (its JSON), run with `args`; its results file goes to the folder
    `results` (a scratch folder: never over benchmarks/results/). A failed run fails the test with its stderr."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "ROLE_RUBRIC_RESULTS": str(results)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)
