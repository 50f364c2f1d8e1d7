"""The test chatbot and the fake server's chatbot replies: a reply fixed by the conversation, a tool call when
asked, and the judge's requests answered exactly as before (a judge request is never taken for a chatbot's)."""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import openai

from rubric.conversations import Conversation, Item, Turn
from rubric.judge.prompts import render_prompt, render_reason_prompt
from rubric.schema import load_rubric
from rubric.servers.fake import FakeOpenAI
from rubric.servers.fake_chatbot import chatbot_reply
from tests.traces.chatbot import SCRIPTS, chat, chat_responses, track_parcel

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def chatbot_server() -> Iterator[tuple[FakeOpenAI, openai.OpenAI]]:
    """The fake server with its chatbot's tool calls on, keeping the request bodies, and a client of it."""
    with FakeOpenAI() as server:
        server.modes.add("tools")
        server.keep_bodies = True
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)
        try:
            yield server, client
        finally:
            client.close()


def _post(server: FakeOpenAI, body: dict) -> dict:
    request = urllib.request.Request(
        server.base_url + "/chat/completions", data=json.dumps(body).encode(), headers={"Content-Type": "x"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as reply:
        return json.loads(reply.read())


def test_the_chatbot_has_its_conversations_and_the_agent_calls_its_tool_once_per_message():
    with chatbot_server() as (server, client):
        first = chat(client)
        again = chat(client)
    assert first == again  # the replies are fixed by the conversation
    assert [c["conversation_id"] for c in first] == [s.conversation_id for s in SCRIPTS]
    replies = [t["assistant"] for c in first for t in c["turns"]]
    assert len(set(replies)) == len(replies)  # every message answered on its own
    agent = first[2]
    for turn in agent["turns"]:
        call, result = turn["tools"]
        assert call["tool_calls"][0]["function"]["name"] == "track_parcel"
        assert result["content"] == track_parcel(turn["user"]) and result["content"] in turn["assistant"]
    # each request carries the whole history, the role first: the agent's last call holds the role, the first
    # message's four (user, tool call, tool result, answer) and the second's three so far; 9 calls, 7 turns
    assert len(server.bodies) == 2 * 9
    last = server.bodies[8]["messages"]
    assert last[0] == {"role": "system", "content": SCRIPTS[2].role}
    assert [m["role"] for m in last[1:]] == ["user", "assistant", "tool", "assistant", "user", "assistant", "tool"]


def test_judge_requests_are_answered_as_a_judge_would_not_as_a_chatbot():
    rubric = load_rubric(ROOT / "conf" / "rubric" / "role_adherence.yaml")
    conv = Conversation("c", "A support bot.", (Turn("Hi there", "Hello! How can I help?"),))
    item = Item(conv, 0)
    answer = render_prompt(item, rubric.questions[0])
    reason = render_reason_prompt(item)
    with FakeOpenAI() as server:
        got = _post(server, {"model": "m", "messages": list(answer.messages), "max_tokens": 1})
        why = _post(server, {"model": "m", "messages": list(reason.messages), "max_tokens": 120})
        bot = _post(server, {"model": "m", "messages": [{"role": "user", "content": "Hi there"}]})
    assert got["choices"][0]["message"]["content"].strip() in answer.codes
    assert why["choices"][0]["message"]["content"] == "The reply stays within the role and offers a next step."
    assert bot["choices"][0]["message"]["content"] == chatbot_reply([{"role": "user", "content": "Hi there"}])


def test_the_responses_api_answers_after_the_stored_history_as_chat_completions_would():
    """/v1/responses: the same replies as Chat Completions for the same conversation (the server keeps each
    response's history for previous_response_id), a function_call item for the agent, then its answer."""
    with chatbot_server() as (server, client):
        on_chat = chat(client)
        on_responses = chat_responses(client)
    for a, b in zip(on_chat, on_responses, strict=True):
        assert [t["user"] for t in a["turns"]] == [t["user"] for t in b["turns"]]
        assert [t["assistant"] for t in a["turns"]] == [t["assistant"] for t in b["turns"]]
        assert [len(t.get("tools", [])) for t in a["turns"]] == [len(t.get("tools", [])) for t in b["turns"]]
    asked = server.bodies[9:]  # the Responses API requests: only what is new after the previous response
    assert all("messages" not in body and body["instructions"] for body in asked)
    assert [len(body["input"]) for body in asked] == [1] * 9
    assert [("previous_response_id" in body) for body in asked] == [
        False,
        True,
        True,
        False,
        True,
        False,
        True,
        True,
        True,
    ]
    agent = on_responses[2]["turns"][0]["tools"]
    assert agent[0]["tool_calls"][0]["id"] == agent[1]["tool_call_id"]
