"""`import source=mlflow`: an MLflow tracking server -> `Span`s and reviewers' `Annotation`s, through MLflow's
public client (`MlflowClient(tracking_uri=...)`, mlflow-skinny, the `[mlflow]` extra) and its public REST API
for the first contact (rubric/transport/rest.py: quick, one line when the server is not there).

The experiment's traces are read page by page (`MlflowClient.search_traces`, oldest first), each page handed
on as it arrives, so memory does not grow with the experiment. Both kinds of trace an MLflow server holds come
out the same way: those logged by MLflow Tracing (`mlflow.openai.autolog()`, `@mlflow.trace`: the call's
request and response in `mlflow.spanInputs` / `mlflow.spanOutputs`) and those sent to its OTLP endpoint (the
instrumentation's own attributes, kept as sent). A span's trace id is OTLP's (32 hex); MLflow's id of the
trace ("tr-...") goes in `source_ids["mlflow_trace_id"]`, so that results can be written back to it. How one
trace becomes spans, its session a conversation and its HUMAN feedback annotations: mlflow_trace.py.

Credentials are MLflow's: MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD
(or token_env= naming another variable holding the token); never shown: every message is masked, the
tracking URI's password too. MLflow's client takes its timeout, retries and token from the environment only,
and resolves uploaded spans against the global tracking URI: `_client_settings` and `_artifacts_of` set them
for the import's requests only and put them back (why, in their docstrings); nothing else touches the process.
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import logging
import math
import os
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from calibration.connectors.trace_import import import_traces
from calibration.schema.source_keys import MlflowKeys
from rubric.errors import InputError
from rubric.secrets import mask_secrets, secret_in_env
from rubric.traces.assemble import TraceSelection
from rubric.traces.mlflow_trace import spans_of_trace
from rubric.traces.spans import Annotation, Span
from rubric.transport.rest import HttpRefused, NotJson, RestClient, Unreachable

log = logging.getLogger(__name__)  # progress lines; calibration/cli.py prints them (rubric/notices.py)

TOKEN_ENV = "MLFLOW_TRACKING_TOKEN"
"""Where MLflow's clients read a bearer token; token_env= may name another variable."""

PAGE = 100
"""Traces per request (each trace's spans come in batches of 10 within it, as MLflow's client fetches them)."""

FIRST_CONTACT_S = 10.0
"""The first request waits at most this long, so that a server that is not there is one line within seconds."""

PROGRESS_EVERY_S = 10.0
"""Seconds between two progress lines of a long read (a server gives a few hundred traces a second)."""


class MlflowTraces:
    """source=mlflow (calibration/connectors/sources.py's contract)."""

    settings: ClassVar[type[MlflowKeys]] = MlflowKeys

    def __init__(self, settings: MlflowKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        keys = self.keys
        token_env = None if keys.token_env == TOKEN_ENV else keys.token_env  # MLflow's own: its client reads it

        def reader(selection: TraceSelection) -> MlflowSource:
            return MlflowSource(
                keys.tracking_uri, keys.experiment, token_env=token_env, timeout=keys.timeout, progress=progress
            )

        return import_traces(keys, reader, out=out, progress=progress, label_map=keys.label_map)


class MlflowSource:
    """The spans and HUMAN feedback of one experiment of an MLflow tracking server (`tracking_uri` as given to
    MLflow, e.g. http://localhost:5000). The server and the experiment are checked as this is made:
    unreachable, refused or unknown is one InputError before anything is read."""

    def __init__(
        self,
        tracking_uri: str,
        experiment: str,
        *,
        token_env: str | None = None,
        timeout: float = 60.0,
        page_size: int = PAGE,
        progress: bool = False,
    ):
        _require_mlflow()
        self.tracking_uri = str(tracking_uri).strip().rstrip("/")
        self.experiment = str(experiment)
        self.timeout = float(timeout)
        self.page_size = int(page_size)
        self.progress = bool(progress)
        self._token = _token(token_env)
        self._password = urllib.parse.urlsplit(self.tracking_uri).password
        self.shown_uri = self._mask(_without_password(self.tracking_uri))
        self.description = f"MLflow experiment {self.experiment!r} at {self.shown_uri}"
        self._annotations: list[Annotation] = []
        self._read = False
        self._rest = RestClient(
            _without_user(self.tracking_uri),
            service="MLflow",
            headers=self._auth_headers(),
            timeout=self._first_wait,
            retries=0,  # the first contact: one line within seconds when the server is not there
            secrets=[s for s in (self._token, self._password) if s],
        )
        self.experiment_id = self._experiment_id()

    @property
    def record(self) -> dict[str, Any]:
        """The conversation records' "source" field (with "kind")."""
        return {"tracking_uri": self.shown_uri, "experiment": self.experiment, "experiment_id": self.experiment_id}

    # -- SpanReader ----------------------------------------------------------------------------------------------
    def spans(self) -> Iterator[Span]:
        """Every span of the experiment's traces, oldest trace first, a page at a time; the HUMAN feedback on
        them is collected on the way (`annotations()`)."""
        from mlflow import MlflowClient

        client = MlflowClient(tracking_uri=self.tracking_uri)
        self._annotations = []
        token: str | None = None
        first = True
        traces, said_at = 0, time.monotonic()
        while True:
            page = self._page(client, token)
            if first and not page and not page.token:
                raise InputError(
                    f"{self.description} has no traces.",
                    fix="check experiment= (the experiment the chatbot's traces are logged to: "
                    "mlflow.set_experiment(), or the x-mlflow-experiment-id header of an OTLP exporter).",
                )
            first = False
            for trace in page:
                yield from spans_of_trace(trace, self._annotations)
            traces += len(page)
            if self.progress and time.monotonic() - said_at >= PROGRESS_EVERY_S:
                log.info(f"import: {traces:,} traces read from {self.description}")
                said_at = time.monotonic()
            token = page.token
            if not token:
                break
        self._read = True

    def annotations(self) -> Iterator[Annotation]:
        """The HUMAN feedback on the experiment's traces and sessions (read with the spans: when the spans have
        not been read yet, they are read here)."""
        if not self._read:
            for _ in self.spans():
                pass
        yield from self._annotations

    # -- traces --------------------------------------------------------------------------------------------------
    def _page(self, client: Any, token: str | None) -> Any:
        from mlflow.exceptions import MlflowException

        try:
            with _client_settings(self._token, self.timeout), _artifacts_of(self.tracking_uri):
                return client.search_traces(
                    locations=[self.experiment_id],
                    max_results=self.page_size,
                    order_by=["timestamp_ms ASC"],
                    page_token=token,
                )
        except MlflowException as exc:
            raise InputError(
                f"reading the traces of {self.description} failed ({self._mask(_reason(_cause(exc), self.timeout))}).",
                fix="check that the server is up and the credentials are allowed to read the experiment "
                "(MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD).",
            ) from None

    # -- the server and the experiment ---------------------------------------------------------------------------
    def _experiment_id(self) -> str:
        """The experiment's id, asked of the server once, quickly: an unreachable server, refused credentials,
        something that is no MLflow server or an unknown experiment are each one line."""
        reply = self._get(
            "/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": self.experiment}, what="the experiment"
        )
        if reply is None:
            raise self._unknown_experiment()
        experiment = reply.get("experiment")
        if not isinstance(experiment, dict) or not experiment.get("experiment_id"):
            raise self._not_mlflow("the experiment")
        if experiment.get("lifecycle_stage") == "deleted":
            raise InputError(
                f"{self.description} is deleted.",
                fix="restore it (mlflow experiments restore, or the UI's trash) or choose another experiment=.",
            )
        return str(experiment["experiment_id"])

    def _unknown_experiment(self) -> InputError:
        reply = self._get("/api/2.0/mlflow/experiments/search", {"max_results": 50}, what="the experiments")
        if reply is None:  # no MLflow answers 404 for its list of experiments
            return self._not_mlflow("the experiment", 404)
        names = [str(e.get("name")) for e in reply.get("experiments") or []]
        names = sorted(n for n in names if n and n != "None")
        close = difflib.get_close_matches(self.experiment, names, n=3, cutoff=0.5)  # a typo's likely target first
        names = close + [n for n in names if n not in close]
        shown = ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        return InputError(
            f"MLflow at {self.shown_uri} has no experiment {self.experiment!r}"
            + (f" (it has {shown})." if names else " (it has none)."),
            fix="set experiment= to the name of the experiment holding the chatbot's traces, as MLflow's UI lists it.",
        )

    def _get(self, endpoint: str, params: Mapping[str, Any], *, what: str) -> dict[str, Any] | None:
        """The JSON object MLflow's REST API answers (None: HTTP 404, an unknown experiment)."""
        try:
            reply = self._rest.get(endpoint, params, what=what)
        except Unreachable as exc:
            raise InputError(
                f"cannot reach MLflow at {self.shown_uri} ({_reason(exc.reason, self._first_wait)}).",
                fix="start the tracking server (mlflow server) or correct tracking_uri= (e.g. http://localhost:5000).",
            ) from None
        except HttpRefused as exc:
            if exc.status in (401, 403):
                raise InputError(
                    f"MLflow at {self.shown_uri} refused "
                    + ("the credentials" if self._has_credentials() else "a request without credentials")
                    + f" for {what} (HTTP {exc.status}).",
                    fix="put a token in MLFLOW_TRACKING_TOKEN (or the variable token_env= names), or a user and "
                    "password in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD; they are read from there "
                    "only and never written.",
                ) from None
            if exc.status == 404:
                return None
            raise self._not_mlflow(what, exc.status) from None
        except NotJson:
            raise self._not_mlflow(what) from None
        if not isinstance(reply, dict):
            raise self._not_mlflow(what)
        return reply

    def _auth_headers(self) -> dict[str, str]:
        """As MLflow's client sends them: a bearer token, else a user and password (the environment's, or the
        tracking URI's)."""
        if self._token or os.environ.get(TOKEN_ENV):
            return {"Authorization": f"Bearer {self._token or os.environ[TOKEN_ENV]}"}
        parts = urllib.parse.urlsplit(self.tracking_uri)
        user = os.environ.get("MLFLOW_TRACKING_USERNAME") or parts.username
        password = os.environ.get("MLFLOW_TRACKING_PASSWORD") or parts.password
        if user and password:
            return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        return {}

    def _not_mlflow(self, what: str, status: int | None = None) -> InputError:
        return InputError(
            f"{self.shown_uri} did not answer {what} as an MLflow tracking server does"
            + (f" (HTTP {status})" if status else "")
            + "; is it one?",
            fix="set tracking_uri= to the MLflow server's address (its UI's, e.g. http://localhost:5000).",
        )

    @property
    def _first_wait(self) -> float:
        return min(self.timeout, FIRST_CONTACT_S)

    def _has_credentials(self) -> bool:
        return bool(self._token or os.environ.get(TOKEN_ENV) or os.environ.get("MLFLOW_TRACKING_USERNAME"))

    def _mask(self, text: str) -> str:
        return mask_secrets(
            text, self._token, self._password, os.environ.get(TOKEN_ENV), os.environ.get("MLFLOW_TRACKING_PASSWORD")
        )


def _reason(text: str, waited: float) -> str:
    """Why a request failed, in a few words."""
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower() or "timeout" in text.lower():
        return f"no answer within {waited:g} s"
    if "name or service not known" in text.lower() or "nodename nor servname" in text.lower():
        return "unknown host"
    return text[:200]


def _cause(exc: BaseException) -> str:
    """The first line of the innermost error under MLflow's wrapping (the network's own words)."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        inner = cause.__cause__ or cause.__context__
        if inner is cause:
            break
        cause = inner
    text = str(cause or exc).strip()
    return (text.splitlines() or [type(cause or exc).__name__])[0].rstrip(".")


def _without_user(uri: str) -> str:
    """The URI without user and password (they travel in the authorization header)."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _without_password(uri: str) -> str:
    """The URI with a password in it (http://user:secret@host) replaced by ***."""
    parts = urllib.parse.urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def _token(token_env: str | None) -> str | None:
    """A bearer token from the variable token_env= names (None: MLflow's own variables, read by its client);
    a variable named on purpose must be set, and a name that looks like the token itself is refused."""
    if not token_env:
        return None
    token = secret_in_env(
        token_env,
        what="token",
        fix=f"export {TOKEN_ENV}=<your token> and leave token_env= out; the token never goes on the command line.",
    )
    if not token:
        raise InputError(
            f"token_env={token_env} names an environment variable that is not set.",
            fix=f"export {token_env}=<your MLflow token>, or leave token_env= out (MLflow's own {TOKEN_ENV}, "
            "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD are read then).",
        )
    return token


def _require_mlflow() -> None:
    from rubric.extras import require

    require("mlflow", by="import source=mlflow")


@contextlib.contextmanager
def _client_settings(token: str | None, timeout: float) -> Iterator[None]:
    """MLflow's client takes its request timeout, its retries and a bearer token from environment variables only
    (MLFLOW_HTTP_REQUEST_TIMEOUT, MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_TRACKING_TOKEN: no argument of the public
    `MlflowClient` takes them), read at each request. Its defaults (7 retries, waits doubling to two minutes) would
    hold an import for minutes on a server that went away, so these are set for our requests only and put back
    after: the one place the import touches process state (with `_artifacts_of`). The token is set only when
    token_env= names another variable than MLflow's own."""
    wanted = {"MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(timeout))), "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3"}
    if token:
        wanted[TOKEN_ENV] = token
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def _artifacts_of(tracking_uri: str) -> Iterator[None]:
    """MLflow's tracing client downloads the spans a client uploaded as a trace's artifact (when the server
    refused them over OTLP) from an mlflow-artifacts: location, which it resolves against the global tracking
    URI, not the client's own (mlflow 3: `get_artifact_repository(uri)` in mlflow/tracing/client.py): so the
    global URI is set, through MLflow's public `set_tracking_uri`, for our requests only, and put back after
    (None: unset, as it was)."""
    import mlflow

    before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(tracking_uri)
    try:
        yield
    finally:
        mlflow.set_tracking_uri(before)  # type: ignore[arg-type]  # None unsets it (MLflow's own way back)
