"""The optional extras: the table in rubric/extras.py matches pyproject.toml, and every command that needs an
extra says so in one line with the install command, exit 2, before any work, when the extra's module cannot
be imported. The module is made unimportable for real, in a process of its own: a `sitecustomize` on
PYTHONPATH puts a finder first on `sys.meta_path` that refuses it, as a missing package would be."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rubric.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[1]

BLOCKER = '''
import os, sys

_BLOCKED = tuple(n for n in os.environ.get("ROLE_RUBRIC_TEST_BLOCK", "").split(",") if n)


class _Missing:
    """Refuses the blocked top-level packages (and everything under them), as if they were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in _BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, _Missing())
'''


def run_without(blocked: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    path = os.pathsep.join([str(shim), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {**os.environ, "PYTHONPATH": path, "ROLE_RUBRIC_TEST_BLOCK": blocked}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def test_the_table_names_every_extra_of_pyproject():
    from importlib.metadata import metadata

    declared = set(metadata("role-rubric").get_all("Provides-Extra") or ())  # pyproject's, as installed
    assert set(EXTRAS) == declared - {"dev"}


COMMANDS = [
    ("mlflow", "publish target=mlflow", ["tracking_uri=http://127.0.0.1:9"]),
    ("otel", "publish target=otel", ["endpoint=http://127.0.0.1:9/v1/logs"]),
    ("phoenix", "publish target=phoenix", ["url=http://127.0.0.1:9"]),
    ("mlflow", "import source=mlflow", ["tracking_uri=http://127.0.0.1:9", "experiment=bot"]),
]


@pytest.mark.parametrize(("extra", "command", "keys"), COMMANDS, ids=[c[1] for c in COMMANDS])
def test_a_command_without_its_extra_is_one_line_and_exit_2_before_any_work(tmp_path, extra, command, keys):
    scores = tmp_path / "scored"
    scores.mkdir()
    (scores / "scores_turns.jsonl").write_text("", encoding="utf-8")  # never read: the extra is checked first
    out = tmp_path / "out"
    extra_keys = [f"out={out}"] if command.startswith("import") else [f"scores={scores}"]
    top = EXTRAS[extra].module.split(".")[0]
    done = run_without(top, ["-m", "calibration.cli", *command.split(), *keys, *extra_keys], tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert f"{command} needs the optional extra [{extra}]" in lines[0]
    assert f"Fix: pip install 'role-rubric[{extra}]'" in lines[0]
    assert "Traceback" not in done.stderr and done.stdout.strip() == ""
    assert not out.exists() and sorted(p.name for p in scores.iterdir()) == ["scores_turns.jsonl"]


def test_the_local_judge_without_its_extra_is_one_line_before_any_work(tmp_path):
    conversations = ROOT / "data" / "examples" / "tiny" / "conversations.jsonl"
    out = tmp_path / "gathered"
    args = ["-m", "calibration.cli", "gather", f"conversations={conversations}", "judge=local", f"out={out}"]
    done = run_without("llama_cpp", args, tmp_path)
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "judge=local needs the optional extra [local]" in line and "'role-rubric[local]'" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "module"),
    [("mlflow", "calibration.connectors.mlflow.scorer"), ("deepeval", "calibration.connectors.deepeval.metric")],
)
def test_an_integration_without_its_extra_fails_to_import_naming_the_install_command(tmp_path, extra, module):
    done = run_without(extra, ["-c", f"import {module}"], tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: ") and f"needs the optional extra [{extra}]" in last
    assert f"pip install 'role-rubric[{extra}]'" in last
