"""Progress in a log file: a plain stdout line at every tenth, never carriage-return redraws."""

from __future__ import annotations

from rubric.notices import cli_notices
from rubric.progress import LogProgress, progress_bar, progress_iter


def test_log_progress_writes_ten_plain_lines(capsys):
    bar = LogProgress(95, "gather", "ask")
    with cli_notices():  # as the command line prints the library's lines
        for _ in range(95):
            bar.update(1)
    err = capsys.readouterr().out
    assert err.count("\n") == 10 and "\r" not in err and "\x1b" not in err
    assert err.splitlines()[0] == "gather: 10/95 asks (10%)" and err.splitlines()[-1] == "gather: 95/95 asks (100%)"


def test_stderr_not_a_terminal_gets_log_lines(capsys):
    assert isinstance(progress_bar(3, True, desc="x"), LogProgress)  # pytest's captured stderr is no terminal
    with cli_notices():
        assert list(progress_iter("abc", True, desc="report: panels", unit="panel")) == ["a", "b", "c"]
    assert capsys.readouterr().out.splitlines()[-1] == "report: panels: 3/3 panels (100%)"
    with cli_notices():
        assert list(progress_iter([1, 2], False, desc="quiet")) == [1, 2]
    assert capsys.readouterr().out == ""
