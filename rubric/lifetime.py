"""A child process that ends with its parent: the one home of this for the gather workers
(rubric/judge/parallel.py), the forked trainers (calibration/model/forked.py), the search workers
(calibration/evaluation/search.py) and the local model server (rubric/servers/local.py)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time


def die_with_parent(parent_pid: int, *, poll_s: float | None = None, kernel: bool = True) -> None:
    """Ask Linux to SIGKILL this process when the parent dies (best effort; the watchdog backs it up).
    poll_s: also start a daemon thread that ends the process within that many seconds of the parent's
    death (the watchdog where no asyncio loop runs, and the only one off Linux). kernel=False: poll
    only (Linux signals the child when the parent *thread* that started it ends, and the local server may
    be started from a short-lived thread)."""
    if kernel and sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # pragma: no cover
            pass
    if os.getppid() != parent_pid:  # died before prctl took effect
        os._exit(1)
    if poll_s is not None:

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(poll_s)
            os._exit(1)

        threading.Thread(target=watch, daemon=True).start()
