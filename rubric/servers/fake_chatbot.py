"""The fake server's chatbot side (rubric/servers/fake.py answers a chat request that is no judge request with
it): a reply fixed by a hash of the conversation (`chatbot_reply`), and in the server's mode "tools" an agent's
first step, a call to the first tool offered (`chatbot_tool_call`), then the answer once the tool's result
comes back. The tests' instrumented chatbot talks to it. `chatbot_response` answers the Responses API
(POST /v1/responses) the same way: the same text for the same conversation, a `function_call` item for the
agent's first step, the conversation kept under the response's id for `previous_response_id`.
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


# The Responses API (POST /v1/responses) ------------------------------------------------------------------


def chatbot_response(body: dict[str, Any], stored: dict[str, list[dict[str, Any]]], *, tools: bool = False) -> dict:
    """The Responses API's answer to a chatbot's request: `instructions` and the `input` items (a string, or
    messages, function calls and function call outputs) after the conversation of `previous_response_id`
    (looked up in `stored`, where this response's conversation is put under its id, as OpenAI stores it).
    The text is chatbot_reply's for the same conversation; with tools=True a request that offers function
    tools and ends with the user's message gets a `function_call` item instead."""
    previous = body.get("previous_response_id")
    history = list(stored.get(previous, [])) if previous else []
    messages = history + response_input_messages(body.get("input"))
    instructions = body.get("instructions")
    seen = ([{"role": "system", "content": instructions}] if instructions else []) + messages
    digest = hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()
    offered = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    if tools and offered and messages and messages[-1].get("role") == "user":
        call = chatbot_tool_call(seen, {"function": {"name": offered[0].get("name", "tool")}})
        item = {
            "type": "function_call",
            "id": "fc_" + digest[:12],
            "call_id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"]["arguments"],
            "status": "completed",
        }
        said = {"role": "assistant", "content": None, "tool_calls": [call]}
    else:
        text = chatbot_reply(seen)
        item = {
            "type": "message",
            "id": "msg_" + digest[:12],
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
        }
        said = {"role": "assistant", "content": text}
    response_id = "resp_" + digest[:24]
    stored[response_id] = [*messages, said]
    prompt = "\n".join(text_of(m.get("content")) for m in seen)
    counts = usage(prompt, len(text_of(said["content"])) // 4 + 1)
    return {
        "id": response_id,
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": body.get("model", "fake"),
        "instructions": instructions,
        "previous_response_id": previous,
        "output": [item],
        "parallel_tool_calls": True,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "error": None,
        "incomplete_details": None,
        "metadata": {},
        "usage": {
            "input_tokens": counts["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": counts["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": counts["total_tokens"],
        },
    }


def response_input_messages(raw: Any) -> list[dict[str, Any]]:
    """The Responses API's `input` (a string, or a list of items) as chat messages: a message item keeps its
    role and text, a `function_call` is an assistant's tool call, a `function_call_output` a tool message."""
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    messages: list[dict[str, Any]] = []
    for item in raw if isinstance(raw, list) else []:
        kind = item.get("type", "message")
        if kind == "message":
            messages.append({"role": item.get("role", "user"), "content": text_of(item.get("content"))})
        elif kind == "function_call":
            function = {"name": item.get("name"), "arguments": item.get("arguments")}
            call = {"id": item.get("call_id"), "type": "function", "function": function}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "function_call_output":
            messages.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": item.get("output")})
    return messages
