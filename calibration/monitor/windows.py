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

from calibration.monitor.state import STATE, check_clock
from rubric.errors import InputError

__all__ = [
    "Conversation",
    "Window",
    "open_window",
    "parse_time",
    "parse_window",
    "plan_windows",
    "read_conversations",
    "windows_by_directory",
]

UNITS = {"h": dt.timedelta(hours=1), "d": dt.timedelta(days=1), "w": dt.timedelta(weeks=1)}
DIRECTORY = "directory"
LONGEST = dt.timedelta(weeks=520)
"""The longest window (ten years): longer ones overflow the calendar before they mean anything."""


def parse_window(spec: str) -> dt.timedelta | None:
    """`7d` -> 7 days, `12h`, `2w`; `directory` -> None (one window per data directory)."""
    if spec == DIRECTORY:
        return None
    found = re.fullmatch(r"\s*(\d+)\s*([hdw])\s*", str(spec))
    if not found or int(found.group(1)) == 0:
        raise InputError(
            f"window={spec!r} is not a length.", fix="pass window=Nh, Nd or Nw (e.g. 7d), or window=directory."
        )
    try:
        length = int(found.group(1)) * UNITS[found.group(2)]
    except OverflowError:  # past what a timedelta holds: out of range all the same
        length = None
    if length is None or length > LONGEST:
        raise InputError(
            f"window={spec!r} is out of range: a window is at most {LONGEST.days // 7} weeks long.",
            fix="pass a window from 1h to 520w (e.g. 7d).",
        )
    return length


def parse_time(value: object, *, what: str, path: Path | None = None, row: int | None = None) -> dt.datetime:
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
    return when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when.astimezone(dt.timezone.utc)


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
    lines: dict[str, int] = {}
    for number, text in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if text.strip():
            lines.setdefault(str(json.loads(text).get("conversation_id")), number)
    out = []
    for conv in conversations:
        record = conv.record if isinstance(conv.record, dict) else {}
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
        k = (_started(conv) - origin) // length
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
    first = min(_started(c) for c in conversations)
    return first.replace(hour=0, minute=0, second=0, microsecond=0)


def _started(conv: Conversation) -> dt.datetime:
    """A conversation's start, where windows are by time: read_conversations(need_time=True) gave every one."""
    assert conv.started_at is not None, "windows by time read conversations with need_time=True"
    return conv.started_at


def _time_id(start: dt.datetime) -> str:
    return start.strftime("%Y-%m-%dT%H:%MZ")


def open_window(
    conversations: list[Conversation], length: dt.timedelta, origin: dt.datetime, clock: dt.datetime
) -> Window | None:
    """The window still open at `clock` (the one it falls in) with the conversations it has so far, or None
    where it has none: shown as provisional, never tested."""
    k = (clock - origin) // length
    start = origin + k * length
    members: dict[int, list[str]] = {}
    for conv in conversations:
        if conv.started_at is not None and start <= conv.started_at < clock:
            members.setdefault(conv.directory, []).append(conv.conversation_id)
    return Window(_time_id(start), k, start, start + length, members) if members else None


def plan_windows(
    directories: list[Path],
    found: list[list[Conversation]],
    length: dt.timedelta | None,
    state: dict,
    out: Path,
    *,
    origin: str | None,
    until: str | None,
    now: dt.datetime | None,
) -> tuple[list[Window], list[Window], int, dt.datetime | None]:
    """(every complete window of the data, the new ones among them, conversations waiting in open windows, the
    clock: None with window=directory); the state's origin and clock moved on."""
    recorded = {w["id"]: w for w in state["windows"]}
    if length is None:
        ids = [_conversation_ids(d, f) for d, f in zip(directories, found, strict=True)]
        windows = windows_by_directory(directories, ids)
        return windows, _new_by_directory(windows, recorded, directories, len(state["windows"])), 0, None
    clock = parse_time(until, what="until=") if until else (now or dt.datetime.now(dt.timezone.utc))
    check_clock(state, clock, out)
    conversations = [c for convs in found for c in convs]
    given = None if origin is None else parse_time(origin, what="origin=").isoformat()
    state["origin"] = state["origin"] or given or default_origin(conversations).isoformat()
    if given and given != state["origin"]:
        raise InputError(
            f"origin={origin} differs from this folder's {state['origin']}.",
            path=out / STATE,
            fix="drop origin= (the folder keeps its own), or pass a new out=.",
        )
    last = max((w["index"] for w in state["windows"]), default=None)
    origin_at = dt.datetime.fromisoformat(state["origin"])
    windows, waiting = windows_by_time(conversations, length, origin_at, clock, last)
    new = _new_by_time(windows, recorded, directories, last, out)
    state["until"] = clock.isoformat()
    return windows, new, waiting, clock


def _conversation_ids(root: Path, found: list[Conversation]) -> list[str]:
    """A directory's conversations: its conversations.jsonl's, else llm.csv's."""
    if found:
        return [c.conversation_id for c in found]
    import pandas as pd

    from calibration.data.reading import find_table

    table = find_table(root, "llm", required=True)
    read = pd.read_parquet if table.suffix == ".parquet" else pd.read_csv
    column = (
        read(table, columns=["conversation_id"])
        if table.suffix == ".parquet"
        else read(table, usecols=["conversation_id"], dtype=str, keep_default_na=False)
    )
    return sorted(set(column["conversation_id"].astype(str)))


def _unchanged(w: Window, recorded: dict, directories: list[Path], out: Path) -> None:
    before = recorded[w.id]
    if before["fingerprint"] != w.fingerprint():
        raise InputError(
            f"window {w.id} was monitored from {before['conversations']} conversations; the data now gives it "
            f"{w.n_conversations} (or other ones): a window is computed once, from all of its conversations.",
            path=out / STATE,
            fix="pass the data of windows not yet monitored (late conversations of a monitored window are not "
            "counted), or a new out= to monitor everything again.",
        )


def _new_by_time(
    windows: list[Window], recorded: dict, directories: list[Path], last: int | None, out: Path
) -> list[Window]:
    new: list[Window] = []
    for w in windows:
        if w.id in recorded:
            _unchanged(w, recorded, directories, out)
        elif last is not None and w.index < last:
            raise InputError(
                f"window {w.id} has {w.n_conversations} conversations, before the last window monitored "
                f"({max(recorded, key=lambda k: recorded[k]['index'])}): the clock went backwards, or they came late.",
                path=out / STATE,
                fix="pass only conversations started after the last monitored window, or a new out=.",
            )
        else:
            new.append(w)
    return new


def _new_by_directory(windows: list[Window], recorded: dict, directories: list[Path], done: int) -> list[Window]:
    new: list[Window] = []
    for w in windows:
        if w.id in recorded:
            if new:
                raise InputError(
                    f"data= lists {w.id}, already monitored, after {new[-1].id}, which is not: windows go in time order.",
                    path=directories[w.index],
                    fix="list the directories oldest first.",
                )
            _unchanged(w, recorded, directories, directories[w.index])
            continue
        w.index = done + len(new)
        new.append(w)
    return new
