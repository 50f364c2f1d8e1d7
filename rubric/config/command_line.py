"""Commands that role-rubric prints for the user to paste (cv's deploy line, suggest's import line, ...):
each `key=value` one word for the shell and one value for Hydra, whatever the path holds (spaces, quotes,
`$`, commas). A plain path prints as it is.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path

_HYDRA_BARE = re.compile(r"[\w./~@%+:-]+")  # read by Hydra's override parser as the text it is
_SHELL_BARE = re.compile(r"[\w@%+=:,./\[\]~-]+")  # nothing the shell would change (a list's [,] as the docs write it)


def hydra_value(value: str | Path) -> str:
    """A path or text as a Hydra override value: bare where Hydra reads it so, else double-quoted."""
    text = str(value)
    if _HYDRA_BARE.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def override(key: str, value: str | Path | Sequence[str | Path]) -> str:
    """`key=value` (a list as `key=[a,b]`) as one shell word: `data='my runs/v1'` style quoting only where
    needed (shlex.quote)."""
    if isinstance(value, str | Path):
        text = hydra_value(value)
    else:
        text = "[" + ",".join(hydra_value(v) for v in value) + "]"
    word = f"{key}={text}"
    return word if _SHELL_BARE.fullmatch(word) else shlex.quote(word)
