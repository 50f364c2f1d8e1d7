"""The MLflow client as publish uses it: the server checked first (one line naming it when it does not
answer within `timeout`), every message masked (the token in MLFLOW_TRACKING_TOKEN or MLFLOW_TRACKING_PASSWORD,
which the client reads from the environment itself). The probe goes through rubric/transport/rest.py's opener
(the environment's proxies, except for a server on this machine); the client's own retries and waits are
MLflow's (MLFLOW_HTTP_REQUEST_MAX_RETRIES, MLFLOW_HTTP_REQUEST_TIMEOUT, set in the environment by whoever
runs publish: publish changes no environment variable). And what every MLflow write of publish shares: the
traces looked up before anything is written, an assessment of role-rubric found again, created, updated or
left as it is."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from calibration.publish.state import mask_url
from rubric.errors import InputError
from rubric.transport.rest import opener_for


def probe(uri: str, timeout: float) -> None:
    """Check the server answers its /health with OK, within `timeout`: one line naming it if not."""
    try:
        with opener_for(uri).open(uri + "/health", timeout=timeout) as reply:
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


def trace_infos(
    client: Any, uri: str, trace_ids: list[str], *, what: str, path: Path | None, progress: bool = False
) -> dict[str, Any]:
    """Every trace of `trace_ids`, looked up before anything is written (a deleted one stops the publish; what:
    whose traces they are, in that message, e.g. "scores"; path: its file)."""
    from mlflow.exceptions import MlflowException

    from rubric.progress import progress_iter

    infos, missing = {}, []
    ids = dict.fromkeys(trace_ids)
    for tid in progress_iter(ids, progress, desc="publish: looking up traces", unit="trace"):
        try:
            infos[tid] = client.get_trace_info(tid)
        except MlflowException as exc:
            if exc.error_code not in ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND", "INVALID_PARAMETER_VALUE"):
                raise server_error(uri, exc, "a trace look-up") from None
            missing.append(tid)
    if missing:
        raise InputError(
            f"{len(missing)} of the {len(infos) + len(missing)} traces of these {what} are not on {mask_url(uri)} "
            f"(deleted since the import, or another server): {', '.join(missing[:3])}"
            + (", ..." if len(missing) > 3 else "")
            + "; nothing was published.",
            path=path,
            fix="publish to the server the conversations were imported from, or import and score them again.",
        )
    return infos


def existing(info: Any, name: str, source_id: str, same: Callable[[Any], bool]) -> Any | None:
    """This source's valid assessment `name` on the trace that `same` picks, if there is one."""
    for a in info.assessments or []:
        if (
            a.name == name
            and a.source is not None
            and a.source.source_id == source_id
            and a.valid is not False
            and same(a)
        ):
            return a
    return None


def put(client: Any, uri: str, trace_id: str, wanted: Any, found: Any | None, earlier: Any | None = None) -> str:
    """Create, update or leave one assessment (a new one overriding `earlier`, another model's): which it was."""
    from mlflow.exceptions import MlflowException

    try:
        if found is None and earlier is not None:
            wanted.overrides = earlier.assessment_id  # MLflow marks `earlier` invalid and keeps it as history
            client.log_assessment(trace_id, wanted)
            return "superseded"
        if found is None:
            client.log_assessment(trace_id, wanted)
            return "created"
        same = (
            found.value == wanted.value
            and found.rationale == wanted.rationale
            and (found.metadata or {}) == (wanted.metadata or {})
        )
        if same:
            return "unchanged"
        client.update_assessment(trace_id=trace_id, assessment_id=found.assessment_id, assessment=wanted)
        return "updated"
    except MlflowException as exc:
        raise server_error(uri, exc, f"a feedback on trace {trace_id}") from None
