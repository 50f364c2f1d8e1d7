"""An MLflow tracking server -> `Span`s and reviewers' `Annotation`s, through MLflow's own client (mlflow-skinny,
the `[mlflow]` extra), so that every way MLflow authenticates works as it does for MLflow itself.

The experiment's traces are read page by page (`MlflowClient.search_traces`, oldest first), each page handed
on as it arrives, so memory does not grow with the experiment. Both kinds of trace an MLflow server holds come
out the same way: those logged by MLflow Tracing (`mlflow.openai.autolog()`, `@mlflow.trace`: the call's
request and response in `mlflow.spanInputs` / `mlflow.spanOutputs`) and those sent to its OTLP endpoint (the
instrumentation's own attributes, kept as sent). A span's trace id is OTLP's (32 hex); MLflow's id of the
trace ("tr-...") goes in `source_ids["mlflow_trace_id"]`, so that results can be written back to it. How one
trace becomes spans, its session a conversation and its HUMAN feedback annotations: mlflow_trace.py.

Credentials are MLflow's: MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD
(or token_env= naming another variable holding the token); never shown: every message is masked, the
tracking URI's password too.
"""

from __future__ import annotations

import contextlib
import difflib
import logging
import math
import os
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

from rubric.errors import InputError
from rubric.secrets import looks_like_secret, mask_secrets
from rubric.traces.mlflow_trace import spans_of_trace
from rubric.traces.spans import Annotation, Span, TraceSource

log = logging.getLogger(__name__)  # progress lines; calibration/cli.py prints them (rubric/notices.py)

TOKEN_ENV = "MLFLOW_TRACKING_TOKEN"
"""Where MLflow's clients read a bearer token; token_env= may name another variable."""

PAGE = 100
"""Traces per request (each trace's spans come in batches of 10 within it, as MLflow's client fetches them)."""

FIRST_CONTACT_S = 10.0
"""The first request waits at most this long, so that a server that is not there is one line within seconds."""

RETRIES = 3
"""Retries of a request that failed on the way (MLflow's client default, 7 with doubling waits, would hold an
import for minutes on a server that went away)."""

PROGRESS_EVERY_S = 10.0
"""Seconds between two progress lines of a long read (a server gives a few hundred traces a second)."""


class MlflowSource(TraceSource):
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
        self.experiment_id = self._experiment_id()
        self.source = {
            "kind": "mlflow",
            "tracking_uri": self.shown_uri,
            "experiment": self.experiment,
            "experiment_id": self.experiment_id,
        }
        """The conversation records' "source" field."""

    @classmethod
    def from_config(cls, cfg: Any) -> MlflowSource:
        """From an `import source=mlflow` command's typed object (attributes read one by one). token_env=
        left at the Label Studio default it shares with other commands means MLflow's own variables."""
        token_env = getattr(cfg, "token_env", None)
        if token_env == "LABEL_STUDIO_API_KEY":  # the shared key's default (calibration/schema/keys.py)
            token_env = None
        for key in ("tracking_uri", "experiment"):
            if getattr(cfg, key, None) in (None, "", "???"):
                raise InputError(
                    f"source=mlflow needs {key}=.",
                    fix="pass tracking_uri= the MLflow server (e.g. http://localhost:5000) and experiment= the name "
                    "of the experiment holding the chatbot's traces.",
                )
        return cls(
            str(cfg.tracking_uri),
            str(cfg.experiment),
            token_env=token_env,
            timeout=float(getattr(cfg, "timeout", 60) or 60),
            progress=bool(getattr(cfg, "progress", False)),
        )

    # -- TraceSource ---------------------------------------------------------------------------------------------
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
            with self._client_env():
                return client.search_traces(
                    locations=[self.experiment_id],
                    max_results=self.page_size,
                    order_by=["timestamp_ms ASC"],
                    page_token=token,
                )
        except MlflowException as exc:
            raise InputError(
                f"reading the traces of {self.description} failed ({self._mask(_reason(exc, self.timeout))}).",
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
        if reply.status_code == 404 and _error_code(reply) == "RESOURCE_DOES_NOT_EXIST":
            raise self._unknown_experiment()
        experiment = self._json(reply, "the experiment").get("experiment")
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
        names = [str(e.get("name")) for e in self._json(reply, "the experiments").get("experiments") or []]
        names = sorted(n for n in names if n and n != "None")
        close = difflib.get_close_matches(self.experiment, names, n=3, cutoff=0.5)  # a typo's likely target first
        names = close + [n for n in names if n not in close]
        shown = ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        return InputError(
            f"MLflow at {self.shown_uri} has no experiment {self.experiment!r}"
            + (f" (it has {shown})." if names else " (it has none)."),
            fix="set experiment= to the name of the experiment holding the chatbot's traces, as MLflow's UI lists it.",
        )

    def _get(self, endpoint: str, params: Mapping[str, Any], *, what: str) -> Any:
        from mlflow.exceptions import MlflowException
        from mlflow.utils.credentials import get_default_host_creds
        from mlflow.utils.rest_utils import http_request

        try:
            with self._client_env():
                reply = http_request(
                    get_default_host_creds(self.tracking_uri),
                    endpoint,
                    "GET",
                    max_retries=0,
                    timeout=self._first_wait,
                    params=dict(params),
                )
        except MlflowException as exc:
            raise InputError(
                f"cannot reach MLflow at {self.shown_uri} ({self._mask(_reason(exc, self._first_wait))}).",
                fix="start the tracking server (mlflow server) or correct tracking_uri= (e.g. http://localhost:5000).",
            ) from None
        if reply.status_code in (401, 403):
            raise InputError(
                f"MLflow at {self.shown_uri} refused "
                + ("the credentials" if self._has_credentials() else "a request without credentials")
                + f" for {what} (HTTP {reply.status_code}).",
                fix="put a token in MLFLOW_TRACKING_TOKEN (or the variable token_env= names), or a user and "
                "password in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD; they are read from there only "
                "and never written.",
            )
        return reply

    def _json(self, reply: Any, what: str) -> dict:
        try:
            body = reply.json()
        except ValueError:
            body = None
        if reply.status_code != 200 or not isinstance(body, dict):
            raise self._not_mlflow(what, reply.status_code)
        return body

    def _not_mlflow(self, what: str, status: int | None = None) -> InputError:
        return InputError(
            f"{self.shown_uri} did not answer {what} as an MLflow tracking server does"
            + (f" (HTTP {status})" if status else "")
            + "; is it one?",
            fix="set tracking_uri= to the MLflow server's address (its UI's, e.g. http://localhost:5000).",
        )

    @contextlib.contextmanager
    def _client_env(self) -> Iterator[None]:
        """MLflow's client reads its timeout, retries and token from the environment at each request, and
        resolves mlflow-artifacts: locations (spans a client uploaded as a trace's artifact, when the server
        refused them over OTLP) against the global tracking URI, not the client's: set them all for our requests
        only, and put them back after."""
        from mlflow.tracking._tracking_service.utils import _use_tracking_uri

        wanted = {  # MLFLOW_TRACKING_URI: _use_tracking_uri unsets it on the way out; put back as it was
            "MLFLOW_TRACKING_URI": self.tracking_uri,
            "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, math.ceil(self.timeout))),
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": str(RETRIES),
        }
        if self._token:
            wanted[TOKEN_ENV] = self._token
        with environment(wanted), _use_tracking_uri(self.tracking_uri):
            yield

    @property
    def _first_wait(self) -> float:
        return min(self.timeout, FIRST_CONTACT_S)

    def _has_credentials(self) -> bool:
        return bool(self._token or os.environ.get(TOKEN_ENV) or os.environ.get("MLFLOW_TRACKING_USERNAME"))

    def _mask(self, text: str) -> str:
        return mask_secrets(
            text, self._token, self._password, os.environ.get(TOKEN_ENV), os.environ.get("MLFLOW_TRACKING_PASSWORD")
        )


def _error_code(reply: Any) -> str:
    try:
        body = reply.json()
    except ValueError:
        return ""
    return str(body.get("error_code") or "") if isinstance(body, dict) else ""


def _reason(exc: Exception, waited: float) -> str:
    """Why a request failed, in a few words: the network error under MLflow's wrapping."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        inner = cause.__cause__ or cause.__context__
        if inner is cause:
            break
        cause = inner
    text = _first_line(cause or exc)
    if "refused" in text.lower():
        return "connection refused"
    if "timed out" in text.lower() or "timeout" in type(cause).__name__.lower():
        return f"no answer within {waited:g} s"
    if "name or service not known" in text.lower() or "nodename nor servname" in text.lower():
        return "unknown host"
    return text[:200]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines() or [type(exc).__name__])[0].rstrip(".")


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
    if looks_like_secret(token_env):
        raise InputError(
            "token_env= is given what looks like the token itself (not shown here); it takes the name of an "
            "environment variable.",
            fix=f"export {TOKEN_ENV}=<your token> and leave token_env= out; the token never goes on the command line.",
        )
    token = os.environ.get(token_env, "").strip()
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
def environment(wanted: Mapping[str, str]) -> Iterator[None]:
    """These environment variables set for the block, and put back as they were after it (MLflow's client reads
    its timeout, retries and credentials from the environment at each request)."""
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
