"""The conversations loader: both forms, and errors that name the line."""

from __future__ import annotations

import json

import pytest

from rubric.conversations import iter_items, load_conversations, save_conversations
from rubric.errors import InputError

ROLE = "A bank's support agent for card questions."


def write(tmp_path, lines):
    path = tmp_path / "conversations.jsonl"
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_turn_form_and_message_form_load_the_same(tmp_path):
    turns = {
        "conversation_id": "a",
        "chatbot_role": ROLE,
        "turns": [
            {"user": "hi", "assistant": "hello", "reference": "Hello!"},
            {"user": "card?", "assistant": "sure"},
        ],
    }
    messages = {
        "conversation_id": "b",
        "messages": [
            {"role": "system", "content": ROLE},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "reference": "Hello!"},
            {"role": "user", "content": "card?"},
            {"role": "assistant", "content": "sure"},
        ],
    }
    a, b = load_conversations(write(tmp_path, [turns, messages]))
    assert a.turns == b.turns and a.chatbot_role == b.chatbot_role == ROLE
    assert a.turns[0].reference == "Hello!"
    assert [i.key for i in iter_items([a, b])] == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]
    assert [i.key for i in iter_items([a], "conversation")] == [("a", None)]


def test_round_trip(tmp_path):
    convs = load_conversations(
        write(
            tmp_path,
            [{"conversation_id": "x", "chatbot_role": ROLE, "turns": [{"user": "u", "assistant": "r"}]}],
        )
    )
    out = save_conversations(convs, tmp_path / "copy.jsonl")
    assert load_conversations(out) == convs


GOOD = {"conversation_id": "ok", "chatbot_role": ROLE, "turns": [{"user": "u", "assistant": "a"}]}


@pytest.mark.parametrize(
    ("line", "row", "match"),
    [
        ("{not json", 2, "malformed JSON"),
        ({"conversation_id": "c", "turns": [{"user": "u", "assistant": "a"}]}, 2, "no chatbot_role"),
        ({"conversation_id": "c", "chatbot_role": ROLE, "turns": []}, 2, "has no turns"),
        (
            {"conversation_id": "c", "chatbot_role": ROLE, "turns": [{"assistant": "a"}]},
            2,
            "without a preceding user",
        ),
        (
            {
                "conversation_id": "c",
                "chatbot_role": ROLE,
                "messages": [{"role": "assistant", "content": "hi"}],
            },
            2,
            "without a preceding user",
        ),
        (
            {"conversation_id": "ok", "chatbot_role": ROLE, "turns": [{"user": "u", "assistant": "a"}]},
            2,
            "duplicate",
        ),
        ({"chatbot_role": ROLE, "turns": [{"user": "u", "assistant": "a"}]}, 2, "missing conversation_id"),
        (
            {"conversation_id": "c", "chatbot_role": ROLE, "turns": [{"user": "u", "assistant": "  "}]},
            2,
            "no assistant",
        ),
        (  # not text: said so, not "without a preceding user message"
            {"conversation_id": "c", "chatbot_role": ROLE, "turns": [{"user": 5, "assistant": "a"}]},
            2,
            r"turn 0: \"user\" is a number \(5\), not text\. Fix: write it as a string",
        ),
        (
            {"conversation_id": "c", "chatbot_role": ROLE, "turns": [{"user": "u", "assistant": {"text": "a"}}]},
            2,
            r"turn 0: \"assistant\" is an object \(\{\"text\": \"a\"\}\), not text",
        ),
        (
            {
                "conversation_id": "c",
                "chatbot_role": ROLE,
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
                    {"role": "assistant", "content": "a"},
                ],
            },
            2,
            r"message 0 \(user\): its content is a list \(content parts such as an image\?\), not text",
        ),
    ],
)
def test_bad_lines_name_file_and_line(tmp_path, line, row, match):
    path = write(tmp_path, [GOOD, line])
    with pytest.raises(InputError, match=match) as err:
        load_conversations(path)
    assert err.value.row == row and err.value.path == str(path)
    assert f"row {row}" in str(err.value)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(InputError, match="not found"):
        load_conversations(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no conversations"):
        load_conversations(tmp_path / "empty.jsonl")
