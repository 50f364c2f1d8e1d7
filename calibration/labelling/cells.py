"""Spreadsheet safety for the sheets reviewers open (OWASP "CSV injection"): a cell that starts with `=`,
`+`, `-`, `@`, a tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets, and the
conversations come from a chatbot's users, who can type `=HYPERLINK(...)`.

Sheets are written with such cells prefixed by a single quote (the spreadsheet shows the text, runs
nothing) and read back with that quote removed, so ids and texts round-trip exactly. A reviewer id is
written into labels.csv, which other tools open again: one that starts like a formula is refused at import.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from rubric.errors import InputError

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
QUOTED_START = (*FORMULA_START, "\n")  # a line break in front is harmless, but a CR becomes one on writing
QUOTE = "'"


def neutralise(text: str) -> str:
    """`'=1+1` for `=1+1`; a text that already starts with such a quote gets one more, so that `restore`
    gives back exactly what was written; anything else as it is."""
    return QUOTE + text if text.lstrip(QUOTE).startswith(QUOTED_START) else text


def restore(text: str) -> str:
    """The inverse of `neutralise`: one quote off a text that `neutralise` would have quoted."""
    return text[1:] if text.startswith(QUOTE) and text.lstrip(QUOTE).startswith(QUOTED_START) else text


def neutralise_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with every text cell made safe to open in a spreadsheet (numbers stay numbers). A carriage
    return becomes a line break: pandas leaves a field with a bare CR unquoted, and a reader splits the row
    there (the sheet's texts are compared with the conversations with runs of white space as one)."""

    def safe(value: object) -> object:
        if not isinstance(value, str):
            return value
        return neutralise(value).replace("\r\n", "\n").replace("\r", "\n")

    out = frame.copy()
    for column in out.columns:
        out[column] = out[column].map(safe)
    return out


def restore_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A sheet read back (every cell text): the quotes `neutralise_frame` added, removed."""
    return frame.apply(lambda column: column.map(restore)) if len(frame.columns) else frame


def check_reviewer_id(judge: str, where: str, path: str | Path | None) -> None:
    """A reviewer id that a spreadsheet would run as a formula is refused (it goes into labels.csv)."""
    if judge.startswith(FORMULA_START):
        raise InputError(
            f"{where}: the reviewer id {judge[:30]!r} starts like a spreadsheet formula ({judge[:1]!r}).",
            path=path,
            fix="use a reviewer id that starts with a letter or digit (e.g. an email or initials); "
            "labels.csv is opened in spreadsheets too.",
        )
