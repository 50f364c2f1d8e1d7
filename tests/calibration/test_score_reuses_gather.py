"""`score` after `gather`: the judge is not asked again about a turn it already answered. score's request cache
defaults to the cache of the gathered folder its calibrator was trained on; requests are counted on the
project's own OpenAI-protocol judge server."""

from __future__ import annotations

from calibration.cli import main
from rubric.servers.fake import FakeOpenAI
from tests.publish.scored import write_conversations, write_labels

TRAIN = ["train.ensemble=1", "train.pretrain_steps=20", "train.finetune_steps=20"]


def test_score_after_gather_asks_the_judge_nothing_it_already_asked(tmp_path, capsys):
    conversations = write_conversations(tmp_path / "import" / "conversations.jsonl", n=6, turns=2)
    data, model = tmp_path / "data", tmp_path / "model"
    with FakeOpenAI() as server:
        judge = ["judge=fake", f"judge.base_url={server.base_url}", "progress=false"]
        assert main(["gather", f"conversations={conversations}", f"out={data}", *judge]) == 0
        gathered = server.requests
        write_labels(data)
        assert main(["train", f"data={data}", f"out={model}", *TRAIN]) == 0
        score = ["score", f"conversations={conversations}", f"calibrator={model}", *judge]
        capsys.readouterr()
        assert main([*score, f"out={tmp_path / 'scores' / 'scores.csv'}"]) == 0
        said = capsys.readouterr().out.splitlines()
        again = server.requests - gathered
        assert main([*score, f"out={tmp_path / 'own' / 'scores.csv'}", f"cache={tmp_path / 'own.sqlite'}"]) == 0
        own = server.requests - gathered - again
    assert gathered == 6 * 2 * 5  # 6 conversations, 2 turns, 5 questions: every pair once
    assert again == 0  # score read every answer from gather's cache
    assert own == gathered  # with a cache of its own (cache=), it asks them all again
    assert f"score: reusing the judge's answers gather cached in {data / 'cache.sqlite'} (cache= names another)" in said
    scored = (tmp_path / "scores" / "scores.csv").read_text(encoding="utf-8")
    assert scored == (tmp_path / "own" / "scores.csv").read_text(encoding="utf-8")  # the same answers, same scores
