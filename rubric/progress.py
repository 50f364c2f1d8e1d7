"""Progress that reads well in a terminal and in a log: a tqdm bar when stderr is a terminal, else a plain
status line at every tenth of the work, logged like the commands' other status lines (the command line
prints them on stdout, keeping stderr for the one-line error; rubric/notices.py): no carriage-return
redraws, no escape codes in log files."""

from __future__ import annotations

import logging
import sys
from typing import Any

log = logging.getLogger(__name__)  # the plain lines; calibration/cli.py prints them (rubric/notices.py)


class LogProgress:
    """tqdm's update/close for logs: `desc: n/total (p%)` at every 10% and once at the end."""

    def __init__(self, total: int, desc: str, unit: str):
        self.total, self.desc, self.unit, self.n, self._shown = max(int(total), 0), desc, unit, 0, 0

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.total and (tenth := min(10, 10 * self.n // self.total)) > self._shown:
            self._shown = tenth
            log.info(f"{self.desc}: {self.n}/{self.total} {self.unit}s ({10 * tenth}%)")

    def close(self) -> None:
        pass

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def progress_bar(total: int, progress: bool, *, desc: str, unit: str = "it", **tqdm_args: Any) -> Any:
    """A bar (terminal), log lines (stderr redirected) or nothing (progress=False)."""
    from tqdm.auto import tqdm

    if progress and not sys.stderr.isatty():
        return LogProgress(total, desc, unit)
    return tqdm(total=total, disable=not progress, desc=desc, unit=unit, file=sys.stderr, leave=False, **tqdm_args)


def progress_iter(items: Any, progress: bool, *, desc: str, unit: str = "it") -> Any:
    """`items`, with progress_bar's bar or log lines as they are consumed."""
    items = list(items)
    bar = progress_bar(len(items), progress, desc=desc, unit=unit)
    with bar:
        for item in items:
            yield item
            bar.update(1)
