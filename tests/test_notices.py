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
# Modules whose notices go through rubric/notices.py (issue 39 item 5); the rest still print, for now.
QUIET = ["calibration/compare/stage.py", "calibration/report/build.py", "calibration/report/pool.py",
         "calibration/evaluation/search.py", "calibration/evaluation/sizes.py", "rubric/gather.py",
         "rubric/batch_run.py"]


def test_the_command_line_prints_status_lines_and_data_warnings_as_before(capsys) -> None:
    log = logging.getLogger("calibration.report.build")
    with cli_notices():
        log.info("report: reusing cv/predictions.csv (5 folds, seed 0)")
        warn_data("report", ["only 3 labelled turns per fold"])
        warn_data("report", ["only 3 labelled turns per fold"])  # each one, not once per place
        logging.getLogger("rubric.gather").info("gather: wrote out/llm.csv")
    assert capsys.readouterr().out == (
        "report: reusing cv/predictions.csv (5 folds, seed 0)\n"
        "report: warning: only 3 labelled turns per fold\n"
        "report: warning: only 3 labelled turns per fold\n"
        "gather: wrote out/llm.csv\n"
    )


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


@pytest.mark.parametrize("module", QUIET)
def test_quiet_modules_do_not_print(module: str) -> None:
    tree = ast.parse((ROOT / module).read_text())
    calls = [n.lineno for n in ast.walk(tree)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "print"]
    assert calls == [], f"{module} prints at lines {calls}: log a status line, warn_data a notice about the data"


def test_size_warnings_are_data_warnings_the_command_line_prints(capsys) -> None:
    from calibration.evaluation.sizes import print_warnings

    with pytest.warns(DataQualityWarning, match="3 labelled turns"):
        print_warnings("cv", ["3 labelled turns per fold"])
    with cli_notices():
        print_warnings("cv", ["3 labelled turns per fold"])
    assert capsys.readouterr().out == "cv: warning: 3 labelled turns per fold\n"
