"""Fixtures: a scored import (tests/publish/scored.py), made once per session with the project's fake judge."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.publish.scored import make_release, make_scored, mlflow_traces, phoenix_traces

EXPERIMENT = "support-bot"
PROJECT = "support-bot"


@pytest.fixture(scope="session")
def scored_run(tmp_path_factory) -> dict[str, Path]:
    """conversations.jsonl with trace/span ids -> gather (fake judge) -> train -> score."""
    from rubric.servers.fake import FakeOpenAI

    with FakeOpenAI() as server:
        return make_scored(tmp_path_factory.mktemp("scored"), server.base_url)


@pytest.fixture(scope="session")
def release_estimate(scored_run, tmp_path_factory) -> Path:
    """`estimate`'s out= folder for a release of 10 conversations, 6 labelled, with the scored run's model."""
    from calibration.cli import main
    from rubric.servers.fake import FakeOpenAI

    root = tmp_path_factory.mktemp("release")
    with FakeOpenAI() as server:
        release = make_release(root, server.base_url, prefix="rel")
    args = ["estimate", f"data={release}", f"model={scored_run['model']}", f"out={root / 'est'}", "fail_under=0.05"]
    assert main(args) == 0
    return root / "est"


@pytest.fixture()
def scored_copy(scored_run, tmp_path) -> dict[str, Path]:
    """The scores folder copied, so that a test's publish state starts empty (the model and conversations shared)."""
    scores = tmp_path / "scores"
    shutil.copytree(scored_run["scores"].parent, scores)
    return {**scored_run, "scores": scores / scored_run["scores"].name}


@pytest.fixture(scope="session")
def mlflow_server(request, tmp_path_factory):
    """The session's `mlflow server` (tests/traces/servers.py: SQLite, a free port, shared with the import
    tests); skips where it is not installed."""
    try:
        from tests.traces.servers import shared_mlflow_or_skip
    except ImportError as exc:  # the import tests' server helpers
        pytest.skip(f"tests/traces/servers.py is not there ({exc})")
    return shared_mlflow_or_skip(request.config, tmp_path_factory)


@pytest.fixture(scope="session")
def phoenix_server(tmp_path_factory):
    """A running `phoenix serve` (tests/traces/servers.py: SQLite working folder, a free port)."""
    try:
        from tests.traces.servers import phoenix_or_skip
    except ImportError as exc:
        pytest.skip(f"tests/traces/servers.py is not there ({exc})")
    yield from phoenix_or_skip(tmp_path_factory.mktemp("phoenix_server"))


@pytest.fixture(scope="session")
def phoenix_scored(phoenix_server, tmp_path_factory) -> dict:
    """A chatbot's conversations sent to Phoenix as OpenInference spans, imported (`import source=phoenix`),
    gathered with the fake judge, a model trained, the conversations scored."""
    from calibration.cli import main
    from rubric.servers.fake import FakeOpenAI

    root = tmp_path_factory.mktemp("phoenix_scored")
    sent = phoenix_traces(phoenix_server.otlp_endpoint, PROJECT, n=8)
    _wait_for_spans(phoenix_server.url, PROJECT, len(sent))
    imported = root / "import"
    args = ["import", "source=phoenix", f"url={phoenix_server.url}", f"project={PROJECT}", f"out={imported}"]
    assert main(args) == 0
    conversations = imported / "conversations.jsonl"
    with FakeOpenAI() as server:
        paths = make_scored(root, server.base_url, conversations=conversations)
    return {**paths, "url": phoenix_server.url}


@pytest.fixture(scope="session")
def mlflow_scored(mlflow_server, tmp_path_factory) -> dict:
    """A chatbot's conversations traced into the MLflow server, imported (`import source=mlflow`), gathered with
    the fake judge, a model trained, the conversations scored; a release and its baseline estimated; a cv."""
    from calibration.cli import main
    from rubric.servers.fake import FakeOpenAI

    root = tmp_path_factory.mktemp("mlflow_scored")
    experiment_id, _ = mlflow_traces(mlflow_server.url, EXPERIMENT)
    imported = root / "import"
    args = [
        "import",
        "source=mlflow",
        f"tracking_uri={mlflow_server.url}",
        f"experiment={EXPERIMENT}",
        f"out={imported}",
    ]
    assert main(args) == 0
    conversations = imported / "conversations.jsonl"
    with FakeOpenAI() as server:
        paths = make_scored(root, server.base_url, conversations=conversations)
        baseline = make_release(root, server.base_url, prefix="base", seed=2)
        release = make_release(root, server.base_url, prefix="rel", seed=3)
    model = paths["model"]
    assert main(["estimate", f"data={baseline}", f"model={model}", f"out={root / 'est_base'}"]) == 0
    assert main(["estimate", f"data={release}", f"model={model}", f"out={root / 'est'}", f"baseline={baseline}",
                 "fail_under=0.05"]) == 0  # fmt: skip
    assert main(["cv", f"data={paths['data']}", f"out={root / 'cv'}", "train.ensemble=1", "train.pretrain_steps=20",
                 "train.finetune_steps=20", "folds=3"]) == 0  # fmt: skip
    return {**paths, "url": mlflow_server.url, "experiment_id": experiment_id, "root": root,
            "estimate": root / "est", "estimate_base": root / "est_base", "cv": root / "cv"}  # fmt: skip


def _wait_for_spans(url: str, project: str, count: int) -> None:
    """Phoenix stores the spans it receives in batches, a moment after the OTLP post returns: wait until all
    of them are there (the project itself only exists from its first stored span)."""
    import time

    client = pytest.importorskip("phoenix.client", reason="the publish tests read Phoenix with arize-phoenix-client")
    phoenix, deadline = client.Client(base_url=url), time.monotonic() + 120
    while True:
        try:
            if len(phoenix.spans.get_spans(project_identifier=project, limit=1000)) >= count:
                return
        except Exception:  # the project does not exist until its first span is stored
            pass
        assert time.monotonic() < deadline, f"Phoenix has not stored the {count} spans sent to project {project}"
        time.sleep(0.3)
