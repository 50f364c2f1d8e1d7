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
        exit_code: the command line's exit status for it (2: bad input).
    """

    exit_code = 2
    label = "error"
    """The command line's word for it: "role-rubric COMMAND: error: ..."."""

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


class IncompleteRun(InputError):
    """The run finished and wrote what succeeded, but some of the work failed (e.g. requests that failed
    after every retry); the command line exits 3 with this as its last line."""

    exit_code = 3


def read_text_file(path: str | Path) -> str:
    """A text file's contents as UTF-8 (a leading byte-order mark is dropped); anything else is one
    clear error naming the file and the line, not a UnicodeDecodeError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError("this is a folder, not a file.", path=path, fix="pass the path of the file.") from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.strerror or exc}).", path=path, fix="check the path.") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}).",
            path=path,
            row=data.count(b"\n", 0, exc.start) + 1,
            fix="save the file as UTF-8.",
        ) from None
