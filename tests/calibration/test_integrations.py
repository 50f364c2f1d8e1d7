"""calibration.integrations without the frameworks: nothing is imported until used, and a missing deepeval
is one clear error naming the extra (these run whether or not deepeval is installed)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_importing_the_package_imports_no_framework():
    code = "import sys, calibration, calibration.integrations as i; print(sorted(i.__all__), 'deepeval' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "['RoleAdherenceScorer',",
        "'RoleRubricMetric',",
        "'SessionAdherenceScorer']",
        "False",
    ]
    assert (
        "mlflow"
        not in subprocess.run(
            [sys.executable, "-c", "import sys, calibration.integrations; print(sorted(sys.modules))"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )


def test_missing_deepeval_names_the_extra(monkeypatch):
    # what an environment without deepeval sees, also where this session imported it already
    for name in [m for m in sys.modules if m == "deepeval" or m.startswith("deepeval.")] or ["deepeval"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "calibration.connectors.deepeval.metric", raising=False)
    needs = r"needs the optional extra \[deepeval\].*pip install 'role-rubric\[deepeval\]'"
    with pytest.raises(ModuleNotFoundError, match=needs):
        importlib.import_module("calibration.connectors.deepeval.metric")
    import calibration.integrations

    with pytest.raises(ModuleNotFoundError, match=needs):
        calibration.integrations.RoleRubricMetric  # noqa: B018 (the lazy attribute imports it)
