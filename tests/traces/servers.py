"""Real tracing servers for the trace tests, started by the tests themselves, offline, on the loopback.

MLflow: the `mlflow server` of a separate environment (the full `mlflow` package; the project's own
environment has only the client, mlflow-skinny): the folder named by ROLE_RUBRIC_MLFLOW, else
ROOT/.venv-mlflow, made with

    python3 -m venv .venv-mlflow && .venv-mlflow/bin/pip install "mlflow[auth]==3.17.*"

([auth]: MLflow's basic-auth app, for the test of a server with authentication on.) It runs on a free port with a temporary SQLite database and artifact folder (artifacts served through the
server, so clients need no access to its disk), telemetry off, and is stopped when the tests end. Starting
takes ~20 s on 2 idle cores (the first start creates the database), so the conftest starts it once per
session. Where it is not installed or does not start, the tests that need it skip with one reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.processes import ServerUnavailable, executable, free_port, stop, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
MLFLOW_START_TIMEOUT = 240.0  # 19 s measured on 2 idle cores; several times that while other tests run
OFFLINE_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
"""Environment for every MLflow process of the tests, server and clients: nothing tries to reach outside."""


@dataclass
class MlflowServer:
    """A running `mlflow server`: `url` is its tracking URI; `python` the interpreter of its environment (with
    the full mlflow, for a traced program that needs more than the skinny client); `log` its output."""

    url: str
    python: Path
    home: Path
    log: Path
    admin: tuple[str, str] | None = None
    """With authentication on (`mlflow_server(auth=True)`): the admin's user name and password."""
    process: subprocess.Popen | None = None
    """The server's process (`stop(server.process)` takes it away in the middle of a test)."""


MLFLOW_ADMIN = ("admin", "admin-pass-for-tests-7c41")
"""The admin of a server with authentication on (MLflow's basic-auth app; mlflow[auth] installs it)."""


def mlflow_venv() -> Path | None:
    """The environment with the full mlflow (its `bin/mlflow`), or None where there is none."""
    named = os.environ.get("ROLE_RUBRIC_MLFLOW")
    for candidate in ([Path(named)] if named else []) + [ROOT / ".venv-mlflow"]:
        if (candidate / "bin" / "mlflow").is_file() and os.access(candidate / "bin" / "mlflow", os.X_OK):
            return candidate
    return None


@contextlib.contextmanager
def mlflow_server(home: Path, *, auth: bool = False) -> Iterator[MlflowServer]:
    """Start `mlflow server` with its database and artifacts under `home`; stop it (and its workers) on exit.
    auth=True: with MLflow's basic-auth app (users and passwords; MLFLOW_ADMIN is the admin), which needs the
    `mlflow[auth]` extra. Raises ServerUnavailable where it is not installed or does not answer /health in time."""
    venv = mlflow_venv()
    if venv is None:
        raise ServerUnavailable(
            "MLflow's server is not installed: set ROLE_RUBRIC_MLFLOW to a virtual environment with "
            'mlflow[auth]==3.17.* (python3 -m venv .venv-mlflow && .venv-mlflow/bin/pip install "mlflow[auth]==3.17.*")'
        )
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cmd = [
        str(venv / "bin" / "mlflow"),
        "server",
        "--backend-store-uri",
        f"sqlite:///{home / 'mlflow.db'}",
        "--artifacts-destination",
        str(home / "artifacts"),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    log = home / "server.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}  # nothing pointing it elsewhere
    # no job runner: it starts eight more processes (scheduled scorers, which no test uses) on 2 cores
    env.update(OFFLINE_ENV, HOME=str(home), MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    if auth:
        (home / "basic_auth.ini").write_text(
            "[mlflow]\ndefault_permission = READ\n"
            f"database_uri = sqlite:///{home / 'basic_auth.db'}\n"
            f"admin_username = {MLFLOW_ADMIN[0]}\nadmin_password = {MLFLOW_ADMIN[1]}\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n",
            encoding="utf-8",
        )
        env.update(MLFLOW_AUTH_CONFIG_PATH=str(home / "basic_auth.ini"), MLFLOW_FLASK_SERVER_SECRET_KEY="tests-only")
        cmd += ["--app-name", "basic-auth"]
    with open(log, "wb") as sink:
        proc = subprocess.Popen(cmd, env=env, cwd=home, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, name="mlflow server", timeout=MLFLOW_START_TIMEOUT, every=0.5)
        yield MlflowServer(url, venv / "bin" / "python", home, log, MLFLOW_ADMIN if auth else None, proc)
    finally:
        stop(proc)


_SHARED: dict[str, MlflowServer | ServerUnavailable] = {}


def shared_mlflow_server(config: Any, tmp_path_factory: Any) -> MlflowServer:
    """The one `mlflow server` of a pytest session, whichever fixture asks first (tests/traces' `mlflow_tracking`,
    tests/publish'): started once, stopped when the session ends. Raises ServerUnavailable (the same one again,
    at once, for later askers) where it is not installed or did not start."""
    known = _SHARED.get("mlflow")
    if known is None:
        stack = contextlib.ExitStack()
        try:
            known = stack.enter_context(mlflow_server(tmp_path_factory.mktemp("mlflow_server")))
            config.add_cleanup(stack.close)
        except ServerUnavailable as exc:
            known = exc
        _SHARED["mlflow"] = known
    if isinstance(known, ServerUnavailable):
        raise known
    return known


def shared_mlflow_or_skip(config: Any, tmp_path_factory: Any) -> MlflowServer:
    """shared_mlflow_server() for a fixture: the test that asks for it skips, with the reason, where the server
    is not installed or did not start."""
    try:
        return shared_mlflow_server(config, tmp_path_factory)
    except ServerUnavailable as exc:
        pytest.skip(str(exc))


# Phoenix ------------------------------------------------------------------------------------------------------
# The `phoenix serve` of a separate environment (arize-phoenix's dependencies clash with ours): the folder (or
# the executable) named by ROLE_RUBRIC_PHOENIX, else ROOT/.venv-phoenix, made with
#     python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install "arize-phoenix==20.*"
# It runs on SQLite in a temporary working folder, its UI and REST API on a free port of the loopback (its
# OTLP/gRPC receiver, unused here, on another free port: it has no host setting), with nothing fetched from or
# sent to the network: no telemetry pixels, no web fonts or sandbox download, no agent assistant.

PHOENIX_START_TIMEOUT = 240.0  # 17 s measured on 2 busy cores (the first start migrates a fresh database)
PHOENIX_AUTH = {  # authentication on: the JWT signing secret, and the admin's secret (a bearer token too)
    "PHOENIX_ENABLE_AUTH": "true",
    "PHOENIX_SECRET": "jwt-signing-secret-for-tests-0123456789abcXYZ",
    "PHOENIX_ADMIN_SECRET": "admin-secret-for-tests-9876543210zyxABC",
}


@dataclass
class PhoenixServer:
    """A running `phoenix serve`: `url` its address (UI and REST API under /v1), `otlp_endpoint` where spans
    are sent over OTLP/HTTP, `log` its output."""

    url: str
    otlp_endpoint: str
    home: Path
    log: Path
    admin_key: str | None = None
    """With authentication on (`phoenix_server(auth=True)`): the admin secret, a bearer token for every request."""

    def call(self, method: str, path: str, body: Any = None, *, key: str | None = None, cookies: str = "") -> Any:
        """One JSON request to the REST API as the admin (or with `key`; "": none); returns the reply's JSON."""
        headers = {"Content-Type": "application/json"}
        token = self.admin_key if key is None else key
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if cookies:
            headers["Cookie"] = cookies
        request = urllib.request.Request(
            self.url + path, method=method, headers=headers, data=None if body is None else json.dumps(body).encode()
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=60) as reply:
            text = reply.read()
        return json.loads(text) if text else None

    def user_key(self, username: str, password: str = "reviewer-pass-123") -> str:
        """A new member `username` and an API key of theirs (what a reviewer makes in Settings -> API Keys):
        what they annotate with carries their user. Needs authentication on."""
        email = f"{username}@example.com"
        user = {"email": email, "username": username, "password": password, "role": "MEMBER", "auth_method": "LOCAL"}
        self.call("POST", "/v1/users", {"user": user, "send_welcome_email": False})
        login = urllib.request.Request(
            self.url + "/auth/login",
            method="POST",
            headers={"Content-Type": "application/json"},
            data=json.dumps({"email": email, "password": password}).encode(),
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(login, timeout=60) as reply:
            cookies = "; ".join(c.split(";")[0] for c in reply.headers.get_all("Set-Cookie") or ())
        created = self.call("POST", "/v1/user/api_keys", {"data": {"name": f"{username}-key"}}, key="", cookies=cookies)
        return created["data"]["key"]


def phoenix_executable() -> Path | None:
    """`phoenix` of the environment ROLE_RUBRIC_PHOENIX names (or that executable), else of ROOT/.venv-phoenix."""
    return executable("ROLE_RUBRIC_PHOENIX", ROOT / ".venv-phoenix", "phoenix")


def phoenix_environment(home: Path, port: int, grpc_port: int, **settings: str) -> dict[str, str]:
    """`phoenix serve`'s environment: this machine's, without PHOENIX_*/OTEL_* settings that would point it
    elsewhere, plus the offline settings; `settings` adds PHOENIX_* ones (authentication, say)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))}
    return {
        **env,
        "HOME": str(home),
        "PHOENIX_WORKING_DIR": str(home / "phoenix"),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc_port),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
        "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
        **settings,
    }


@contextlib.contextmanager
def phoenix_server(home: Path, *, auth: bool = False) -> Iterator[PhoenixServer]:
    """Start `phoenix serve` with its database under `home`; stop it on exit. Raises ServerUnavailable where
    it is not installed or does not answer /healthz in time. auth=True: authentication on, every request needs
    an API key (the server's `admin_key`, or a user's: `user_key`)."""
    settings = PHOENIX_AUTH if auth else {}
    exe = phoenix_executable()
    if exe is None:
        raise ServerUnavailable(
            "Phoenix is not installed: set ROLE_RUBRIC_PHOENIX to a virtual environment with arize-phoenix 20 "
            '(python3 -m venv .venv-phoenix && .venv-phoenix/bin/pip install "arize-phoenix==20.*")'
        )
    home.mkdir(parents=True, exist_ok=True)
    port, grpc_port = free_port(), free_port()
    log = home / "phoenix.log"
    env = phoenix_environment(home, port, grpc_port, **settings)
    with open(log, "wb") as sink:
        proc = subprocess.Popen(
            [str(exe), "serve"], env=env, cwd=home, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(proc, url, log, name="phoenix serve", timeout=PHOENIX_START_TIMEOUT, probe="/healthz", every=0.5)
        yield PhoenixServer(url, url + "/v1/traces", home, log, PHOENIX_AUTH["PHOENIX_ADMIN_SECRET"] if auth else None)
    finally:
        stop(proc)


def phoenix_or_skip(home: Path, *, auth: bool = False) -> Iterator[PhoenixServer]:
    """phoenix_server() for a session fixture (`yield from`): the tests that ask for it skip, with the reason,
    where Phoenix is not installed or did not start."""
    try:
        with phoenix_server(home, auth=auth) as server:
            yield server
    except ServerUnavailable as exc:
        pytest.skip(str(exc))
