"""One run at a time per output, for every command, in one place.

The command line (calibration/cli.py) runs each command inside `locked_outputs`: every output the command
names is locked (rubric/files.py `out_lock`) before the command starts and released after its last write,
so a second run into the same output is refused at once with the first run's PID, and an output path that
cannot be created is one line before any work. A new command needs nothing here: its `out=` is locked as a
folder unless it is listed in `FILE_OUTPUTS`; inside its stage it may take `out_lock(out)` again (the lock
is re-entrant), which keeps it safe when called from Python too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

# FILE_OUTPUTS: command -> its config keys that name one output file (the rest write an `out=` folder);
# kept with the path checks, which read the same table, so the two never disagree about a command.
from calibration.schema.paths import FILE_OUTPUTS
from rubric.files import out_lock

# command -> input folders it also writes into (decide stores its calibration turns beside the model).
WRITES_INTO: dict[str, tuple[str, ...]] = {"decide": ("model",)}


def outputs_of(command: str, cfg: Any) -> list[tuple[str, Path, bool]]:
    """(key, path, is_file) of every output `command` writes with `cfg`, its object (calibration/schema/build.py)."""
    found: list[tuple[str, Path, bool]] = []
    file_keys = FILE_OUTPUTS.get(command, ())
    for key in ("out", *file_keys):
        value = getattr(cfg, key, None)
        if isinstance(value, (str, Path)) and str(value) not in ("", "???") and key not in [f[0] for f in found]:
            found.append((key, Path(str(value)), key in file_keys))
    for key in WRITES_INTO.get(command, ()):
        value = getattr(cfg, key, None)
        if isinstance(value, (str, Path)) and Path(str(value)).is_dir():  # a missing one: the loader says so
            found.append((key, Path(str(value)), False))
    return found


@contextlib.contextmanager
def locked_outputs(command: str, cfg: Any) -> Iterator[None]:
    """Hold the lock of every output of `command` for the block (see the module docstring)."""
    with contextlib.ExitStack() as stack:
        for key, path, is_file in outputs_of(command, cfg):
            stack.enter_context(out_lock(path, key=key, file=is_file))
        yield
