"""The MLflow client as publish uses it: the server checked first (one line naming it when it does not
answer), few retries and a bounded wait per request while publishing, every message masked (the token in
MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_PASSWORD, which the client reads from the environment itself)."""

from __future__ import annotations

import contextlib
import os
import urllib.request
from collections.abc import Iterator
from typing import Any

from calibration.publish.state import mask_url
from rubric.errors import InputError
from rubric.traces.mlflow_source import environment


@contextlib.contextmanager
def connected(uri: str, timeout: float) -> Iterator[None]:
    """Check the server answers (one line naming it, within `timeout`, if not), then let the client retry
    little and wait at most `timeout` per request while publishing."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(uri + "/health", timeout=timeout) as reply:
            ok = reply.status == 200
    except OSError as exc:
        reason = getattr(exc, "reason", None) or exc
        raise InputError(
            f"the MLflow server at {mask_url(uri)} does not answer ({masked(reason)}).",
            fix="start it (`mlflow server ...`) or pass tracking_uri= the address it listens on.",
        ) from None
    if not ok:
        raise InputError(
            f"{mask_url(uri)} is not an MLflow server (its /health did not answer OK).", fix="check tracking_uri=."
        )
    wanted = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_TIMEOUT": str(max(1, round(timeout)))}
    with environment(wanted):
        yield


def masked(text: Any) -> str:
    from rubric.secrets import mask_secrets

    return mask_secrets(str(text), os.environ.get("MLFLOW_TRACKING_TOKEN"), os.environ.get("MLFLOW_TRACKING_PASSWORD"))


def client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def tracing(uri: str) -> Any:
    from mlflow.tracing.client import TracingClient

    return TracingClient(tracking_uri=uri)


def server_error(uri: str, exc: Exception, what: str) -> InputError:
    return InputError(
        f"the MLflow server at {mask_url(uri)} refused {what}: {masked(getattr(exc, 'message', exc))[:300]}",
        fix="check the token in MLFLOW_TRACKING_TOKEN and the server's log, then publish again: it resumes.",
    )
