"""Fixtures: a small dataset with conversations (from the bundled tiny example) and a real Label Studio server.

The server is the `label-studio` of a separate environment (its dependencies clash with ours): the folder or
executable named by ROLE_RUBRIC_LABEL_STUDIO, else ROOT/.venv-label-studio (.ci/run makes it). It runs
offline (no version check, no analytics, no error reporting), in a temporary data folder, on a free port of
the loopback, and is stopped when the tests end. Where it is not installed or does not start, the tests that
need it skip with one reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.processes import ServerUnavailable, executable, free_port, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "rr-test-token-6f1d2c9a8b"  # the admin's legacy API token: must never appear in an output
ADMIN_EMAIL, ADMIN_PASSWORD = "admin@example.com", "admin-pass-123"  # the admin logs in to the browser tests
START_TIMEOUT = (
    300.0  # the first start migrates a fresh SQLite database: 34 s measured on 2 idle cores, 128 s on busy ones
)


def make_labelling_dataset(path: Path, *, n_conversations: int = 3, seed: int = 0) -> Path:
    """rubric.yaml (role adherence), the first conversations of data/examples/tiny, and judge distributions
    for every turn (random but seeded: the tests train on the labels, not on the judge)."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "conf" / "rubric" / "role_adherence.yaml", path / "rubric.yaml")
    lines = (ROOT / "data" / "examples" / "tiny" / "conversations.jsonl").read_text().splitlines()[:n_conversations]
    (path / "conversations.jsonl").write_text("\n".join(lines) + "\n")
    rows = []
    for line in lines:
        conv = json.loads(line)
        for t in range(len(conv["turns"])):
            for qid in ("scope", "tone", "prohibited", "next_step", "overall"):
                probs = rng.dirichlet(np.ones(4))
                rows += [
                    (conv["conversation_id"], t, qid, v, float(p)) for v, p in zip((1, 2, 3, 4), probs, strict=True)
                ]
    pd.DataFrame(rows, columns=["conversation_id", "turn", "question_id", "option", "prob"]).to_csv(
        path / "llm.csv", index=False
    )
    return path


@pytest.fixture()
def labelling_dir(tmp_path) -> Path:
    return make_labelling_dataset(tmp_path / "data")


@dataclass
class Server:
    url: str
    token: str
    log: Path

    def call(self, method: str, path: str, body=None):
        """The admin's JSON request to the server (what a reviewer's browser would send, done directly)."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.token}", "Content-Type": "application/json"},
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=60) as reply:
            text = reply.read()
        return json.loads(text) if text else None


def label_studio_executable() -> Path | None:
    return executable("ROLE_RUBRIC_LABEL_STUDIO", ROOT / ".venv-label-studio", "label-studio")


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory) -> Server:
    exe = label_studio_executable()
    if exe is None:
        pytest.skip(
            "Label Studio is not installed: set ROLE_RUBRIC_LABEL_STUDIO to a virtual environment with "
            "label-studio (.ci/run makes .venv-label-studio)"
        )
    home = tmp_path_factory.mktemp("label_studio")
    port = free_port()
    env = {
        **os.environ,
        "LATEST_VERSION_CHECK": "false",
        "COLLECT_ANALYTICS": "false",
        "SENTRY_DSN": "",
        "FRONTEND_SENTRY_DSN": "",
        "LABEL_STUDIO_BASE_DATA_DIR": str(home / "data"),
        "HOME": str(home),
    }
    log = home / "server.log"
    cmd = [
        str(exe),
        "start",
        "--no-browser",
        "--internal-host",
        "127.0.0.1",
        "-p",
        str(port),
        "--username",
        ADMIN_EMAIL,
        "--password",
        ADMIN_PASSWORD,
        "--user-token",
        TOKEN,
        "--enable-legacy-api-token",
    ]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, name="Label Studio", timeout=START_TIMEOUT, every=1.0)
    except ServerUnavailable as exc:
        stop(proc)
        pytest.skip(str(exc))
    try:
        yield Server(url, TOKEN, log)
    finally:
        stop(proc)
