"""benchmarks/compare_judges.py end to end in a small configuration (slow: it calibrates four judges on the
LLM-Rubric anchors per draw): the JSON it prints and saves, checked for sense, not for the full run's figures."""

from __future__ import annotations

import pytest

from tests.test_benchmarks import ANCHORS, _run

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth"),
]

COPIES = {"shuffled-25", "shuffled-50", "shuffled-100", "mixed-50", "no-logprobs"}


def test_compare_judges_compares_the_real_judge_with_each_whole_judge_copy():
    out = _run(
        "compare_judges.py", "--anchors", str(ANCHORS), "--draws", "1", "--sizes", "20", "50", "--n-boot", "50",
        "--no-bundled", "--repeats", "2",
    )  # fmt: skip
    at = out["by_size"]["20"]
    assert set(at) == COPIES | {"Q7-real vs shuffled-50"} and len(at["mixed-50"]) == 9
    for per_q in at.values():
        for s in per_q.values():
            assert s["draws"] == 1 and s["label_multiplier"] > 0
            assert s["picks_real"] in (0.0, 1.0) and s["pooled_picks_real"] in (0.0, 1.0)
            assert s["whole_picks_real"] in (0.0, 1.0) and s["whole_real_better_held_out"] in (0.0, 1.0)
            assert 0 <= s["shrinkage_median"] <= 1
    for key in ("acceptance", "acceptance_pooled", "acceptance_informative", "acceptance_whole_judge"):
        acc = out[key]
        assert set(acc["failing"]) == {"50"} and acc["holds"] == (not acc["failing"]["50"])
        assert all(f["copy"] in COPIES for f in acc["failing"]["50"])
    # on all 223 dialogues the real judge's Q0 and Q7 (its most informative questions) beat the copies that
    # spoil half the dialogues, and those copies need more labelled conversations
    for copy in ("shuffled-50", "mixed-50"):
        for q in ("Q0", "Q7"):
            full = out["full_data"][copy][q]
            assert full["picks_ref"] and full["rmse_other_minus_ref"] > 0 and full["label_multiplier"] > 1.05
            assert full["interval"][0] <= full["rmse_other_minus_ref"] <= full["interval"][1]
            assert full["pooled_interval"][0] <= full["pooled_other_minus_ref"] <= full["pooled_interval"][1]
    # the information ceiling: with every dialogue labelled, the judge with no information is worse on Q0 and
    # Q7 (their intervals clear 0) and on the whole judge; the informative questions are those whose interval does
    ceiling = out["information"]
    assert {"Q0", "Q7"} <= set(ceiling["informative"])
    assert all(ceiling["questions"][q]["interval"][0] > 0 for q in ceiling["informative"])
    assert ceiling["whole_judge"]["interval"][0] > 0
    # the judge without log-probabilities (its sampled answers) is worse than the real one on the whole judge
    assert out["full_data"]["no-logprobs"]["Q0"]["whole_other_minus_ref"] > 0
