"""Markers that follow the fixtures a test uses: a test that needs a real MLflow or Phoenix server (started by
tests/traces/servers.py) is marked `mlflow` or `phoenix`, so the default test command leaves it to the CI step
that installs the servers (.ci/run), however it reaches the server."""

from __future__ import annotations

import pytest

SERVER_FIXTURES = {
    "mlflow": {"mlflow_tracking", "mlflow_server"},
    "phoenix": {"phoenix", "phoenix_with_auth", "phoenix_server"},
}


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in SERVER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(getattr(pytest.mark, marker))
