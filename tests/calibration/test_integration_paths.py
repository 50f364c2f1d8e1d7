"""The documented import paths of the integrations keep working after their code moved into the backends'
folders (calibration/connectors/): each old module names the very objects the new one defines."""

from __future__ import annotations

import importlib

import pytest

PATHS = {
    "calibration.integrations.deepeval": ("calibration.connectors.deepeval.metric", ["RoleRubricMetric"]),
    "calibration.integrations.mlflow": (
        "calibration.connectors.mlflow.scorer",
        ["RoleAdherenceScorer", "SessionAdherenceScorer"],
    ),
}


@pytest.mark.parametrize("old", sorted(PATHS))
def test_the_documented_path_names_the_moved_objects(old: str):
    new, names = PATHS[old]
    extra = new.split(".")[2]
    pytest.importorskip(extra)
    module, moved = importlib.import_module(old), importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(moved, name), name
        assert getattr(moved, name).__module__ == new, name  # defined there, not re-exported from elsewhere


@pytest.mark.parametrize("old", sorted(PATHS))
def test_the_package_names_the_moved_objects(old: str):
    import calibration.integrations

    new, names = PATHS[old]
    pytest.importorskip(new.split(".")[2])
    for name in names:
        assert getattr(calibration.integrations, name) is getattr(importlib.import_module(new), name), name
