"""Each command is a module of calibration/commands (its schema and `run`), reached from the CLI by ordinary
imports; loading the command table loads no stage."""

from __future__ import annotations

import subprocess
import sys

import pytest

import calibration.commands as commands
from calibration.cli import COMMANDS, main
from calibration.schema import SCHEMAS


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_command_has_a_module_with_its_schema(name):
    module = commands.COMMANDS[name]
    assert module.__name__ == f"calibration.commands.{name.replace('-', '_')}{'_' if name == 'import' else ''}"
    assert module.Schema is SCHEMAS[name] and callable(module.run)
    assert COMMANDS[name] == (module, SCHEMAS[name].summary)


def test_the_cli_runs_the_commands_module(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(commands.COMMANDS["serve-fake-judge"], "run", lambda cfg: seen.append(cfg.port))
    assert main(["serve-fake-judge", "port=0"]) == 0
    assert seen == [0]


def test_the_command_table_loads_no_stage():
    code = (
        "import sys, calibration.cli; "
        "print(sorted(m for m in ('torch', 'calibration.model.files', 'rubric.servers.fake') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
