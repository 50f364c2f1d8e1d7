"""The fake server's chatbot side (rubric/servers/fake.py answers a chat request that is no judge request with
it): a reply fixed by a hash of the conversation (`chatbot_reply`), and in the server's mode "tools" an agent's
first step, a call to the first tool offered (`chatbot_tool_call`), then the answer once the tool's result
comes back. The tests' instrumented chatbot talks to it.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

_OPENINGS = ("Thanks for asking about", "Happy to help with", "Let me look into", "Good question on")
_NEXT_STEPS = (
    "Could you share your order number so I can check?",
    "Is there anything else I can do for you today?",
    "I can walk you through the next step if you like.",
    "Shall I open a ticket with the team for you?",
)


def text_of(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts (None for a tool-calling turn)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def chatbot_reply(messages: list[dict[str, Any]]) -> str:
    """The fake chatbot's answer to a conversation: fixed by a hash of every message so far, quoting the
    user's last message (or the tool result it was given), so different conversations get different replies.

    >>> chatbot_reply([{"role": "user", "content": "Where is my parcel?"}])
    'Good question on "Where is my parcel". Shall I open a ticket with the team for you?'
    """
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return f"The lookup says: {text_of(last.get('content'))}. {_NEXT_STEPS[digest[1] % len(_NEXT_STEPS)]}"
    user = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    topic = " ".join(user.split())[:60].rstrip(" ?!.,")
    return f'{_OPENINGS[digest[0] % len(_OPENINGS)]} "{topic}". {_NEXT_STEPS[digest[1] % len(_NEXT_STEPS)]}'


def chatbot_tool_call(messages: list[dict[str, Any]], tool: dict[str, Any]) -> dict[str, Any]:
    """An agent's first step: a call to `tool` (an OpenAI tools entry) with the user's last message as its
    query, its id fixed by a hash of the conversation."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    user = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    name = tool.get("function", {}).get("name", "tool")
    return {
        "id": f"call_{digest[:12]}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps({"query": user})},
    }


def chatbot_completion(body: dict[str, Any], prompt: str, *, tools: bool = False) -> dict[str, Any]:
    """The chat completion answering a chatbot's request (no judge asked): text fixed by the conversation, or,
    with tools=True (the server's mode "tools"), a call to the first tool offered when the request ends with the
    user's message."""
    messages = body.get("messages", [])
    offered = body.get("tools") or []
    message: dict[str, Any] = {"role": "assistant", "content": chatbot_reply(messages)}
    finish = "stop"
    if tools and offered and messages and messages[-1].get("role") == "user":
        message = {"role": "assistant", "content": None, "tool_calls": [chatbot_tool_call(messages, offered[0])]}
        finish = "tool_calls"
    return {
        "id": "chatcmpl-fake-" + hashlib.sha256(prompt.encode()).hexdigest()[:12],
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "finish_reason": finish, "message": message, "logprobs": None}],
        "usage": usage(prompt, len(text_of(message["content"])) // 4 + 1),
    }


def usage(prompt: str, completion: int) -> dict[str, int]:
    """The token counts of a reply, as OpenAI reports them (a prompt token: four characters)."""
    p = len(prompt) // 4
    return {"prompt_tokens": p, "completion_tokens": completion, "total_tokens": p + completion}
