"""benchmarks/compare_judges.py end to end in a small configuration (slow: it calibrates four judges on the
LLM-Rubric anchors per draw): the JSON it prints and saves, checked for sense, not for the full run's figures."""

from __future__ import annotations

import pytest

from tests.test_benchmarks import ANCHORS, _run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth"),
]


def test_compare_judges_scores_its_picks_against_held_out_dialogues():
    out = _run("compare_judges.py", "--anchors", str(ANCHORS), "--draws", "1", "--sizes", "20", "--n-boot", "50")
    at = out["by_size"]["20"]
    overall = at["overall"]
    assert overall["draws"] == 9 and 0 <= overall["picks_held_out_best"] <= 1 and overall["held_out_regret"] >= 0
    assert set(at["pairwise_real_vs_copy"]) == {"shuffled-50", "mixed-50", "shuffled-100"}
    full = out["full_data"]
    # on all 223 dialogues the real judge's Q0 and Q7 (its most informative questions) beat every copy
    for q in ("Q0", "Q7"):
        assert full["pick"][q] == "real"
        assert all(full["rmse"][q]["real"] < r for name, r in full["rmse"][q].items() if name != "real")
        assert full["label_multiplier_vs_pick"][q]["shuffled-100"]["multiplier"] > 1.05
