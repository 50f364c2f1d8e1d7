"""benchmarks/monitor.py end to end in a small configuration (slow: it gathers the bundled benchmark and trains
a calibrator): the JSON it prints and saves, checked for sense, not for the full run's figures."""

from __future__ import annotations

import math

import pytest

from tests.test_benchmarks import _run

pytestmark = pytest.mark.slow


def test_monitor_prints_false_alarms_delays_and_the_shift_check(tmp_path):
    out = _run(
        "monitor.py",
        *("--streams", "20", "--weeks", "12", "--per-week", "60", "--inject-week", "6"),
        *("--shift-windows", "2", "--skip-timing", "--work", str(tmp_path)),
    )
    assert out["settings"]["roles"] == 4 and out["population"]["conversations"] == 112
    assert out["false_alarms"]["streams"] == 20 and out["false_alarms"]["share"] <= 0.2
    big, small = out["delay"]
    assert big["drop"] == 0.10 and math.isfinite(big["median_delay_windows"]) and big["median_delay_windows"] <= 2
    assert small["drop"] == 0.05 and big["detected_within_horizon"] >= small["detected_within_horizon"] - 0.1
    unchanged, changed = out["shift"]
    assert changed["judge_changed"] and changed["share_of_windows_with_a_shift_alarm"] >= 0.5
    assert unchanged["share_of_windows_with_a_shift_alarm"] <= 0.5
