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
    """CLI: `role-rubric publish target=otel|mlflow|phoenix ...`: what was published, per kind."""
    from rubric.errors import InputError

    target = str(cfg.target)
    if target != "mlflow" and (cfg.estimate is not None or cfg.cv is not None):
        raise InputError(
            f"estimate= and cv= are published as MLflow runs, not to target={target}.",
            fix="pass target=mlflow tracking_uri=URL with them.",
        )
    if cfg.scores is None and (target != "mlflow" or (cfg.estimate is None and cfg.cv is None)):
        what = "scores=, estimate= or cv=" if target == "mlflow" else "scores="
        raise InputError(f"nothing to publish: pass {what}.", fix="pass scores= the out= file of `role-rubric score`.")
    if target == "otel":
        return _otel(cfg)
    if target == "mlflow":
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
    from rubric.errors import InputError

    if (cfg.out is None) == (cfg.endpoint is None):
        raise InputError(
            "target=otel writes a file (out=) or posts to an endpoint (endpoint=): name one.",
            fix="pass out=evaluations.jsonl, or endpoint=http://HOST:4318/v1/logs.",
        )
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
    from calibration.publish import mlflow as target

    return target.run(cfg, scored=_scored(cfg) if cfg.scores is not None else None, say=log.info)


def _phoenix(cfg: Any) -> dict[str, Any]:
    from calibration.publish import phoenix as target

    return target.run(cfg, scored=_scored(cfg), say=log.info)
