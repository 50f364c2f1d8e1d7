"""What one LLM call holds, normalised whatever convention wrote it (`ToolCall`, `Message`, `LlmCall`), and
the pieces every convention's reader (conventions_*.py) builds them with: JSON text, content blocks, tool
calls, flattened attributes (OpenLLMetry's and OpenInference's) and OpenAI-style requests and completions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

SYSTEM_ROLES = frozenset({"system", "developer"})
_NUMBERED = re.compile(r"(tool_calls|contents)\.(\d+)\.(.+)")


class ToolCall(NamedTuple):
    """A tool the model asked for: `arguments` as JSON text with sorted keys, so that the same call read from
    an output (parsed arguments) and from the next call's input (text) compares equal. (Named tuples, not
    dataclasses, here: a frozen dataclass costs a microsecond to make, and an import makes millions.)"""

    id: str
    name: str
    arguments: str

    def to_record(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


class Message(NamedTuple):
    """One message of a call, normalised: `role` system|user|assistant|tool, `content` its text parts joined
    by newlines ("" for none), the tool calls it makes (assistant) or the call it answers (tool)."""

    role: str
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str = ""


class LlmCall(NamedTuple):
    """What one LLM call span holds: its system text (None: none), input and output messages, and the
    convention they were read in (a key of CAPTURE_SETTING). A Responses API call also names its response
    (`response_id`) and the response it continues (`previous_response_id`, "" for none): assemble.py joins
    such a chain into one conversation where no conversation id is set."""

    system: str | None
    input: tuple[Message, ...]
    output: tuple[Message, ...]
    convention: str
    response_id: str = ""
    previous_response_id: str = ""

    @property
    def empty(self) -> bool:
        return not self.input and not self.output and self.system is None


# Messages spelled as OpenAI-style JSON -------------------------------------------------------------------


def openai_exchange(request: Any, response: Any, convention: str) -> LlmCall | None:
    """An OpenAI chat request ({"messages": [...]}, or the list itself) and its response (a chat completion,
    {"choices": [{"message": ...}]}, a bare message, or text); or a Responses API request and its Response
    (`responses_exchange`)."""
    if is_responses_request(request) or (isinstance(response, dict) and isinstance(response.get("output"), list)):
        return responses_exchange(request, response, convention)
    messages = request.get("messages") if isinstance(request, dict) else request
    inputs = openai_messages(messages) if isinstance(messages, list) else []
    outputs: list[Message] = []
    if isinstance(response, dict) and isinstance(response.get("choices"), list):
        choices = [c for c in response["choices"] if isinstance(c, dict)]
        if choices:  # the first choice is the reply the application used
            message = choices[0].get("message") or {"content": choices[0].get("text")}
            outputs.append(openai_message({**message, "role": "assistant"}))
    elif isinstance(response, dict) and ("content" in response or "tool_calls" in response):
        outputs.append(openai_message({**response, "role": "assistant"}))
    elif isinstance(response, str) and response.strip():
        outputs.append(Message("assistant", response.strip()))
    if not inputs and not outputs:
        return None
    return with_system(None, inputs, outputs, convention)


def is_responses_request(request: Any) -> bool:
    """Whether a request is the Responses API's (`input`, `instructions`) rather than Chat Completions'."""
    return isinstance(request, dict) and "messages" not in request and ("input" in request or "instructions" in request)


def responses_exchange(request: Any, response: Any, convention: str) -> LlmCall | None:
    """An OpenAI Responses API call: its `instructions` the system text (the role), its `input` (text, or
    items: messages, `function_call`s and `function_call_output`s) the input messages, the Response's
    `output` items the output (`message` text and `function_call`s; reasoning items are no message). A
    function call's id is its `call_id`, the id its output names. Only what is new after
    `previous_response_id` is in the input: the history is the earlier calls'."""
    request = request if isinstance(request, dict) else {}
    text = response.strip() if isinstance(response, str) else ""  # a framework's span logging the text only
    response = response if isinstance(response, dict) else {}
    raw = request.get("input")
    inputs = [Message("user", raw.strip())] if isinstance(raw, str) else response_items(raw)
    outputs = response_items(response.get("output")) or ([Message("assistant", text)] if text else [])
    instructions = request.get("instructions", response.get("instructions"))
    system = instructions if isinstance(instructions, str) else None
    if isinstance(instructions, list):  # instructions given as message items
        system = "\n\n".join(m.content for m in response_items(instructions) if m.content) or None
    if not inputs and not outputs and system is None:
        return None
    call = with_system(system.strip() if system else None, inputs, outputs, convention)
    previous = request.get("previous_response_id") or response.get("previous_response_id")
    return call._replace(response_id=str(response.get("id") or ""), previous_response_id=str(previous or ""))


def response_items(raw: Any) -> list[Message]:
    """Responses API items as messages; consecutive function calls are one assistant message calling them all."""
    messages: list[Message] = []
    for item in as_list(parse_json(raw)):
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            messages.append(Message(str(item.get("role") or "user"), content_text(item.get("content"))))
        elif kind == "function_call":
            call = tool_call(item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments"))
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant" and last.tool_calls and not last.content:
                messages[-1] = last._replace(tool_calls=(*last.tool_calls, call))
            else:
                messages.append(Message("assistant", "", (call,)))
        elif kind == "function_call_output":
            messages.append(Message("tool", content_text(item.get("output")), (), str(item.get("call_id") or "")))
    return messages


def openai_messages(raw: Any, default_role: str = "user") -> list[Message]:
    return [openai_message(m, default_role) for m in as_list(raw) if isinstance(m, dict)]


def openai_message(msg: Mapping[str, Any], default_role: str = "user") -> Message:
    role = str(msg.get("role") or default_role)
    calls = []
    for call in as_list(parse_json(msg.get("tool_calls"))):
        if isinstance(call, dict):
            function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else call
            calls.append(tool_call(call.get("id"), function.get("name"), function.get("arguments")))
    tool_id = str(msg.get("tool_call_id") or "") if role == "tool" else ""
    return Message(role, content_text(msg.get("content")), tuple(calls), tool_id)


# Flattened message attributes ----------------------------------------------------------------------------


def flattened(attrs: Mapping[str, Any], pattern: re.Pattern[str], *prefixes: str) -> dict[str, Any] | None:
    """Flattened message attributes as {side: {N: {field: value, "tool_calls": {M: {...}}, ...}}}, or None
    when the span has none. Only keys under `prefixes` are matched (a cheap test first)."""
    tree: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefixes):
            continue
        match = pattern.fullmatch(key)
        if match is None:
            continue
        side, index, field = match.group(1), int(match.group(2)), match.group(3)
        message = tree.setdefault(side, {}).setdefault(index, {})
        numbered = _NUMBERED.fullmatch(field) if field.startswith(("tool_calls.", "contents.")) else None
        if numbered is None:
            message[field] = value
        else:
            group, n, rest = numbered.groups()
            message.setdefault(group, {}).setdefault(int(n), {})[rest] = value
    return tree or None


def flat_message(fields: Mapping[str, Any], default_role: str) -> Message:
    """A message spelled as flattened fields (OpenLLMetry's or OpenInference's)."""
    content = fields.get("content")
    contents = fields.get("contents")
    if contents:  # OpenInference: message.contents.M.message_content.text
        content = [
            {"type": "text", "text": c.get("message_content.text")}
            for _, c in sorted(contents.items())
            if c.get("message_content.type", "text") == "text"
        ]
    calls = tuple(
        tool_call(
            c.get("tool_call.id", c.get("id")),
            c.get("tool_call.function.name", c.get("name")),
            c.get("tool_call.function.arguments", c.get("arguments")),
        )
        for _, c in sorted((fields.get("tool_calls") or {}).items())
    )
    role = str(fields.get("role") or default_role)
    text = content_text(content)
    return Message(role, text, calls, str(fields.get("tool_call_id") or "") if role == "tool" else "")


# Text, JSON and tool calls --------------------------------------------------------------------------------


def with_system(system: str | None, inputs: list[Message], outputs: list[Message], convention: str) -> LlmCall:
    """The call, its system text taken from leading system messages of the input where no instructions
    attribute gave it (system messages elsewhere are dropped: the role is the chatbot's, not a turn)."""
    texts = [m.content for m in inputs if m.role in SYSTEM_ROLES and m.content]
    if system is None and texts:
        system = "\n\n".join(texts)
    kept = tuple(m for m in inputs if m.role not in SYSTEM_ROLES)
    return LlmCall(system or None, kept, tuple(outputs), convention)


def content_text(content: Any) -> str:
    """Message content as text: a string (JSON text of content blocks is unpacked), or a list of blocks."""
    if isinstance(content, str):
        if content.startswith("[{"):
            blocks = parse_json(content)
            if isinstance(blocks, list):
                return parts_text(blocks)
        return content.strip()
    return parts_text(content) if content is not None else ""


def tool_call(call_id: Any, name: Any, arguments: Any) -> ToolCall:
    return ToolCall(str(call_id or ""), str(name or ""), _arguments_text(arguments))


def _arguments_text(arguments: Any) -> str:
    value = parse_json(arguments)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def text_value(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False)


def parse_json(value: Any) -> Any:
    """JSON text parsed (text that is not JSON is returned as it is); anything else unchanged."""
    if isinstance(value, str) and value[:1] in ("{", "[", '"'):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def parts_text(parts: Any) -> str:
    """The text parts of a parts list (or of OpenAI-style content blocks), joined by newlines."""
    if isinstance(parts, str):
        return parts.strip()
    texts = []
    for part in as_list(parts):
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type", "text") in ("text", "input_text", "output_text"):
            text = part.get("content", part.get("text"))
            if isinstance(text, str):
                texts.append(text)
    return "\n".join(texts).strip()
