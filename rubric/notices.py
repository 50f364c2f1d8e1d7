"""The library's notices: status lines through `logging`, notices about the data through `warnings`.

Library code does not print its notices. A status line ("report: reusing cv/predictions.csv ...") is logged
at INFO to its module's logger (under "rubric" or "calibration"); a notice about the data (fewer labels than
the folds need, a panel with few turns) is a `DataQualityWarning` (`warn_data`), as scikit-learn warns. An
API user silences, captures or reroutes either as with any library: `logging.getLogger("calibration")`,
`warnings.filterwarnings(...)`. The command line prints both (`cli_notices`): a status line as it is, on
standard output with the results; a data warning as "COMMAND: warning: TEXT" on standard error, so that
`role-rubric score ... > table.txt` still shows it. A warning about the run that is not about the data (a
judge that answers badly, a turn too long to send cheaply) is logged at WARNING and goes to standard error
too, as Python's logging does for a library with no handler configured.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import warnings
from collections.abc import Iterable, Iterator

LOGGERS = ("rubric", "calibration")


class DataQualityWarning(UserWarning):
    """A notice about the data a command was given (the run goes on; its results may be weak)."""

    def __init__(self, text: str, command: str = "") -> None:
        super().__init__(text)
        self.command = command  # the command whose run raised it, for the command line's "COMMAND: warning:"


def warn_data(command: str, lines: Iterable[str], *, stacklevel: int = 1) -> None:
    """One `DataQualityWarning` per line (the command line shows each as "COMMAND: warning: LINE");
    stacklevel=1: the warning names warn_data's caller as its place, 2 that caller's caller (as in warnings.warn)."""
    for line in lines:
        warnings.warn(DataQualityWarning(line, command), stacklevel=stacklevel + 1)


class _ConsoleHandler(logging.Handler):
    """Each record's message on the standard output of the moment (a test's capture replaces sys.stdout),
    a WARNING or worse on standard error, flushed, so that a log shows what the next seconds are spent on."""

    def emit(self, record: logging.LogRecord) -> None:
        stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except BrokenPipeError:
            raise  # the command line's reader went away: calibration/cli.py ends quietly
        except Exception:  # noqa: BLE001  (logging's own contract: a failing handler never stops the run)
            self.handleError(record)


def _show(message, category, filename, lineno, file=None, line=None, *, previous=None) -> None:
    if isinstance(message, DataQualityWarning):
        prefix = f"{message.command}: " if message.command else ""
        sys.stderr.write(f"{prefix}warning: {message}\n")  # never mixed into results redirected to a file
        sys.stderr.flush()
    else:
        previous(message, category, filename, lineno, file, line)


@contextlib.contextmanager
def cli_notices() -> Iterator[None]:
    """For the block, print the library's status lines and data warnings as the command line shows them."""
    handler = _ConsoleHandler(logging.INFO)
    handler.setFormatter(logging.Formatter("%(message)s"))
    loggers = [logging.getLogger(name) for name in LOGGERS]
    saved = [(lg.level, lg.propagate) for lg in loggers]
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(logging.INFO)
        lg.propagate = False  # printed here once, not again by a handler the root logger may have
    try:
        with warnings.catch_warnings():  # restores the filters and showwarning afterwards
            warnings.simplefilter("always", DataQualityWarning)  # each one, as the prints did
            previous = warnings.showwarning
            warnings.showwarning = lambda *args, **kw: _show(*args, **kw, previous=previous)
            yield
    finally:
        for lg, (level, propagate) in zip(loggers, saved, strict=True):
            lg.removeHandler(handler)
            lg.setLevel(level)
            lg.propagate = propagate
