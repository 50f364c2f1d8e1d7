"""`role-rubric publish`: results back where the traces are.

Its keys: calibration.schema.commands_publish `Publish` (`role-rubric publish --help`; each target's own keys a
dataclass there); the targets: calibration/connectors/targets.py `TARGETS` (each a module of its backend's
folder, chosen by target=); what they publish is read by calibration/publish/ (results.py: what `score` wrote;
disagreements.py: compare-judges' disagreement list).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from typing import Any

from calibration.schema.commands_publish import Publish as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> dict[str, Any]:
    """CLI: `role-rubric publish target=otel|mlflow|phoenix ...` (the keys' rules, checked before: which
    target needs and takes which key): what was published, per kind."""
    from calibration.connectors.targets import TARGETS, Job
    from calibration.publish.disagreements import read_disagreements, read_reviewer_disagreements
    from calibration.publish.results import read_scored

    # a missing extra is one line with its install command, before anything is read or sent
    target = TARGETS.load(cfg.target, by=f"publish target={cfg.target}")(
        cfg.keys(), say=log.info, progress=cfg.progress
    )
    job = Job(
        scored=None
        if cfg.scores is None
        else read_scored(cfg.scores, model=cfg.model, conversations=cfg.conversations),
        estimate=cfg.estimate,
        cv=cfg.cv,
        disagreements=None if cfg.disagreements is None else read_disagreements(cfg.disagreements, top=cfg.top),
        reviewer_disagreements=None
        if cfg.disagreements is None
        else read_reviewer_disagreements(cfg.disagreements, top=cfg.top),
        model=cfg.model,
    )
    with not_json_is_one_line(target.address_key, getattr(cfg, target.address_key)):
        return target.publish(job)


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
