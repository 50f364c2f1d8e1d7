"""The active-labelling and decision benchmarks run end to end in their smallest configuration (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not ANCHORS.exists(), reason="needs the LLM-Rubric data")]


def _run(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), "--anchors", str(ANCHORS), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "ROLE_RUBRIC_RESULTS": tempfile.mkdtemp()},  # never over benchmarks/results/
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_active_labelling_quick_prints_curves_and_savings():
    out = _run("active_labelling.py", "--quick")
    strategies = out["strategies"]
    assert set(strategies) == {"random", "bald", "bald+diversity"}
    for s in strategies.values():
        assert s["share"][0] == pytest.approx(0.1, abs=0.01) and s["share"][-1] == 1.0
        assert len(s["rmse_mean"]) == len(s["share"]) == len(s["nll_mean"])
    # every strategy ends on the whole pool, so on the very same model as random
    assert {s["rmse_mean"][-1] for s in strategies.values()} == {out["random_full_rmse"]}
    assert strategies["random"]["rmse_mean"][-1] < strategies["random"]["rmse_mean"][0] + 0.05


def test_decide_risk_prints_the_risk_coverage_table():
    out = _run("decide_risk.py", "--members", "2", "--splits", "5")
    level = out["levels"]["0.1"]
    assert level["splits"] == 5 and 0 <= level["coverage_mean"] <= 1
    coverages = [out["levels"][k]["coverage_mean"] for k in sorted(out["levels"], key=float)]
    assert coverages == sorted(coverages)
