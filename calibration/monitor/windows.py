"""Which conversations make each window of `monitor`: by conversations.jsonl's `started_at` in windows of a fixed
length from an origin, or one window per data directory in the order given.

A window is complete once its end is at or before `until` (default: now); a window still open waits for a later
run, so a window is computed once, from all of its conversations.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from rubric.errors import InputError

__all__ = ["Conversation", "Window", "parse_time", "parse_window", "read_conversations", "windows_by_directory"]

UNITS = {"h": dt.timedelta(hours=1), "d": dt.timedelta(days=1), "w": dt.timedelta(weeks=1)}
DIRECTORY = "directory"


def parse_window(spec: str) -> dt.timedelta | None:
    """`7d` -> 7 days, `12h`, `2w`; `directory` -> None (one window per data directory)."""
    if spec == DIRECTORY:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", str(spec))
    if not found or int(found.group(1)) == 0:
        raise InputError(
            f"window={spec!r} is not a length.", fix="pass window=Nh, Nd or Nw (e.g. 7d), or window=directory."
        )
    return int(found.group(1)) * UNITS[found.group(2)]


def parse_time(value, *, what: str, path: Path | None = None, row: int | None = None) -> dt.datetime:
    """An ISO 8601 time as an aware UTC datetime (a time without a zone is read as UTC)."""
    try:
        text = str(value).strip()
        when = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except (TypeError, ValueError):
        raise InputError(
            f"{what} {value!r} is not an ISO 8601 time.",
            path=path,
            row=row,
            fix="write it like 2026-11-02T09:37:00Z.",
        ) from None
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


@dataclass(frozen=True)
class Conversation:
    """One conversation of a data directory, as the windows need it."""

    directory: int
    """Index of its directory in data=."""
    conversation_id: str
    role: str | None
    started_at: dt.datetime | None
    line: int
    """Its line in conversations.jsonl."""


@dataclass
class Window:
    """One window: its id (its start, or its directory's name), its bounds and its conversations."""

    id: str
    index: int
    """Its position from the origin (or in data=): what its share of the alarms' alpha is keyed by."""
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    members: dict[int, list[str]] = field(default_factory=dict)
    """directory index -> the ids of its conversations in this window."""

    @property
    def n_conversations(self) -> int:
        return sum(len(v) for v in self.members.values())

    def fingerprint(self) -> str:
        """What tells this window's data apart from another's: its conversations' ids, so a rerun over the same
        conversations (wherever they were exported to) finds it unchanged."""
        keys = sorted(c for convs in self.members.values() for c in convs)
        return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


def read_conversations(root: Path, index: int, *, need_time: bool) -> list[Conversation]:
    """The conversations of ROOT/conversations.jsonl with their roles and start times; need_time: every one must
    have a parsable `started_at` (an error names its line). [] where the directory has no conversations.jsonl."""
    from rubric.conversations import load_conversations

    path = root / "conversations.jsonl"
    if not path.exists():
        if need_time:
            raise InputError(
                "no conversations.jsonl: windows by time read each conversation's started_at there.",
                path=root,
                fix="import the traces with `role-rubric import source=otel ...` (it writes started_at), or pass "
                "window=directory (one window per data directory).",
            )
        return []
    from calibration.release.roles import role_key

    conversations = load_conversations(path)  # first: a line that is not a conversation is its one-line error
    lines = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if line.strip():
            lines.setdefault(str(json.loads(line).get("conversation_id")), number)
    out = []
    for conv in conversations:
        record = conv.record if isinstance(getattr(conv, "record", None), dict) else {}
        line = lines.get(conv.conversation_id, 0)
        started = record.get("started_at")
        when = None
        if started is None or (isinstance(started, str) and not started.strip()):
            if need_time:
                raise InputError(
                    f"conversation {conv.conversation_id!r} has no started_at: it belongs to no window.",
                    path=path,
                    row=line,
                    fix="import the traces with `role-rubric import source=otel ...` (it writes started_at), or "
                    "pass window=directory.",
                )
        else:
            when = parse_time(started, what=f"conversation {conv.conversation_id!r}'s started_at", path=path, row=line)
        role = role_key(conv) if conv.chatbot_role else None
        out.append(Conversation(index, conv.conversation_id, role, when, line))
    return out


def windows_by_time(
    conversations: list[Conversation],
    length: dt.timedelta,
    origin: dt.datetime,
    until: dt.datetime,
    after: int | None = None,
) -> tuple[list[Window], int]:
    """The complete windows with conversations, and the empty ones between them (a window without
    conversations is news too) from the one after `after` (the last monitored window's index; default: the
    first with data) to the last that ends by `until`; and how many conversations wait in open windows."""
    by_index: dict[int, Window] = {}
    waiting = 0
    for conv in conversations:
        k = (conv.started_at - origin) // length
        start = origin + k * length
        if start + length > until:
            waiting += 1
            continue
        window = by_index.setdefault(k, Window(_time_id(start), k, start, start + length))
        window.members.setdefault(conv.directory, []).append(conv.conversation_id)
    if not by_index:
        return [], waiting
    first, last = min(by_index), max(by_index)
    fill = range(first if after is None else after + 1, last + 1)
    out = []
    for k in sorted(set(fill) | set(by_index)):
        start = origin + k * length
        out.append(by_index.get(k) or Window(_time_id(start), k, start, start + length))
    return out, waiting


def windows_by_directory(directories: list[Path], conversations: list[list[str]]) -> list[Window]:
    """One window per directory, in data='s order; conversations: each directory's conversation ids."""
    names = [d.name for d in directories]
    for i, name in enumerate(names):
        if names.index(name) != i:
            raise InputError(
                f"two data directories are named {name!r}: with window=directory a window is named by its directory.",
                path=directories[i],
                fix="give each window's directory its own name (e.g. week-01, week-02).",
            )
    return [
        Window(name, i, members={i: list(convs)})
        for i, (name, convs) in enumerate(zip(names, conversations, strict=True))
    ]


def default_origin(conversations: list[Conversation]) -> dt.datetime:
    """Midnight UTC of the earliest start."""
    first = min(c.started_at for c in conversations)
    return first.replace(hour=0, minute=0, second=0, microsecond=0)


def _time_id(start: dt.datetime) -> str:
    return start.strftime("%Y-%m-%dT%H:%MZ")
