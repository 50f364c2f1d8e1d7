"""A small multi-turn support chatbot, for the trace-import tests: the `openai` client against the project's
own OpenAI-protocol server (rubric/servers/fake.py, whose chatbot replies are fixed by the conversation).

Each user message is one request carrying the whole history, the chatbot's role as the system message, as
a chatbot built on the Chat Completions API sends it. One conversation is an agent's: it offers a tool, and
for each user message the model first calls the tool, then answers from its result (two calls, one turn).
`chat()` returns what the conversations were, in the form an import must give back.

`chat_responses()` has the same conversations on the OpenAI Responses API, as OpenAI suggests for a new
chatbot: the role as `instructions` on every request, each request carrying only what is new (the user's
message, or the tool's result) after `previous_response_id`, the server keeping the history; the agent's
tool is a function tool, its call a `function_call` item answered by a `function_call_output`.

Instrumentations pass the conversation id each their own way; `chat(scope=...)` wraps the handling of each
user message in `scope(conversation_id)` (a context manager), where the capture (otlp_capture.py) sets it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

SHOP = (
    "You are Sam, the support assistant of Parcelo, a parcel delivery company. Scope: tracking parcels, "
    "delivery times, redelivery and returns. Tone: friendly and brief. Never give legal advice."
)
TUTOR = (
    "You are Pip, a maths tutor for secondary-school students. Scope: school mathematics. "
    "Tone: patient and encouraging. Never do a student's graded homework for them."
)

TRACK_PARCEL = {
    "type": "function",
    "function": {
        "name": "track_parcel",
        "description": "Where a parcel is now and when it is expected.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
}


@dataclass(frozen=True)
class Script:
    """One conversation the chatbot has: its id, role, the user's messages in order, and whether it is the
    agent that calls a tool before answering."""

    conversation_id: str
    role: str
    user_messages: tuple[str, ...]
    agent: bool = False


SCRIPTS = (
    Script(
        "conv-shop-1",
        SHOP,
        ("Hi, my parcel has not arrived yet.", "It was sent last Monday from Leeds.", "Thanks, that helps!"),
    ),
    Script("conv-tutor-1", TUTOR, ("How do I add fractions with different denominators?", "What is 1/3 + 1/4?")),
    Script(
        "conv-shop-agent",
        SHOP,
        ("Where is parcel PX-1042?", "Can it be delivered to my neighbour instead?"),
        agent=True,
    ),
)


def track_parcel(query: str) -> str:
    """The agent's tool: a fixed answer, so that the final reply (which quotes it) is known."""
    return f"parcel for '{query}' is out for delivery, expected by 18:00"


@contextlib.contextmanager
def no_scope(conversation_id: str) -> Iterator[None]:
    yield


def chat(
    client: Any,
    scripts: tuple[Script, ...] = SCRIPTS,
    *,
    scope: Callable[[str], contextlib.AbstractContextManager[Any]] = no_scope,
    model: str = "support-bot",
) -> list[dict[str, Any]]:
    """Have every scripted conversation with the model behind `client` (an `openai.OpenAI`); return them as
    conversation records: {"conversation_id", "chatbot_role", "turns": [{"user", "assistant", "tools"?}]},
    "tools" holding the tool call and its result (in the history, not judged)."""
    records = []
    for script in scripts:
        history: list[dict[str, Any]] = [{"role": "system", "content": script.role}]
        turns = []
        for user in script.user_messages:
            history.append({"role": "user", "content": user})
            with scope(script.conversation_id):
                answer, tools = _answer(client, history, model=model, agent=script.agent)
            turns.append({"user": user, "assistant": answer, **({"tools": tools} if tools else {})})
        records.append({"conversation_id": script.conversation_id, "chatbot_role": script.role, "turns": turns})
    return records


def _answer(client: Any, history: list[dict[str, Any]], *, model: str, agent: bool) -> tuple[str, list[dict]]:
    """One user message handled: one call, or (the agent) a tool call, the tool's result and a second call.
    Appends what was said to `history`; returns the answer and the tool messages in between."""
    extra = {"tools": [TRACK_PARCEL]} if agent else {}
    tools: list[dict[str, Any]] = []
    for _ in range(3):  # an agent's loop, bounded: the server answers after one tool round
        reply = client.chat.completions.create(model=model, messages=history, temperature=0.0, **extra)
        message = reply.choices[0].message
        if not message.tool_calls:
            history.append({"role": "assistant", "content": message.content})
            return message.content, tools
        calls = [c.model_dump(exclude_none=True) for c in message.tool_calls]
        said: list[dict[str, Any]] = [{"role": "assistant", "content": None, "tool_calls": calls}]
        for call in message.tool_calls:
            result = track_parcel(json.loads(call.function.arguments)["query"])
            said.append({"role": "tool", "tool_call_id": call.id, "content": result})
        history.extend(said)
        tools.extend(said)
    raise RuntimeError("the model kept calling tools")


TRACK_PARCEL_FUNCTION = {"type": "function", **TRACK_PARCEL["function"]}
"""The agent's tool as the Responses API spells a function tool (no `function` wrapper)."""


def chat_responses(
    client: Any,
    scripts: tuple[Script, ...] = SCRIPTS,
    *,
    scope: Callable[[str], contextlib.AbstractContextManager[Any]] = no_scope,
    model: str = "support-bot",
) -> list[dict[str, Any]]:
    """chat()'s conversations on the Responses API, chained by `previous_response_id`; the same records back
    (a tool call's id is the function call's `call_id`, the one its output names), each with the id of the
    chain's first response (`first_response_id`: an import names a conversation without an id by it)."""
    records = []
    for script in scripts:
        previous: str | None = None
        first: str | None = None
        turns = []
        for user in script.user_messages:
            with scope(script.conversation_id):
                answer, tools, previous, started = _respond(client, script, user, previous, model=model)
            first = first or started
            turns.append({"user": user, "assistant": answer, **({"tools": tools} if tools else {})})
        records.append(
            {
                "conversation_id": script.conversation_id,
                "chatbot_role": script.role,
                "turns": turns,
                "first_response_id": first,
            }
        )
    return records


def _respond(
    client: Any, script: Script, user: str, previous: str | None, *, model: str
) -> tuple[str, list[dict[str, Any]], str, str]:
    """One user message on the Responses API: the answer, the tool messages before it, the last response id
    and the first."""
    extra: dict[str, Any] = {"tools": [TRACK_PARCEL_FUNCTION]} if script.agent else {}
    if previous:
        extra["previous_response_id"] = previous
    new: Any = [{"role": "user", "content": user}]
    tools: list[dict[str, Any]] = []
    first = None
    for _ in range(3):  # an agent's loop, bounded: the server answers after one tool round
        reply = client.responses.create(model=model, instructions=script.role, input=new, temperature=0.0, **extra)
        extra["previous_response_id"] = reply.id
        first = first or reply.id
        calls = [item for item in reply.output if item.type == "function_call"]
        if not calls:
            return reply.output_text, tools, reply.id, first
        new = []
        for call in calls:
            result = track_parcel(json.loads(call.arguments)["query"])
            function = {"name": call.name, "arguments": call.arguments}
            asked = {"id": call.call_id, "type": "function", "function": function}
            tools.append({"role": "assistant", "content": None, "tool_calls": [asked]})
            tools.append({"role": "tool", "tool_call_id": call.call_id, "content": result})
            new.append({"type": "function_call_output", "call_id": call.call_id, "output": result})
    raise RuntimeError("the model kept calling tools")


def chat_with_fake_server(
    api: str = "chat", *, scope: Callable[[str], contextlib.AbstractContextManager[Any]] = no_scope
) -> list[dict[str, Any]]:
    """chat() (api="chat") or chat_responses() (api="responses") with the fake server's chatbot, tool calls on,
    each turn inside `scope` (a tracing span, a session)."""
    import openai

    from rubric.servers.fake import FakeOpenAI

    with FakeOpenAI() as server:
        server.modes.add("tools")
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0, timeout=30)
        conversations = (chat_responses if api == "responses" else chat)(client, scope=scope)
        client.close()
    return conversations
