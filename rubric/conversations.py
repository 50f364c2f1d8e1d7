"""Conversations: the JSONL loader and the items (assistant turns) a judge is asked about.

One conversation per line, in either form::

    {"conversation_id": "c1", "chatbot_role": "...", "turns": [{"user": "...", "assistant": "...", "reference": "..."}]}
    {"conversation_id": "c1", "chatbot_role": "...", "turns": [{"role": "user", "content": "..."}, {"role": "assistant", ...}]}

`turns` may also be called `messages`. In the message form a leading `system` message stands in for a
missing `chatbot_role`. Every assistant reply needs a user message before it; `turn` is the 0-based index
of the assistant reply in the conversation.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric.errors import InputError, read_text_file
from rubric.ids import clean_id


@dataclass(frozen=True)
class Turn:
    """One exchange: the user's message and the assistant reply under review."""

    user: str
    assistant: str
    reference: str | None = None
    """An optional role-adherent reply for the same user message (shown to no judge; kept for datasets)."""
    tools: tuple[dict[str, Any], ...] = field(default=(), compare=False)
    """The steps between the user message and the reply: the assistant's tool calls ({"role": "assistant",
    "content", "tool_calls": [{"id", "name", "arguments"}]}) and the tools' results ({"role": "tool", "content",
    "tool_call_id"}), as a trace import writes them. Shown to the judge as context, never judged."""


@dataclass(frozen=True)
class Conversation:
    """A conversation between a user and a chatbot with an assigned role."""

    conversation_id: str
    chatbot_role: str
    turns: tuple[Turn, ...]
    record: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)
    """The line this conversation was read from, whole: fields role-rubric does not use (conversation
    metadata, per-turn timestamps) are written back unchanged by `to_record`."""

    def to_record(self) -> dict[str, Any]:
        if self.record is not None:  # the user's own line, unknown fields and all, with its id as compared
            record = copy.deepcopy(self.record)
            record["id" if "id" in record and "conversation_id" not in record else "conversation_id"] = (
                self.conversation_id
            )
            return record
        turns = []
        for t in self.turns:
            row: dict[str, Any] = {"user": t.user, "assistant": t.assistant}
            if t.reference is not None:
                row["reference"] = t.reference
            turns.append(row)
        return {"conversation_id": self.conversation_id, "chatbot_role": self.chatbot_role, "turns": turns}


@dataclass(frozen=True)
class Item:
    """What the judge scores: one assistant turn, or (turn=None) a whole conversation."""

    conversation: Conversation
    turn: int | None

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.conversation.conversation_id, self.turn)


def role_name(chatbot_role: str | None, record: dict[str, Any] | None = None) -> str:
    """A role's short name, the one every output shows (the role text stays in the files): the conversation's
    `role` field where it has one, else the role text itself where it is short, else its first words and a
    short hash of it (two prompts that start alike stay apart)."""
    import hashlib

    short = (record or {}).get("role")
    if isinstance(short, str) and short.strip():
        return short.strip()
    prompt = (chatbot_role or "").strip()
    if not prompt:
        return "(no role)"
    if len(prompt) <= 40 and "\n" not in prompt:  # already a short name
        return prompt
    words = prompt.split()
    head = " ".join(words[:4]) + (" ..." if len(words) > 4 else "")
    return f"{head[:40]} #{hashlib.sha256(prompt.encode()).hexdigest()[:6]}"


def iter_items(conversations: Iterable[Conversation], granularity: str = "turn") -> Iterator[Item]:
    """Items in file order: every assistant turn (granularity='turn') or every conversation."""
    if granularity not in ("turn", "conversation"):
        raise InputError(
            f"unknown granularity {granularity!r}.", fix="use granularity=turn or granularity=conversation."
        )
    for conv in conversations:
        if granularity == "conversation":
            yield Item(conv, None)
        else:
            for i in range(len(conv.turns)):
                yield Item(conv, i)


def content_sha256(conversations: Iterable[Conversation]) -> str:
    """SHA-256 of what a judge reads of `conversations` (ids, roles, every turn's text, references and tool
    steps), in conversation-id order: the same for a file re-ordered or whose trace ids changed, different for
    an edited reply or a turn moved. `score` records it; `publish` checks the conversations against it."""
    import hashlib

    content = [
        [c.conversation_id, c.chatbot_role, [[t.user, t.assistant, t.reference, list(t.tools)] for t in c.turns]]
        for c in sorted(conversations, key=lambda c: c.conversation_id)
    ]
    return hashlib.sha256(json.dumps(content, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def load_conversations(path: str | Path) -> list[Conversation]:
    """Read a conversations.jsonl file (or a dataset directory holding one); errors name the line."""
    path = Path(path)
    if path.is_dir():
        path = path / "conversations.jsonl"
    if not path.exists():
        raise InputError("conversations file not found.", path=path, fix="pass conversations=PATH to a .jsonl file.")
    records = []
    for line_no, line in enumerate(read_text_file(path).split("\n"), start=1):
        if not line.strip():
            continue
        try:
            records.append((line_no, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON ({exc.msg} at column {exc.colno}).",
                path=path,
                row=line_no,
                fix="write one JSON object per line.",
            ) from None
    if not records:
        raise InputError("no conversations in the file.", path=path, fix="write one conversation per line.")
    return conversations_from_records(records, source=path)


def conversations_from_records(
    records: Iterable[dict[str, Any] | tuple[int, dict[str, Any]]], *, source: str | Path = "<conversations>"
) -> list[Conversation]:
    """Validate parsed records (optionally paired with their line numbers) into Conversations."""
    out: list[Conversation] = []
    seen: dict[str, int] = {}
    for n, entry in enumerate(records, start=1):
        line, rec = entry if isinstance(entry, tuple) else (n, entry)
        conv = _conversation(rec, source, line)
        if conv.conversation_id in seen:
            raise InputError(
                f"duplicate conversation_id {conv.conversation_id!r} (first on line {seen[conv.conversation_id]}).",
                path=source,
                row=line,
                fix="give every conversation its own id.",
            )
        seen[conv.conversation_id] = line
        out.append(conv)
    return out


def save_conversations(conversations: Iterable[Conversation], path: str | Path) -> Path:
    from rubric.files import atomic_write_text

    return atomic_write_text(path, conversations_jsonl(conversations))


def conversations_jsonl(conversations: Iterable[Conversation]) -> str:
    """The text of a conversations.jsonl file, one conversation per line."""
    return "".join(json.dumps(conv.to_record(), ensure_ascii=False) + "\n" for conv in conversations)


def _conversation(rec: Any, source: str | Path, line: int) -> Conversation:
    def fail(problem: str, fix: str) -> InputError:
        return InputError(problem, path=source, row=line, fix=fix)

    if not isinstance(rec, dict):
        raise fail("a line must be a JSON object.", 'write {"conversation_id", "chatbot_role", "turns"} per line.')
    try:
        json.dumps(rec, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise fail(
            f"text with an unpaired surrogate ({exc.object[exc.start : exc.end].encode('unicode_escape').decode()}), "
            "which is not valid Unicode.",
            "remove the lone \\ud800-\\udfff escape or write the full surrogate pair.",
        ) from None
    cid = rec.get("conversation_id", rec.get("id"))
    if cid is None or str(cid).strip() == "":
        raise fail("missing conversation_id.", 'add a "conversation_id" to every conversation.')
    if isinstance(cid, bool) or not isinstance(cid, (str, int)):
        raise fail(f"conversation_id {cid!r} is not text.", 'write "conversation_id" as a string.')
    raw = rec.get("turns", rec.get("messages"))
    if not isinstance(raw, list) or not raw:
        raise fail(f"conversation {cid!r} has no turns.", 'add a non-empty "turns" list.')
    role = rec.get("chatbot_role")
    if all(isinstance(t, dict) and "role" in t for t in raw):
        system, turns = _from_messages(raw, fail, cid)
        role = role if role is not None else system
    else:
        turns = _from_turns(raw, fail, cid)
    if not isinstance(role, str) or not role.strip():
        raise fail(
            f"conversation {cid!r} has no chatbot_role.",
            'add "chatbot_role": the role the chatbot was assigned.',
        )
    return Conversation(clean_id(cid), role.strip(), tuple(turns), record=rec)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _not_text(value: Any) -> str | None:
    """What a message given as something other than text is, in a few words (None: text, or nothing)."""
    if value is None or isinstance(value, str):
        return None
    if isinstance(value, list):
        return "a list (content parts such as an image?)"
    kind = {dict: "an object", bool: "true/false", int: "a number", float: "a number"}.get(type(value), "a value")
    return f"{kind} ({json.dumps(value, ensure_ascii=False, default=str)[:40]})"


NOT_TEXT_FIX = "write it as a string: only text is judged (an image or other content part is not read)."


def _from_turns(raw: list[Any], fail: Any, cid: Any) -> list[Turn]:
    turns = []
    for i, t in enumerate(raw):
        if not isinstance(t, dict):
            raise fail(
                f"conversation {cid!r}, turn {i} is not an object.",
                'write turns as {"user": ..., "assistant": ...}.',
            )
        for key in ("user", "assistant"):
            kind = _not_text(t.get(key))
            if kind is not None:
                raise fail(f'conversation {cid!r}, turn {i}: "{key}" is {kind}, not text.', NOT_TEXT_FIX)
        user, reply = _text(t.get("user")), _text(t.get("assistant"))
        if reply is None:
            raise fail(
                f"conversation {cid!r}, turn {i} has no assistant reply.",
                'give every turn a non-empty "assistant".',
            )
        if user is None:
            raise fail(
                f"conversation {cid!r}, turn {i}: assistant reply without a preceding user message.",
                'give every turn a non-empty "user" message.',
            )
        ref = t.get("reference")
        turns.append(Turn(user, reply, ref if isinstance(ref, str) else None, _tools(t.get("tools"), fail, cid, i)))
    return turns


def _tools(raw: Any, fail: Any, cid: Any, i: int) -> tuple[dict[str, Any], ...]:
    """A turn's tool steps (see Turn.tools); none when absent."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(
        isinstance(s, dict) and s.get("role") in ("assistant", "tool") and isinstance(s.get("content", ""), str)
        for s in raw
    ):
        raise fail(
            f'conversation {cid!r}, turn {i}: "tools" must be a list of steps with role assistant or tool.',
            'write tools as [{"role": "assistant", "content": "", "tool_calls": [...]}, {"role": "tool", '
            '"content": "..."}], or leave it out.',
        )
    return tuple(raw)


def _from_messages(raw: list[dict[str, Any]], fail: Any, cid: Any) -> tuple[str | None, list[Turn]]:
    system: str | None = None
    turns: list[Turn] = []
    pending: list[str] = []  # user messages since the last reply; consecutive ones are joined
    for i, msg in enumerate(raw):
        role, content = msg.get("role"), _text(msg.get("content"))
        kind = _not_text(msg.get("content"))
        if kind is not None:
            raise fail(f"conversation {cid!r}, message {i} ({role}): its content is {kind}, not text.", NOT_TEXT_FIX)
        if role == "system" and not turns and not pending:
            system = content
        elif role == "user" and content is not None:
            pending.append(content)
        elif role == "assistant" and content is not None:
            if not pending:
                raise fail(
                    f"conversation {cid!r}, message {i}: assistant reply without a preceding user message.",
                    "start with a user message and alternate user/assistant.",
                )
            ref = msg.get("reference")
            turns.append(Turn("\n\n".join(pending), content, ref if isinstance(ref, str) else None))
            pending = []
        else:
            raise fail(
                f"conversation {cid!r}, message {i} has role {role!r} or empty content.",
                "use roles user/assistant (and one leading system message) with non-empty content.",
            )
    if pending:
        raise fail(f"conversation {cid!r} ends with a user message that has no reply.", "drop the last user message.")
    if not turns:
        raise fail(f"conversation {cid!r} has no assistant replies.", "add at least one assistant reply.")
    return system, turns
