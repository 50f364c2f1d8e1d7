"""Fixtures of the trace tests: real tracing servers (servers.py), each started once per session and stopped
at the end; the tests that need one skip with one reason where it is not installed or does not start."""

from __future__ import annotations

import pytest

from tests.traces.servers import MlflowServer, PhoenixServer, phoenix_or_skip, shared_mlflow_or_skip


@pytest.fixture(scope="session")
def mlflow_tracking(request, tmp_path_factory) -> MlflowServer:
    """A running `mlflow server` (SQLite, a free port): its `url` is the tracking URI. One per session, shared
    with every other directory's tests that ask through `shared_mlflow_server`."""
    return shared_mlflow_or_skip(request.config, tmp_path_factory)


@pytest.fixture(scope="session")
def phoenix(tmp_path_factory) -> PhoenixServer:
    """A running `phoenix serve` (SQLite, a free port): its `url` is what import source=phoenix url= takes."""
    yield from phoenix_or_skip(tmp_path_factory.mktemp("phoenix_server"))


@pytest.fixture(scope="session")
def phoenix_with_auth(tmp_path_factory) -> PhoenixServer:
    """A running `phoenix serve` with authentication on: every request needs an API key (`admin_key`, or a
    user's from `user_key(name)`)."""
    yield from phoenix_or_skip(tmp_path_factory.mktemp("phoenix_auth"), auth=True)
