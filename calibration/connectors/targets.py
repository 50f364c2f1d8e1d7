"""Where `role-rubric publish` writes: the `PublishTarget` interface and the registry of targets (`TARGETS`).

A target is one module of a backend's folder (calibration/connectors/<backend>/publish.py) with a class that
implements `PublishTarget`, registered here once by the name `target=` takes, with the optional extra it needs
(checked before the module is imported: a missing extra is one line naming the install command). Its keys are
one dataclass of calibration/schema/commands_publish.py (`TARGET_KEYS`), which the target receives.

The contract every target keeps (its tests check it against a real server where there is one):
- `publish(job)` writes what the job holds that the target publishes (its keys' `publishes`): per judged turn
  on the span of the reply, per conversation where the backend keeps a conversation's values, the release's
  results (an estimate, a cv's agreement) where the backend has a place for them, and compare-judges'
  disagreement rows on their turns' spans;
- the same value published twice is one value: a value of the same key (name, place, and role-rubric as its
  source) is updated or replaced, never added beside the first, and a newer model's value supersedes an earlier
  model's;
- an interrupted publish resumes when run again, without duplicating what was written;
- it says where the results went (one status line through `say`, and in the mapping it returns), with every
  secret masked; a server that cannot be reached, refuses, or is not the backend's is one InputError line
  naming it, before anything is written where that can be checked.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from calibration.publish.disagreements import Disagreements
from calibration.publish.results import Scored
from calibration.schema.commands_publish import TargetKeys
from rubric.plugins import Plugin, Registry

__all__ = ["TARGETS", "Job", "PublishTarget"]

K = TypeVar("K", bound=TargetKeys)


@dataclass(frozen=True)
class Job:
    """What one publish writes (None: not asked for)."""

    scored: Scored | None = None
    """score's per-turn and per-conversation results, joined with their traces' ids."""
    estimate: Path | None = None
    """The out= folder (or estimate.json) of `estimate`: the release's results."""
    cv: Path | None = None
    """The out= folder of `cv`: the reviewers' agreement."""
    disagreements: Disagreements | None = None
    """compare-judges' ranked rows where a calibrated judge and a reviewer disagree."""
    reviewer_disagreements: Disagreements | None = None
    """compare-judges' ranked turns whose reviewers disagree with each other."""

    def disagreement_lists(self) -> list[Disagreements]:
        """The disagreement lists to publish, judge against reviewer first."""
        return [d for d in (self.disagreements, self.reviewer_disagreements) if d is not None]

    model: Path | None = None
    """The calibrator an estimate used (its checksum recorded beside it)."""


class PublishTarget(ABC, Generic[K]):
    """One place results are written (see the module docstring for the contract).

    keys: the target's own settings (its dataclass of calibration/schema/commands_publish.py); say: where
    status lines go; progress: a bar or status lines over what is sent.
    """

    address_key: ClassVar[str]
    """The key naming the server (tracking_uri, url, endpoint): named when it answers something not JSON."""

    def __init__(self, keys: K, *, say: Callable[[str], None] = print, progress: bool = False) -> None:
        self.keys = keys
        self.say = say
        self.progress = progress

    @abstractmethod
    def publish(self, job: Job) -> dict[str, Any]:
        """Write what `job` holds: what was written, per kind, and where."""


TARGETS: Registry[type[PublishTarget[Any]]] = Registry(
    "publish target",
    [
        Plugin(
            "otel",
            "calibration.connectors.otel.publish",
            "OtelTarget",
            extra="otel",
            summary="gen_ai.evaluation.result events, as an OTLP JSON file or posted to an OTLP/HTTP endpoint",
        ),
        Plugin(
            "mlflow",
            "calibration.connectors.mlflow.publish",
            "MlflowTarget",
            extra="mlflow",
            summary="feedback on each turn's trace and session; estimate and cv outputs as runs",
        ),
        Plugin(
            "phoenix",
            "calibration.connectors.phoenix.publish",
            "PhoenixTarget",
            extra="phoenix",
            summary="span and session annotations",
        ),
    ],
)
"""target= -> the class that writes there (imported when chosen)."""
