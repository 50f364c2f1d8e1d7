"""The turns to label and what a reviewer sees of each: the conversation so far, as chat messages.

An item is `(conversation_id, turn)` with `turn` as written in labels.csv: the 0-based index of the assistant
reply as text, or "" for a whole conversation. A reviewer judges a reply in the light of everything said
before it, as the LLM judge does (rubric/judge/prompts.py), so every labelling path shows the earlier turns too.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from calibration.labelling.cells import restore_frame
from rubric.conversations import Conversation, load_conversations
from rubric.errors import InputError, read_text_file

Item = tuple[str, str]
"""(conversation_id, turn) as in labels.csv: turn "0", "1", ... or "" for a whole conversation."""

SHEET_ROW_OFFSET = 2
"""A spreadsheet numbers the header as row 1, so the frame's row i is the sheet's row i + 2."""


def dataset_conversations(data: str | Path) -> dict[str, Conversation]:
    """The conversations of a dataset folder by id (conversations.jsonl is required: its text is what the
    reviewers are shown and what their labels are checked against)."""
    path = Path(data) / "conversations.jsonl"
    if not path.exists():
        raise InputError(
            "no conversations.jsonl in the dataset folder; the reviewers need the conversation text.",
            path=Path(data),
            fix="pass data= the folder that holds conversations.jsonl (the file gather read).",
        )
    return {c.conversation_id: c for c in load_conversations(path)}


def llm_items(data: Path, *, required: bool = True) -> set[Item] | None:
    """Items of the dataset's llm.csv (a sheet's turns are checked against them when there is no
    conversations.jsonl; their turns say whether labels are per turn); None when there is none to read."""
    from calibration.data.reading import LLM_COLUMNS, as_text_ids, find_table, read_table

    path = find_table(data, "llm", required=False)
    if path is None and not required:
        return None
    if path is None:
        raise InputError(
            "the dataset folder has neither conversations.jsonl nor llm.csv to check the sheet's turns against.",
            path=data,
            fix="pass data= the dataset the sheet was made from.",
        )
    frame = as_text_ids(read_table(path, LLM_COLUMNS))
    return set(zip(frame["conversation_id"], frame["turn"], strict=True))


def every_turn(conversations: dict[str, Conversation]) -> list[Item]:
    """Every assistant turn, in file order."""
    return [(cid, str(t)) for cid, conv in conversations.items() for t in range(len(conv.turns))]


def conversation_messages(conv: Conversation, turn: str | int | None) -> list[dict[str, str]]:
    """The conversation up to and including the reply under review as [{"role", "content"}, ...]; the last
    message is the reply to judge. turn None or "" is the whole conversation."""
    last = len(conv.turns) - 1 if turn in (None, "") else int(turn)
    messages = []
    for t in conv.turns[: last + 1]:
        messages += [{"role": "user", "content": t.user}, {"role": "assistant", "content": t.assistant}]
    return messages


def earlier_turns_text(conv: Conversation, turn: str) -> str:
    """The turns before the one under review as plain text for a spreadsheet cell ("" for the first turn)."""
    if turn == "":
        return ""
    parts = [f"[turn {i}] USER: {t.user}\nASSISTANT: {t.assistant}" for i, t in enumerate(conv.turns[: int(turn)])]
    return "\n\n".join(parts)


def check_item(item: Item, conversations: dict[str, Conversation], *, where: str, path: str | Path) -> None:
    """The item names a conversation of the dataset and one of its turns; otherwise one clear error."""
    cid, turn = item
    conv = conversations.get(cid)
    if conv is None:
        raise InputError(
            f"{where}: conversation {cid!r} is not in the dataset's conversations.jsonl.",
            path=path,
            fix="pass data= the dataset these turns came from.",
        )
    if turn != "" and not (turn.isdigit() and int(turn) < len(conv.turns)):
        raise InputError(
            f"{where}: conversation {cid!r} has no turn {turn!r} (it has turns 0-{len(conv.turns) - 1}).",
            path=path,
            fix="pass data= the dataset these turns came from.",
        )


def read_selection(
    path: str | Path, conversations: dict[str, Conversation], *, whole_conversations: bool = False
) -> list[Item]:
    """The turns a CSV names, deduplicated in file order.

    Accepts a `suggest` sheet (either kind: judge_id may be empty) or any CSV with conversation_id and turn,
    and a sample plan (conversation_id with no turn column: every turn of each conversation; a `sampled`
    column keeps only the rows marked 1/true). A blank turn is a whole conversation where the dataset judges
    whole conversations (`whole_conversations`), and refused where it is labelled per turn.
    """
    path = Path(path)
    frame = read_csv(path)
    if "conversation_id" not in frame.columns:
        raise InputError(
            "no conversation_id column.",
            path=path,
            fix="pass select= a sheet from `role-rubric suggest`, or a CSV with conversation_id (and turn).",
        )
    keep = _sampled(frame, path)
    items: list[Item] = []
    for i in frame.index[keep]:
        cid = frame.at[i, "conversation_id"].strip()
        where = f"sheet row {i + SHEET_ROW_OFFSET}"
        if not cid:
            raise InputError(f"{where}: conversation_id is empty.", path=path, fix="fill it in or delete the row.")
        if "turn" in frame.columns:
            found = [(cid, turn_text(frame.at[i, "turn"]))]
            if found[0][1] == "" and not whole_conversations:
                raise InputError(
                    f"{where}: the turn of conversation {cid!r} is blank, and this dataset is labelled per turn.",
                    path=path,
                    fix="write the turn to label (0 is the first assistant reply) or delete the row.",
                )
        else:
            check_item((cid, ""), conversations, where=where, path=path)
            found = every_turn({cid: conversations[cid]})
        for item in found:
            check_item(item, conversations, where=where, path=path)
            items.append(item)
    unique = list(dict.fromkeys(items))
    if not unique:
        raise InputError("selects no turn.", path=path, fix="pass a sheet with at least one row to label.")
    return unique


def read_csv(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise InputError("file not found.", path=path, fix="check the path.")
    read_text_file(path)  # a folder or not UTF-8: one line naming the file
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty.", path=path, fix="pass a CSV with a header row.") from None
    except pd.errors.ParserError as exc:
        raise InputError(
            f"cannot be read as CSV ({str(exc).splitlines()[0]}).",
            path=path,
            fix="save the sheet as CSV (comma-separated, UTF-8).",
        ) from None
    return restore_frame(frame)  # the quotes that kept formula-like cells inert (cells.py), removed


def _sampled(frame: pd.DataFrame, path: Path) -> pd.Series:
    """Rows to keep: all, or those a `sampled` column marks as sampled."""
    if "sampled" not in frame.columns:
        return pd.Series(True, index=frame.index)
    marks = frame["sampled"].str.strip().str.lower()
    known = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}
    bad = ~marks.isin(list(known))
    if bad.any():
        i = int(frame.index[bad][0])
        raise InputError(
            f"sheet row {i + SHEET_ROW_OFFSET}: sampled={frame.at[i, 'sampled']!r} is not true or false.",
            path=path,
            fix="write 1/true for a sampled conversation and 0/false otherwise.",
        )
    return marks.map(known).astype(bool)


def turn_text(raw: str) -> str:
    """ "3", "3.0" (a spreadsheet's rewrite) -> "3"; "" stays "" (a whole conversation)."""
    raw = raw.strip()
    if raw.endswith(".0") and raw[:-2].isdigit():
        return raw[:-2]
    return raw
