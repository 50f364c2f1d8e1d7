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
    from rubric.extras import require

    # a missing extra is one line with its install command, before anything is read or sent
    require(cfg.target, by=f"publish target={cfg.target}")
    if cfg.target == "otel":
        return _otel(cfg)
    if cfg.target == "mlflow":
        return _mlflow(cfg)
    return _phoenix(cfg)


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


def _phoenix(cfg: Any) -> dict[str, Any]:
    from calibration.publish import phoenix

    return phoenix.publish(
        cfg.url, _scored(cfg), token_env=cfg.token_env, timeout=cfg.timeout, say=log.info, progress=bool(cfg.progress)
    )
