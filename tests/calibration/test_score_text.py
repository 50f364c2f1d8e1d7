"""`score`'s per-turn rows carry the turn's text and sensibly rounded numbers."""

from __future__ import annotations

from calibration.api import AdherenceResult, TurnResult
from calibration.api.frames import results_frames
from rubric.conversations import conversations_from_records


def test_turn_rows_have_the_user_message_and_the_reply():
    convs = conversations_from_records(
        [
            {
                "conversation_id": "c1",
                "chatbot_role": "R",
                "turns": [{"user": "hi", "assistant": "hello"}, {"user": "a?", "assistant": "b."}],
            }
        ]
    )
    dist = {"overall": {1.0: 0.123456, 4.0: 0.876544}}
    turns = [TurnResult(t, dist, {"overall": 3.629632}, 0.8765438, True, 0.8765438, dist) for t in (0, 1)]
    result = AdherenceResult("c1", 0.8765438, True, 0.5, False, "continuous", True, "overall", 3.0, "all", turns)
    conv, rows = results_frames([result], convs)
    assert rows["user"].tolist() == ["hi", "a?"] and rows["assistant"].tolist() == ["hello", "b."]
    assert rows["adherence"].iloc[0] == 0.8765 and rows["expected_overall"].iloc[0] == 3.63
    assert conv["score"].iloc[0] == 0.8765
    _, bare = results_frames([result])
    assert "user" not in bare.columns


def test_violating_turns_are_named_as_indices_and_counted_beside_a_mean_success():
    """success is the mean score against the threshold: a conversation passes beside a turn below it,
    and the CSV says which turn (a 0-based index) and how many, in columns that cannot be read as one
    another."""
    good = {"overall": {1.0: 0.1, 4.0: 0.9}}
    bad = {"overall": {1.0: 0.8, 4.0: 0.2}}
    turns = [
        TurnResult(0, good, {"overall": 3.7}, 0.9, True, 0.9, good),
        TurnResult(1, bad, {"overall": 1.6}, 0.2, False, 0.2, bad),
        TurnResult(2, good, {"overall": 3.7}, 0.9, True, 0.9, good),
    ]
    result = AdherenceResult("c1", 2.0 / 3, True, 0.5, False, "continuous", True, "overall", 3.0, "all", turns)
    assert result.violating_turn_indices == [1] and result.success
    conv, _ = results_frames([result])
    row = conv.iloc[0]
    assert row["violating_turn_indices"] == "1" and row["violating_turn_count"] == 1 and bool(row["success"])
    assert "violating_turns" not in conv.columns
    assert "turn(s) [1] below the threshold" in result.reason
