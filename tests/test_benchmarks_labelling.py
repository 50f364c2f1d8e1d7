"""The active-labelling and decision benchmarks run end to end in their smallest configuration (slow)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.benchmark_runs import run_benchmark

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not ANCHORS.exists(), reason="needs the LLM-Rubric data")]


def _run(script: str, *args: str) -> dict:
    return run_benchmark(script, "--anchors", str(ANCHORS), *args, results=Path(tempfile.mkdtemp()), timeout=900)


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
