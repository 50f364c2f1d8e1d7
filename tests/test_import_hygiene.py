"""`role-rubric --help` and `role-rubric COMMAND --help` answer at once: they load neither pandas nor torch
(each stage imports them when it runs), in a fresh interpreter as the command line starts one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HELP = """
import contextlib, io, sys
{before}
from calibration.cli import COMMANDS, main

for argv in [["--help"], *[[command, "--help"] for command in COMMANDS]]:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
    loaded = [m for m in ("pandas", "torch") if m in sys.modules]
    if loaded:
        print(" ".join(argv), "loaded", ", ".join(loaded))
        break
else:
    print("neither")
"""


def _help_loads(before: str = "") -> str:
    done = subprocess.run(
        [sys.executable, "-c", HELP.format(before=before)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_help_loads_neither_pandas_nor_torch():
    assert _help_loads() == "neither"


def test_the_help_check_sees_a_loaded_module():
    assert _help_loads("import pandas") == "--help loaded pandas"
