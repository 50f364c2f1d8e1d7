"""The monitor page (docs/how-to/monitor.md) runs verbatim on the bundled data, and what it prints holds the
lines the page shows (the runner of tests/test_walkthroughs.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_walkthroughs import RUN, blocks, run_verbatim

PAGE = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "monitor.md"


def test_every_bash_block_of_the_page_is_run():
    found = blocks(PAGE)
    assert len(found) >= 3 and all(marker == RUN for marker, _, _ in found)


@pytest.mark.slow
def test_the_monitor_page_runs_verbatim(tmp_path):
    """Gathers the bundled benchmark (about 2-7 minutes on 2 cores, as busy as they are), trains, monitors twice."""
    run_verbatim([PAGE], tmp_path)
    watch = tmp_path / "runs" / "monitor" / "watch"
    windows = [json.loads(x) for x in (watch / "windows.jsonl").read_text().splitlines()]
    assert len(windows) == 12 and all(w["conversations"] == 200 for w in windows)
    alarms = [json.loads(x) for x in (watch / "alarms.jsonl").read_text().splitlines()]
    assert all(a["window"] >= "2026-03-09" and 2 <= a["label"] <= a["of"] for a in alarms)
    assert {a["check"] for a in alarms} >= {"drop", "shift"}
    assert {(a["role"], a["question"]) for a in alarms if a["check"] == "drop"} >= {("all", "overall")}
