"""The library's notices: quiet for an API user (logging, warnings), printed by the command line exactly as
the library used to print them."""

from __future__ import annotations

import ast
import logging
import warnings
from pathlib import Path

import pytest

from rubric.notices import DataQualityWarning, cli_notices, warn_data

ROOT = Path(__file__).resolve().parents[1]
# Where printing is the job: the command line itself and the judges role-rubric serves (their own processes).
PRINTS = ("calibration/cli.py", "calibration/cli_help.py", "rubric/servers/")
# A print the caller asked for by name: deepeval's `verbose_mode=True` prints the metric's log, as every deepeval
# metric does.
ASKED = {("calibration/connectors/deepeval/metric.py", "verbose_mode")}


def test_the_command_line_prints_status_lines_on_stdout_and_data_warnings_on_stderr(capsys) -> None:
    """Results and status lines on standard output, warnings on standard error: `score ... > table.txt`
    keeps the table clean and still shows the warning."""
    log = logging.getLogger("calibration.report.build")
    with cli_notices():
        log.info("report: reusing cv/predictions.csv (5 folds, seed 0)")
        warn_data("report", ["only 3 labelled turns per fold"])
        warn_data("report", ["only 3 labelled turns per fold"])  # each one, not once per place
        logging.getLogger("rubric.judge.gather").info("gather: wrote out/llm.csv")
    out, err = capsys.readouterr()
    assert out == "report: reusing cv/predictions.csv (5 folds, seed 0)\ngather: wrote out/llm.csv\n"
    assert err == "report: warning: only 3 labelled turns per fold\n" * 2


def test_the_library_alone_prints_nothing_and_warns_catchably(capsys) -> None:
    logging.getLogger("calibration.report.build").info("report: a status line")
    with pytest.warns(DataQualityWarning, match="few labels") as caught:
        warn_data("cv", ["few labels"])
    assert caught[0].message.command == "cv"
    assert capsys.readouterr().out == ""


def test_the_command_line_leaves_logging_and_warnings_as_it_found_them() -> None:
    loggers = [logging.getLogger(n) for n in ("rubric", "calibration")]
    before = [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    shown = warnings.showwarning
    with cli_notices():
        pass
    assert [(lg.level, lg.propagate, list(lg.handlers)) for lg in loggers] == before
    assert warnings.showwarning is shown


def library_prints(source: str) -> list[int]:
    """Lines of `source` that call print( outside an `if __name__ == "__main__":` block."""
    tree = ast.parse(source)
    main_blocks = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    skip = {id(n) for block in main_blocks for n in ast.walk(block)}
    return [
        n.lineno
        for n in ast.walk(tree)
        if id(n) not in skip and isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"
    ]


def test_library_modules_do_not_print() -> None:
    found = {}
    modules = sorted(p for pkg in ("rubric", "calibration") for p in (ROOT / pkg).rglob("*.py"))
    assert len(modules) > 100  # the walk found the packages
    for path in modules:
        name = path.relative_to(ROOT).as_posix()
        if name.startswith(PRINTS):
            continue
        source = path.read_text()
        lines = [
            n
            for n in library_prints(source)
            if not any(name == f and word in source.splitlines()[n - 2] for f, word in ASKED)
        ]
        if lines:
            found[name] = lines
    assert not found, f"library modules print (log a status line, warn_data a notice about the data): {found}"


def test_the_print_check_can_fail() -> None:
    assert library_prints("def f():\n    print('x')\n") == [2]
    assert library_prints("import sys\nif __name__ == '__main__':\n    print(sys.argv)\n") == []
    assert library_prints("s = 'print(1)'\n") == []


def test_size_warnings_are_data_warnings_the_command_line_prints(capsys) -> None:
    from calibration.evaluation.sizes import print_warnings

    with pytest.warns(DataQualityWarning, match="3 labelled turns"):
        print_warnings("cv", ["3 labelled turns per fold"])
    with cli_notices():
        print_warnings("cv", ["3 labelled turns per fold"])
    assert capsys.readouterr().err == "cv: warning: 3 labelled turns per fold\n"


def test_a_warning_about_the_run_goes_to_standard_error(capsys) -> None:
    with cli_notices():
        logging.getLogger("rubric.judge.long_turns").warning("warning: 2 of 9 turns are longer than long_turn_tokens=8")
        logging.getLogger("rubric.progress").info("gather: 5/10 requests (50%)")
    out, err = capsys.readouterr()
    assert (out, err) == ("gather: 5/10 requests (50%)\n", "warning: 2 of 9 turns are longer than long_turn_tokens=8\n")
