"""gather never sends a very long turn silently, and carries the fields it does not use into its copy of
conversations.jsonl unchanged."""

from __future__ import annotations

import json

from conftest import ROOT, make_conversations

from calibration.cli import main
from rubric.conversations import save_conversations
from rubric.schema import load_rubric
from tests.rubric.conftest import gather_overrides


def _with_a_long_turn(tmp_path, chars: int = 40_000):
    convs = make_conversations(2, turns=2)
    save_conversations(convs, tmp_path / "conversations.jsonl")
    lines = (tmp_path / "conversations.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["turns"][1]["assistant"] = "log line. " * (chars // 10)
    lines[1] = json.dumps(record)
    (tmp_path / "conversations.jsonl").write_text("\n".join(lines) + "\n")
    return record["conversation_id"]


def test_a_long_turn_is_refused_before_any_request(server, tmp_path, capsys):
    cid = _with_a_long_turn(tmp_path)
    code = main(["gather", *gather_overrides(server, tmp_path, "long_turns=refuse")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "1 of 4 turns are longer than long_turn_tokens=4000 estimated tokens" in err
    assert f"conversation {cid!r}, turn 1, ~100" in err and "conversations.jsonl: " in err  # 40,000 characters
    assert "raise long_turn_tokens=N" in err
    assert server.requests == 0


def test_a_long_turn_is_warned_about_with_its_count_and_cost(server, tmp_path, capsys):
    _with_a_long_turn(tmp_path)
    assert main(["gather", *gather_overrides(server, tmp_path)]) == 0
    err = capsys.readouterr().err
    warning = [line for line in err.splitlines() if line.startswith("warning: 1 of 4 turns")]
    assert len(warning) == 1, err
    # every question of the rubric repeats the whole turn: ~10,000 tokens each
    questions = len(load_rubric(ROOT / "conf/rubric/role_adherence.yaml").questions)
    tokens = int(warning[0].split("sends ~")[1].split(" ")[0])
    assert questions * 10_000 <= tokens <= questions * 11_000
    assert "(a local judge: no per-token price)" in warning[0]  # the fake judge is on 127.0.0.1


def test_the_cost_estimate_uses_the_judges_price():
    from rubric.judge.long_turns import _cost
    from rubric.judge.settings import JudgeConfig

    priced = JudgeConfig(base_url="https://api.example.com/v1", price_input_per_mtok=2.5)
    assert _cost(400_000, priced) == " (~$1.0000 at judge.price_input_per_mtok=2.5)"
    assert "no judge.price_input_per_mtok" in _cost(1, JudgeConfig(base_url="https://api.example.com/v1"))


def test_the_limit_is_configurable(server, tmp_path, capsys):
    _with_a_long_turn(tmp_path, chars=2_000)
    assert main(["gather", *gather_overrides(server, tmp_path, "long_turns=refuse")]) == 0  # 500 tokens: under 4000
    assert (
        main(
            [
                "gather",
                *gather_overrides(
                    server, tmp_path, "long_turns=refuse", "long_turn_tokens=400", f"out={tmp_path / 'o2'}"
                ),
            ]
        )
        == 2
    )
    assert "longer than long_turn_tokens=400" in capsys.readouterr().err


def test_unknown_fields_are_carried_into_the_copy_unchanged(server, tmp_path):
    records = [
        {
            "conversation_id": "a",
            "chatbot_role": "Bank support.",
            "metadata": {"channel": "web", "score": 0.5},
            "turns": [{"user": "hi", "assistant": "hello", "timestamp": "2024-05-01T10:00:00Z", "latency_ms": 812}],
        },
        {
            "conversation_id": "b",
            "chatbot_role": "Bank support.",
            "tags": ["vip"],
            "messages": [
                {"role": "user", "content": "card lost", "ts": 1},
                {"role": "assistant", "content": "I can block it.", "ts": 2},
            ],
        },
    ]
    (tmp_path / "conversations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["gather", *gather_overrides(server, tmp_path)]) == 0
    copied = [json.loads(line) for line in (tmp_path / "out" / "conversations.jsonl").read_text().splitlines()]
    assert copied == records
    # and the copy is a dataset that reads back the same
    assert main(["gather", *gather_overrides(server, tmp_path, f"conversations={tmp_path / 'out'}")]) == 0
