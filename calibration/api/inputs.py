"""The argument checks and conversions of `RoleAdherence` (calibration/api/role_adherence.py): the arguments against the
command line's declarations, a scorer name or mapping -> its spec, a rubric path or name -> a Rubric,
conversations or records -> Conversations, whether a calibrator can take a scorer's feature, judges= -> the
calibrator's judge indices, adheres_at -> the target's options that count as adhering, and risk= -> the
decision threshold `role-rubric decide` calibrated.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from rubric.conversations import Conversation, conversations_from_records
from rubric.errors import InputError
from rubric.schema import Rubric, load_rubric, rubric_from_dict

if TYPE_CHECKING:
    from calibration.model.files import LoadedModel


def check_arguments(*, risk: float | None, delta: float, **values: Any) -> None:
    """RoleAdherence's arguments against the declarations `role-rubric score` and `decide` check their keys
    with (calibration/schema/commands_release.py): one set of types and ranges for Python and the command line."""
    from calibration.schema.commands_release import Decide, Score
    from rubric.config.settings import check_values

    check_values(Score, values)
    if risk is not None:
        check_values(Decide, {"risk": risk, "delta": delta})


def check_scorer_calibrator(model: LoadedModel, scorer: str, *, with_judge: bool) -> None:
    """The calibrator must have the scorer's question as an input, and the judge's questions too unless it
    was trained without them (then its feature spec has a question-missing mask)."""
    own = f"ref_{scorer}"
    inputs = [*model.spec["questions"], *(model.spec.get("expected") or {}).get("questions", [])]  # linear: expected
    if own not in inputs:
        raise InputError(
            f"the calibrator has no {own} input.", fix=f"train it on `role-rubric gather scorer={scorer}` data."
        )
    if not with_judge and not model.spec["mask"] and len(model.spec["questions"]) > 1:
        raise InputError(
            "the calibrator was trained on the judge's distributions beside the score; judge=None leaves them out.",
            fix="pass the judge it was trained with (e.g. judge='embedding').",
        )


def scorer_spec(scorer: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if scorer is None:
        return None
    spec: dict[str, Any] = {"name": scorer, "params": {}} if isinstance(scorer, str) else {"params": {}, **dict(scorer)}
    from rubric.scorers import SCORERS

    if spec.get("name") not in SCORERS:
        raise InputError(f"unknown scorer {spec.get('name')!r}.", fix=f"use one of {', '.join(SCORERS)}.")
    return {"name": spec["name"], "params": dict(spec.get("params") or {})}


def as_rubric(rubric: str | Path | Rubric | None) -> Rubric:
    if isinstance(rubric, Rubric):
        return rubric
    name = "role_adherence" if rubric is None else str(rubric)
    if Path(name).suffix in (".yaml", ".yml") or Path(name).exists():
        return load_rubric(name)
    from importlib import resources

    import yaml

    path = resources.files("conf") / "rubric" / f"{name}.yaml"
    if not path.is_file():
        raise InputError(f"unknown rubric {name!r}.", fix="pass a rubric.yaml path or a name in conf/rubric.")
    return rubric_from_dict(yaml.safe_load(path.read_text()), source=f"conf/rubric/{name}.yaml")


def as_conversations(conversations: Iterable[Conversation | Mapping[str, Any]]) -> list[Conversation]:
    items = list(conversations)
    if not items:
        raise InputError("no conversations to measure.", fix="pass at least one conversation.")
    ready = [c for c in items if isinstance(c, Conversation)]
    if len(ready) == len(items):
        return ready
    return conversations_from_records(
        [c.to_record() if isinstance(c, Conversation) else dict(c) for c in items], source="<measure>"
    )


def adherence_cut(rubric: Rubric, adheres_at: float | None) -> tuple[float, np.ndarray]:
    """(adheres_at, which of the target's options are >= it); by default the lowest value of the upper half
    of the options, so adherence on a 1-4 scale is P(answer >= 3)."""
    from calibration.release.checks import check_adheres_at

    target = rubric.question(rubric.target)
    check_adheres_at(target, adheres_at)  # at or below the lowest option every turn adheres: a score of 1, always
    cut = target.default_adheres_at if adheres_at is None else float(adheres_at)
    above = np.array([v >= cut for v in target.values])
    if not above.any():
        raise InputError(
            f"adheres_at={cut:g} is above every option of {target.id!r}.",
            fix=f"use a value among {target.values}.",
        )
    return cut, above


def judge_indices(
    model: LoadedModel | None, judges: str | Sequence[str] | None
) -> tuple[np.ndarray | None, str, list[str]]:
    """judges= as the calibrator's judge indices to average over (-1: the population model), how results name
    them, and the chosen ids it never saw; (None, "raw judge", []) without a calibrator."""
    if model is None:
        return None, "raw judge", []
    trained = model.judges
    if judges == "population" or not trained or not model.settings.personalised:
        return np.array([-1]), "population", []
    if judges is None:
        return np.arange(len(trained)), f"all {len(trained)} training judges", []
    chosen = [str(j) for j in judges]
    if not chosen:
        raise InputError("judges is an empty list.", fix="pass judges=None, 'population' or judge ids.")
    unseen = [j for j in chosen if model.judge_index(j) < 0]
    return np.array([model.judge_index(j) for j in chosen]), "judges " + ", ".join(chosen), unseen


def decision_threshold(
    model: LoadedModel | None,
    judges: str | Sequence[str] | None,
    calibrator: str | Path | None,
    adheres_at: float,
    risk: float,
    delta: float,
) -> float:
    """risk= and delta=: the Learn-then-Test threshold for (risk, delta) from the calibration turns that
    `role-rubric decide` stored with the model."""
    from calibration.release.decide import load_calibration, threshold_from

    if model is None or calibrator is None or judges is not None:  # a model comes from a calibrator
        raise InputError(
            "risk= needs a calibrator and judges=None (decide calibrates the panel average).",
            fix="pass calibrator=DIR and leave judges unset, or leave risk unset.",
        )
    table = load_calibration(calibrator)
    if not np.allclose(table["adheres_at"], adheres_at):
        raise InputError(
            f"decide calibrated adheres_at={table['adheres_at'].iloc[0]:g}, not {adheres_at:g}.",
            fix="rerun `role-rubric decide` with this adheres_at, or pass the calibrated one.",
        )
    return threshold_from(table, risk=risk, delta=delta).threshold
