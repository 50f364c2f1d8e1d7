"""Fixtures: a scored import (tests/publish/scored.py), made once per session with the project's fake judge."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.publish.scored import make_scored


@pytest.fixture(scope="session")
def scored_run(tmp_path_factory) -> dict[str, Path]:
    """conversations.jsonl with trace/span ids -> gather (fake judge) -> train -> score."""
    from rubric.fake_server import FakeOpenAI

    with FakeOpenAI() as server:
        return make_scored(tmp_path_factory.mktemp("scored"), server.base_url)


@pytest.fixture()
def scored_copy(scored_run, tmp_path) -> dict[str, Path]:
    """The scores folder copied, so that a test's publish state starts empty (the model and conversations shared)."""
    scores = tmp_path / "scores"
    shutil.copytree(scored_run["scores"].parent, scores)
    return {**scored_run, "scores": scores / scored_run["scores"].name}
