"""Strict JSON outputs, in one place: every metrics, summary and result file goes through `jsonable` and
`write_json`, so none holds NaN or Infinity (which `json.dumps` writes by default and strict readers, jq
and browsers, refuse) and none is ever half written (rubric/files.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from rubric.files import atomic_write_text


def jsonable(value: Any, *, digits: int | None = None, private: bool = True) -> Any:
    """NaN/inf -> None and numpy scalars -> Python, recursively (dict keys become strings, tuples lists).
    digits: round every float to that many decimals; private=False drops the dict keys starting with `_`
    (helpers carried between stages, not results).

    >>> jsonable({"pearson": float("nan"), "n": np.int64(3), "_sample": [1]}, private=False)
    {'pearson': None, 'n': 3}
    >>> jsonable([np.float64(0.1234567), (1, float("inf"))], digits=3)
    [0.123, [1, None]]
    """
    if isinstance(value, dict):
        return {
            str(k): jsonable(v, digits=digits, private=private)
            for k, v in value.items()
            if private or not str(k).startswith("_")
        }
    if isinstance(value, (list, tuple)):
        return [jsonable(v, digits=digits, private=private) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return value if digits is None else round(value, digits)
    return value


def json_text(value: Any, *, indent: int | None = 2, newline: bool = False, **options: Any) -> str:
    """`value` as strict JSON text (`jsonable` first; NaN left anywhere is an error, never written)."""
    return json.dumps(jsonable(value, **options), indent=indent, allow_nan=False) + ("\n" if newline else "")


def write_json(path: str | Path, value: Any, *, indent: int | None = 2, newline: bool = False, **options: Any) -> Path:
    """Write `value` to `path` as strict JSON (see `json_text`), atomically."""
    return atomic_write_text(path, json_text(value, indent=indent, newline=newline, **options))
