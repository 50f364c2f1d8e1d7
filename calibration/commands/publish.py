"""`role-rubric publish`: results back where the traces are.

Its keys: calibration.schema.commands_publish `Publish` (`role-rubric publish --help`); the library it calls:
calibration/publish/ (results.py reads what `score` wrote; otel.py, mlflow.py and phoenix.py write it).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_publish import Publish as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Any) -> dict[str, Any]:
    """CLI: `role-rubric publish target=otel|mlflow|phoenix ...` (the keys' rules, checked before: which
    target needs which key): what was published, per kind."""
    if cfg.target == "otel":
        return _otel(cfg)
    if cfg.target == "mlflow":
        return _mlflow(cfg)
    return _phoenix(cfg)


def _scored(cfg: Any) -> Any:
    from calibration.publish.results import read_scored

    return read_scored(cfg.scores, model=cfg.model, conversations=cfg.conversations)


def _stamp(scored: Any) -> int:
    """The events' time: when `score` wrote the scores (the same on every publish, so the file is too)."""
    return int(Path(scored.scores).stat().st_mtime_ns)


def _otel(cfg: Any) -> dict[str, Any]:
    from calibration.publish import otel
    from calibration.publish.state import PublishState, mask_url, state_path

    scored = _scored(cfg)
    if cfg.out is not None:
        n = otel.write_file(scored, Path(cfg.out), time_unix_nano=_stamp(scored))
        log.info(f"publish: wrote {n} gen_ai.evaluation.result events ({len(scored.turns)} turns, "
                 f"{len(scored.sessions)} conversations) to {cfg.out}")  # fmt: skip
        return {"events": n, "out": str(cfg.out)}
    state = PublishState(state_path(scored.scores), f"otel {mask_url(cfg.endpoint)}", scored.model.checksum)
    sent, before = otel.post(
        scored, str(cfg.endpoint), time_unix_nano=_stamp(scored), timeout=float(cfg.timeout), state=state
    )
    log.info(
        f"publish: posted {sent} gen_ai.evaluation.result events to {mask_url(cfg.endpoint)}"
        + (f" ({before} already there)" if before else "")
        + f"; progress kept in {state.path}"
    )
    return {"events": sent, "already": before, "endpoint": mask_url(cfg.endpoint)}


def _mlflow(cfg: Any) -> dict[str, Any]:
    from calibration.publish import mlflow

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
    )


def _phoenix(cfg: Any) -> dict[str, Any]:
    from calibration.publish import phoenix

    return phoenix.publish(cfg.url, _scored(cfg), token_env=cfg.token_env, timeout=cfg.timeout, say=log.info)
