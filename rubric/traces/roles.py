"""roles=: the short names a team gives its chatbot's roles, mapped from the role text an import reads (the
system prompt or instructions, or the value of the attribute role_from= names, service.name included).

The file is a CSV of rows `text,role`: a row matches a conversation whose role text is its `text`, or holds it
(a phrase only that prompt has, "You are Penny" say, so that a prompt edited elsewhere still maps). Where
several rows match, the longest `text` wins; two different names for one role text are refused. The name is
written as the conversation's `role` field, which later commands show for it (rubric/conversations.py
role_name: gather keeps the field; estimate's per-role rows, report and the shift check show it).
"""

from __future__ import annotations

import csv
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rubric.errors import InputError, read_text_file

MAX_NAME = 40
"""The longest short name (it heads table columns and per-role rows)."""


@dataclass
class RoleNames:
    """The rows of a roles= file, longest text first, and the role texts no row matched (for the notice)."""

    rows: list[tuple[str, str, int]]
    """(text, name, row number), longest text first."""
    path: Path
    unmatched: Counter[str] = field(default_factory=Counter)

    def name_of(self, role_text: str) -> str | None:
        """The short name of a role text (None: no row matches it; counted in `unmatched`)."""
        text = role_text.strip()
        found = [(t, n, r) for t, n, r in self.rows if t == text or t in text]
        if not found:
            self.unmatched[text] += 1
            return None
        best = [f for f in found if len(f[0]) == len(found[0][0])]
        if len({n for _, n, _ in best}) > 1:
            (a, x, i), (b, y, j) = best[:2]
            raise InputError(
                f"rows {i} and {j} both match a role equally ({a!r} -> {x!r}, {b!r} -> {y!r}) and name it differently.",
                path=self.path,
                row=j,
                fix="give each role one row, with text only that role's prompt holds.",
            )
        return best[0][1]

    def name_records(self, records: list[dict[str, Any]]) -> None:
        """Set each record's `role` (placed after chatbot_role) where a row names its role text."""
        for i, record in enumerate(records):
            name = self.name_of(str(record.get("chatbot_role") or ""))
            if name is not None:
                items = list(record.items())
                at = next((k for k, (key, _) in enumerate(items) if key == "chatbot_role"), len(items) - 1) + 1
                records[i] = dict([*items[:at], ("role", name), *[(k, v) for k, v in items[at:] if k != "role"]])

    def notice(self) -> str | None:
        """The line listing the role texts no row matched (first words and conversations), or None."""
        if not self.unmatched:
            return None
        shown = "; ".join(f"{_head(t)!r} ({n:,} conversations)" for t, n in self.unmatched.most_common(5))
        more = f" and {len(self.unmatched) - 5} more" if len(self.unmatched) > 5 else ""
        return (
            f"{len(self.unmatched):,} roles match no row of roles={self.path}: {shown}{more}; they keep their "
            "default name (add a row text,role for each)."
        )


def read_roles(path: str | Path) -> RoleNames:
    """roles=: CSV rows `text,role` (a header row `text,role` is skipped)."""
    path = Path(path)
    rows: list[tuple[str, str, int]] = []
    seen: dict[str, tuple[str, int]] = {}
    for n, row in enumerate(csv.reader(read_text_file(path).splitlines()), start=1):
        if not row or not "".join(row).strip():
            continue
        if n == 1 and [c.strip().lower() for c in row[:2]] == ["text", "role"]:
            continue
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise InputError(
                f"expected two cells, text,role; got {row!r}.",
                path=path,
                row=n,
                fix="write per line a text of the role's prompt (or all of it, quoted) and its short name.",
            )
        text, name = row[0].strip(), row[1].strip()
        if len(name) > MAX_NAME or "\n" in name:
            raise InputError(
                f"role name {name!r} is longer than {MAX_NAME} characters.",
                path=path,
                row=n,
                fix="give the role a short name (it heads columns and per-role rows).",
            )
        if text in seen and seen[text][0] != name:
            raise InputError(
                f"text {_head(text)!r} is named twice: {seen[text][0]!r} (row {seen[text][1]}) and {name!r}.",
                path=path,
                row=n,
                fix="keep one row per text.",
            )
        seen[text] = (name, n)
        rows.append((text, name, n))
    if not rows:
        raise InputError("no rows.", path=path, fix="write one row text,role per role.")
    return RoleNames(sorted(rows, key=lambda r: -len(r[0])), path)


def default_names_notice(records: list[dict[str, Any]]) -> str | None:
    """Without roles=: the line naming the roles found by the names made from their prompts (where a prompt is
    too long to be its own name), with the key that gives them a team's own names; None when every role text
    is short enough to be its name."""
    from rubric.conversations import role_name

    counts = Counter(str(r.get("chatbot_role") or "") for r in records)
    names = {text: role_name(text) for text in counts}
    if all(name == text.strip() for text, name in names.items()):
        return None
    shown = "; ".join(f"{names[t]!r} ({n:,} conversations)" for t, n in counts.most_common(4))
    more = f" and {len(counts) - 4} more" if len(counts) > 4 else ""
    return (
        f"{len(counts):,} roles, named from their prompts: {shown}{more}. Give them your own short names with "
        "roles=FILE.csv (rows text,role; text: a phrase only that prompt holds)."
    )


def _head(text: str) -> str:
    words = text.split()
    return " ".join(words[:6]) + (" ..." if len(words) > 6 else "")
