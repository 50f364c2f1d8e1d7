"""`role-rubric publish`: results back where the traces are.

Its keys: calibration.schema.commands_publish `Publish` (`role-rubric publish --help`); the library it calls:
calibration/publish/ (results.py reads what `score` wrote; otel.py, mlflow.py and phoenix.py write it).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from calibration.schema.commands_publish import Publish as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Any) -> dict[str, Any]:
    """CLI: `role-rubric publish target=otel|mlflow|phoenix ...` (the keys' rules, checked before: which
    target needs which key): what was published, per kind."""
    from rubric.extras import require

    # a missing extra is one line with its install command, before anything is read or sent
    require(cfg.target, by=f"publish target={cfg.target}")
    publish = {"otel": _otel, "mlflow": _mlflow, "phoenix": _phoenix}[cfg.target]
    key = {"otel": "endpoint", "mlflow": "tracking_uri", "phoenix": "url"}[cfg.target]
    with not_json_is_one_line(key, getattr(cfg, key)):
        return publish(cfg)


@contextlib.contextmanager
def not_json_is_one_line(key: str, url: str | None) -> Iterator[None]:
    """A server that answers where JSON is expected with something else (a proxy's page, another service on
    that port, a text "OK" everywhere) is one line naming it; the files publish reads are read by functions
    that name them, so what is not JSON here came from the server."""
    from calibration.publish.state import mask_url
    from rubric.errors import InputError

    try:
        yield
    except json.JSONDecodeError as exc:
        raise InputError(
            f"the server at {mask_url(str(url))} answered with something that is not JSON ({exc.msg}, at character "
            f"{exc.pos}): it is not the server {key}= should name, or something in between answered for it.",
            fix=f"check {key}= (the server's own address and port); nothing more was published.",
        ) from None


def _no_credentials(uri: str) -> None:
    """A user and password in tracking_uri= (http://user:pass@host) are refused: MLflow's client reads them
    from its own variables, and on the command line they would stay in the shell's history."""
    from urllib.parse import urlsplit

    from calibration.publish.state import mask_url
    from rubric.errors import InputError

    parts = urlsplit(str(uri))
    if parts.username is not None or parts.password is not None:
        raise InputError(
            f"tracking_uri= {mask_url(str(uri))} carries a user name or password; publish does not read "
            "credentials from the address.",
            fix="export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) and pass "
            f"tracking_uri={parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}.",
        )


def _scored(cfg: Any) -> Any:
    from calibration.publish.results import read_scored

    return read_scored(cfg.scores, model=cfg.model, conversations=cfg.conversations)


def _otel(cfg: Any) -> dict[str, Any]:
    """The scores' events (each turn's and conversation's) and an estimate's (the release's rate and interval)."""
    from calibration.publish import otel
    from calibration.publish.results import read_output
    from calibration.publish.state import PublishState, mask_url, state_path

    items, what = [], []
    if cfg.scores is not None:
        scored = _scored(cfg)
        items += otel.score_events(scored)
        stamp_of, state_file, model = Path(scored.scores), state_path(scored.scores), scored.model.checksum
        what.append(f"{len(scored.turns)} turns, {len(scored.sessions)} conversations")
    if cfg.estimate is not None:
        file, result = read_output(cfg.estimate, "estimate.json", command="estimate", key="estimate", needs="rate")
        found = otel.estimate_events(result, name=file.parent.name)
        items += found
        what.append(f"the release's rate, {len(found)} scopes")
        if cfg.scores is None:
            stamp_of, state_file, model = file, file.with_name("estimate_published.json"), ""
    stamp = int(stamp_of.stat().st_mtime_ns)  # when score / estimate wrote it: the same on every publish
    if cfg.out is not None:
        n = otel.write_file(items, Path(cfg.out), time_unix_nano=stamp)
        log.info(f"publish: wrote {n} gen_ai.evaluation.result events ({'; '.join(what)}) to {cfg.out}")
        return {"events": n, "out": str(cfg.out)}
    state = PublishState(state_file, f"otel {mask_url(cfg.endpoint)}", model)
    sent, before = otel.post(
        items,
        str(cfg.endpoint),
        time_unix_nano=stamp,
        timeout=float(cfg.timeout),
        state=state,
        progress=bool(cfg.progress),
    )
    log.info(
        f"publish: posted {sent} gen_ai.evaluation.result events to {mask_url(cfg.endpoint)}"
        + (f" ({before} already there)" if before else "")
        + f"; progress kept in {state.path}"
    )
    return {"events": sent, "already": before, "endpoint": mask_url(cfg.endpoint)}


def _mlflow(cfg: Any) -> dict[str, Any]:
    from calibration.publish import mlflow

    _no_credentials(cfg.tracking_uri)
    # MLflow's client logs "Response is not a valid JSON object" before it raises: not_json_is_one_line says it
    rest = logging.getLogger("mlflow.utils.rest_utils")
    level = rest.level
    rest.setLevel(logging.ERROR)
    try:
        return mlflow.publish(
            cfg.tracking_uri,
            scored=_scored(cfg) if cfg.scores is not None else None,
            estimate=cfg.estimate,
            cv=cfg.cv,
            experiment=cfg.experiment,
            run_name=cfg.run_name,
            model=cfg.model,
            timeout=cfg.timeout,
            say=log.info,
            progress=bool(cfg.progress),
        )
    finally:
        rest.setLevel(level)


def _phoenix(cfg: Any) -> dict[str, Any]:
    from phoenix.client.exceptions import PhoenixException

    from calibration.publish import phoenix
    from calibration.publish.state import mask_url
    from rubric.errors import InputError

    try:
        return phoenix.publish(
            cfg.url,
            _scored(cfg),
            token_env=cfg.token_env,
            timeout=cfg.timeout,
            say=log.info,
            progress=bool(cfg.progress),
        )
    except PhoenixException as exc:  # its client asks the server's version first: another server has none
        raise InputError(
            f"the server at {mask_url(cfg.url)} does not answer as a Phoenix server does ({exc}).",
            fix="check url= (the Phoenix server's own address and port); a second publish replaces what was sent.",
        ) from None
