"""One error type for bad input, so every stage reports problems the same way.

The message always names the file, the row (or line) when there is one, what is wrong and how to fix it,
and the command line prints it as a single line with a non-zero exit.
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad user input: a file, a row and a fix.

    Attributes:
        path: the offending file (or directory), if any.
        row: 1-based data row (CSV, header excluded) or line number (JSONL/YAML), if known.
        problem: what is wrong, in one sentence.
        fix: what the user should do about it.
    """

    def __init__(self, problem: str, *, path: str | Path | None = None, row: int | None = None, fix: str = ""):
        self.path = None if path is None else str(path)
        self.row = row
        self.problem = problem
        self.fix = fix
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f", row {self.row}" if self.row is not None else "") + ": "
        elif self.row is not None:
            where = f"row {self.row}: "
        return f"{where}{self.problem}" + (f" Fix: {self.fix}" if self.fix else "")
