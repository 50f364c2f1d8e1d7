"""Every command that writes an output holds it for the whole run, final writes included: a second run
into the same output is refused with the first one's PID, and an output path that cannot be created is
one line and exit 2 (calibration/schema/out_locks.py). Parametrised over the command table, so a new command is
covered the day it is added."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from calibration import cli
from calibration.cli import COMMANDS, main
from calibration.schema.compose import compose_config
from calibration.schema.out_locks import FILE_OUTPUTS
from rubric.files import LOCK_NAME, lock_path

ROOT = Path(__file__).resolve().parents[1]
WRITERS = [c for c in COMMANDS if "out" in set(compose_config(c, []).keys())]  # set: `in` skips ???


def _out(command: str, tmp_path: Path) -> tuple[Path, bool]:
    is_file = "out" in FILE_OUTPUTS.get(command, ())
    return (tmp_path / "shared" / "result.csv", True) if is_file else (tmp_path / "shared", False)


def test_every_writing_command_is_covered():
    assert {
        "import",
        "gather",
        "train",
        "cv",
        "search",
        "predict",
        "evaluate",
        "report",
        "demo",
        "score",
        "suggest",
        "decide",
        "compare",
    } <= set(WRITERS)


@pytest.fixture(scope="module")
def holder(tmp_path_factory):
    """A process that holds every output lock the tests below ask for (paths on its stdin)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, contextlib\nfrom rubric.files import out_lock\nstack = contextlib.ExitStack()\n"
            "for line in sys.stdin:\n    path, is_file = line.rsplit(' ', 1)\n"
            "    stack.enter_context(out_lock(path, file=is_file.strip() == '1'))\n    print('held', flush=True)\n",
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    yield proc
    proc.kill()
    proc.wait()


# what the rules between keys need besides the required keys (calibration/schema: Import.rules, Suggest.rules)
RULES_NEED = {"import": ["evaluations=e.tsv", "judgments=j.tsv"], "suggest": ["model=m"], "publish": ["scores=s.csv"]}


def _args(command: str, out: Path) -> list[str]:
    """out= and a stand-in for every other key the command requires (the stage never reads them: the run is
    locked out first, or its stage replaced)."""
    from calibration.schema import SCHEMAS
    from calibration.schema.build import missing_keys

    args = [f"out={out}", *RULES_NEED.get(command, [])]
    for key, what in missing_keys(SCHEMAS[command], {"out": str(out)}):
        args.append(f"{key}={'1' if what == 'N' else what.split('|')[0] if '|' in what else 'x'}")
    return args


@pytest.mark.parametrize("command", WRITERS)
def test_a_second_run_into_a_held_output_is_refused(command, holder, tmp_path, capsys):
    out, is_file = _out(command, tmp_path)
    holder.stdin.write(f"{out} {int(is_file)}\n")
    holder.stdin.flush()
    assert holder.stdout.readline().strip() == "held"
    before = sorted(p.name for p in out.parent.rglob("*"))
    code = main([command, *_args(command, out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"another role-rubric run (PID {holder.pid}) is writing to this" in err and "Fix: wait" in err
    assert sorted(p.name for p in out.parent.rglob("*")) == before  # nothing written


RESULT: dict[str, str] = {}


def _probe(command: str, cfg) -> None:
    """Stands in for a command's stage: at its very end (where the final writes are), a second run of the
    same command into the same output, in another process."""
    done = subprocess.run(
        [sys.executable, "-m", "calibration.cli", command, *_args(command, Path(cfg.out))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )
    RESULT[command] = f"{done.returncode} {done.stderr.strip()}"


@pytest.mark.parametrize("command", WRITERS)
def test_the_output_is_held_until_the_last_write(command, tmp_path, monkeypatch):
    out, is_file = _out(command, tmp_path)
    monkeypatch.setattr(cli.COMMANDS[command][0], "run", lambda cfg: _probe(command, cfg))
    assert main([command, *_args(command, out)]) == 0
    code, _, err = RESULT[command].partition(" ")
    assert code == "2" and f"(PID {os.getpid()}) is writing to this" in err, RESULT[command]
    assert not lock_path(out, file=is_file).exists()  # no lock file left once the run has ended


@pytest.mark.parametrize("command", WRITERS)
@pytest.mark.parametrize("where", ["under-a-file", "unwritable-system-folder"])
def test_an_output_that_cannot_be_created_is_one_line(command, where, tmp_path, capsys):
    if where == "under-a-file":
        (tmp_path / "a-file").write_text("x")
        out = tmp_path / "a-file" / "sub" / "result.csv"
    else:
        out = Path("/proc/role-rubric-test/sub/result.csv")
    code = main([command, f"out={out}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and "Fix:" in err


def test_lock_files_do_not_stay_behind(tmp_path):
    from rubric.files import out_lock

    with out_lock(tmp_path / "o"), out_lock(tmp_path / "o"):  # re-entrant in one process
        assert (tmp_path / "o" / LOCK_NAME).exists()
        (tmp_path / "o" / "result.json").write_text("{}")
    with out_lock(tmp_path / "f.csv", file=True):
        assert lock_path(tmp_path / "f.csv", file=True).exists()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["o", "o/result.json"]


def test_a_run_that_wrote_nothing_leaves_no_folder(tmp_path):
    from rubric.files import out_lock

    with out_lock(tmp_path / "a" / "b" / "c"):
        pass  # e.g. refused on bad input before writing
    with out_lock(tmp_path / "x" / "y.csv", file=True):
        pass
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "mine").mkdir()
    with out_lock(tmp_path / "mine"):
        pass
    assert (tmp_path / "mine").is_dir()  # a folder the user made stays


def test_outputs_get_the_mode_of_a_normal_file(tmp_path):
    import stat

    from rubric.files import atomic_write_text

    umask = os.umask(0o022)
    os.umask(umask)
    (tmp_path / "plain.txt").write_text("x")
    atomic_write_text(tmp_path / "atomic.txt", "x")
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert modes["atomic.txt"] == modes["plain.txt"] == 0o666 & ~umask
