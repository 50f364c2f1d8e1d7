"""benchmarks/monitor.py decides as the command does: its vectorised runner and calibration/monitor/alarms.py, fed
the same windows, raise their first alarm in the same window (fast, synthetic rates; the benchmark's own run
on real conversations is `python benchmarks/monitor.py`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
monitor_benchmark = pytest.importorskip("monitor")  # benchmarks/monitor.py

from calibration.monitor import alarms as al  # noqa: E402


@dataclass
class _Stream:
    windows: list[dict[str, np.ndarray]]


def _streams(n: int, seed: int) -> list[_Stream]:
    rng = np.random.default_rng(seed)
    out = []
    for s in range(n):
        windows = []
        for w in range(monitor_benchmark.WINDOWS):
            drop = 0.25 if (s % 2 and w >= 20) else 0.0
            windows.append(
                {
                    role: np.clip(rng.beta(6, 2, rng.integers(3, 25)) - drop, 0, 1)
                    for role in ("a", "b", "c")
                    if not (role == "c" and w % 7 == 3)  # a role absent some weeks
                }
            )
        for window in windows:
            for role in ("a", "b", "c"):
                window.setdefault(role, np.zeros(0))
        out.append(_Stream(windows))
    return out


def _command_first_alarm(stream: _Stream) -> int:
    """The command's decisions (alarms.freeze_reference, alarms.evidence_checks) over one stream's windows."""
    reference = monitor_benchmark.REFERENCE
    settings = {"drop": monitor_benchmark.DROP, "fail_under": None}
    shares = monitor_benchmark.shares()
    state = {"roles": [], "bettors": {}, "alarmed": {}, "thresholds": None}
    kept: dict[str, list[float]] = {}
    for w, window in enumerate(stream.windows):
        present = {r: x for r, x in window.items() if len(x)}
        state["roles"] += sorted(r for r in present if r not in state["roles"])
        if w == reference:
            state["thresholds"] = al.freeze_reference(
                {"q": kept}, drop=settings["drop"], drop_share={"q": shares["drop"]}
            )
        if w < reference:
            for r, x in present.items():
                kept.setdefault(r, []).extend(x.tolist())
            continue
        rates = {r: window[r] for r in state["thresholds"]["q"] if r != al.ALL}
        checks = al.evidence_checks(rates, question="q", state=state, settings=settings, shares=shares, target=True)
        if any(c["fired"] for row in checks.values() for c in row):
            return w
    return -1


def test_the_benchmark_runner_and_the_command_raise_the_same_first_alarm():
    streams = _streams(8, seed=3)
    runner = monitor_benchmark.first_alarms(streams, ["a", "b", "c"])
    command = [_command_first_alarm(s) for s in streams]
    assert runner.tolist() == command
    assert any(f >= 20 for f in command) and all(f == -1 for f in command[::2])  # drops caught, none falsely
