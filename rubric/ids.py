"""Identifiers as the user meant them: one rule for every reader of ids.

A judge id, conversation id, question id or option written `21 ` in one file and `21` in another is one
identifier. Every reader (labels.csv, llm.csv, predictions, conversations.jsonl, rubric.yaml, `judges=`
lists, and importers of foreign formats) passes ids through `clean_id` / `clean_id_columns` /
`clean_id_list`, so surrounding whitespace (spaces, tabs, a non-breaking space, a byte order mark or a
zero-width space pasted from a spreadsheet) never makes two judges out of one. Inner characters are kept:
`rater 1` and `rater1` stay two judges, because nothing says they are one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# str.strip() removes Unicode whitespace (including U+00A0 and U+3000) but not these, which are invisible.
_INVISIBLE = "\ufeff\u200b\u200c\u200d\u2060"

ID_COLUMNS = ("conversation_id", "turn", "judge_id", "question_id", "option")


def clean_id(value: Any) -> str:
    """The identifier text of `value`: surrounding whitespace and invisible characters removed; an integral
    float (a spreadsheet's `21.0`) written as an integer.

    >>> clean_id(" 21 "), clean_id(21.0), clean_id("\\ufeffc1\\u00a0"), clean_id("rater 1")
    ('21', '21', 'c1', 'rater 1')
    """
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip().strip(_INVISIBLE).strip()


def clean_id_columns(frame: Any, columns: Iterable[str] = ID_COLUMNS) -> Any:
    """A copy of the DataFrame `frame` with each present id column cleaned (missing values become "")."""
    import pandas as pd

    frame = frame.copy()
    for column in columns:
        if column in frame.columns:
            frame[column] = frame[column].map(lambda v: "" if _missing(v, pd) else clean_id(v)).astype(object)
    return frame


def clean_id_list(value: Any) -> list[str]:
    """A `judges=` style list: "a, b" as the command line passes it, or a list; ids cleaned, empty ones
    dropped, order kept, repeats removed (asking one judge twice is one judge)."""
    items = value.split(",") if isinstance(value, str) else list(value)
    return list(dict.fromkeys(c for c in (clean_id(v) for v in items) if c))


def _missing(value: Any, pd: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False
