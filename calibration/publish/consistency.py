"""What publish checks of `score`'s outputs before anything is sent (calibration/publish/results.py reads
them): the two tables of one run line up, joined by conversation and turn, and the conversations are the ones
scored (the checksum of their text that score records). The first row that disagrees is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from rubric.errors import InputError


def check_unchanged(loaded: list[Any], path: str | Path, recorded: str | None, scores: Path) -> None:
    """The conversations must read as those `score` scored (the checksum of their text it records, from this
    version on): a reply edited since was not the one scored, and a turn moved would put its value on another
    reply's span. Their trace ids and order may differ (the same conversations imported again)."""
    from rubric.conversations import content_sha256

    if recorded and content_sha256(loaded) != recorded:
        raise InputError(
            "these conversations changed since `score` read them (the checksum of their text differs from the one "
            "the scores record): the values published would not be those of their replies.",
            path=Path(path),
            fix=f"score them again (nothing was published), or pass conversations= the file {scores.name} was made "
            "from.",
        )


def check_tables_agree(conv_frame: Any, turn_frame: Any, scores: Path, turns_file: Path) -> None:
    """The per-conversation and per-turn tables of one `score` run, joined by conversation: each conversation
    once, each (conversation, turn) once, and as many turn rows as the conversation's `turns` says; else the
    first row that disagrees is named (a table edited, or the two of different runs)."""
    fix = "run `role-rubric score` again (nothing was published)."
    ids = conv_frame["conversation_id"].astype(str)
    twice = ids.duplicated()
    if twice.any():
        n = int(twice.to_numpy().argmax())
        raise InputError(f"conversation {ids.iloc[n]!r} has two rows.", path=scores, row=n + 1, fix=fix)
    keys = turn_frame["conversation_id"].astype(str) + "/" + turn_frame["turn"].astype(str)
    twice = keys.duplicated()
    if twice.any():
        n = int(twice.to_numpy().argmax())
        raise InputError(f"turn {keys.iloc[n]!r} has two rows.", path=turns_file, row=n + 1, fix=fix)
    counts = turn_frame["conversation_id"].astype(str).value_counts()
    stray = ~turn_frame["conversation_id"].astype(str).isin(set(ids))
    if stray.any():
        n = int(stray.to_numpy().argmax())
        raise InputError(
            f"conversation {turn_frame['conversation_id'].iloc[n]!r} is not in {scores.name}.",
            path=turns_file,
            row=n + 1,
            fix=fix,
        )
    for n, (cid, want) in enumerate(zip(ids, conv_frame.get("turns", [None] * len(ids)), strict=True), start=1):
        have = int(counts.get(cid, 0))
        if (want is not None and not pd.isna(want) and have != int(want)) or have == 0:
            said = "no" if have == 0 else str(have)
            raise InputError(
                f"conversation {cid!r} has {said} turn rows in {turns_file.name}, and {want} turns in "
                f"{scores.name} (row {n}): the tables do not line up.",
                path=turns_file,
                fix=fix,
            )
