"""The schemas, registered with Hydra's ConfigStore, and the check of a composed config against them.

Hydra composes a command's config from its schema's defaults (stored here as `COMMAND`), its config groups'
options (`network/default` and `train/default` from `Settings`, `search/default` from `SearchOptions`; the
judge presets, rubrics and scorers are data in conf/) and the command line's overrides. The nodes are
stored as plain mappings: several keys take more than one type (`data=DIR` or `data=[A,B]`,
`judge.processes=auto` or `4`), which OmegaConf's typed nodes cannot hold, and the values are checked by
`check_config`, whose messages name the key and the fix on one line.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from typing import Any, cast

from calibration.model.settings import NETWORK_KEYS, Settings
from calibration.schema.base import Command
from calibration.schema.commands_data import Compare, Gather, LabelStudio, ServeFakeJudge
from calibration.schema.commands_import import Import
from calibration.schema.commands_judges import CompareJudges
from calibration.schema.commands_monitor import Monitor
from calibration.schema.commands_publish import Publish
from calibration.schema.commands_release import Decide, Estimate, Score, Suggest
from calibration.schema.commands_train import (
    CrossValidate,
    Demo,
    Evaluate,
    Predict,
    Report,
    Search,
    SearchOptions,
    Train,
)
from rubric.config.settings import MISSING, check_values, default_of, settings_of
from rubric.errors import InputError
from rubric.judge.settings import JudgeConfig

SCHEMAS: dict[str, type[Command]] = {
    cls.name: cls
    for cls in (
        Import,
        Gather,
        Train,
        CrossValidate,
        Search,
        Predict,
        Evaluate,
        Report,
        Demo,
        Score,
        Suggest,
        Estimate,
        LabelStudio,
        Decide,
        Compare,
        CompareJudges,
        ServeFakeJudge,
        Publish,
        Monitor,
    )
}
"""command -> its schema, in the order of `role-rubric --help`."""


@dataclasses.dataclass(frozen=True)
class Group:
    """A config group whose options are settings (the others, rubric and scorer, are data in conf/)."""

    schema: type
    keys: tuple[str, ...]


GROUPS: dict[str, Group] = {
    "network": Group(Settings, NETWORK_KEYS),
    "train": Group(Settings, tuple(f.name for f in settings_of(Settings) if f.name not in NETWORK_KEYS)),
    "search": Group(SearchOptions, tuple(f.name for f in settings_of(SearchOptions))),
    "judge": Group(JudgeConfig, tuple(f.name for f in settings_of(JudgeConfig))),
}


def defaults(cls: type, keys: tuple[str, ...] | None = None) -> dict[str, Any]:
    """The defaults of a schema (nested blocks as mappings) as the config file they replace would hold them."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if (keys is not None and f.name not in keys) or "group" in f.metadata:  # a group: composed from conf/
            continue
        value = default_of(f)
        if "block" in f.metadata:
            value = {**defaults(f.metadata["block"]), **_as_mapping(value)}
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def _as_mapping(value: Any) -> dict[str, Any]:
    return {k: (_as_mapping(v) if dataclasses.is_dataclass(v) else v) for k, v in dataclasses.asdict(value).items()}


@functools.cache
def register() -> None:
    """Store every command's config and the settings groups' default options in Hydra's ConfigStore (once)."""
    from hydra.core.config_store import ConfigStore

    store = ConfigStore.instance()
    for group in ("network", "train", "search"):
        store.store(group=group, name="default", node=defaults(GROUPS[group].schema, GROUPS[group].keys))
    # judge/base: JudgeConfig's defaults, which every preset in conf/judge/ extends with what it changes
    store.store(group="judge", name="base", node=defaults(JudgeConfig))
    for name, cls in SCHEMAS.items():
        chosen = [{group: option} for group, option, _ in cls.groups]
        store.store(name=name, node={"defaults": [*chosen, "_self_"], **defaults(cls)})


def flat_settings(cls: type, prefix: str = "") -> Iterator[tuple[str, dataclasses.Field]]:
    """(dotted key, field) of every setting of a schema, nested blocks included."""
    for f in dataclasses.fields(cls):
        if "block" in f.metadata:
            yield from flat_settings(f.metadata["block"], f"{prefix}{f.name}.")
        elif "rule" in f.metadata:
            yield prefix + f.name, f


def field_of(command: str, key: str) -> dataclasses.Field | None:
    """The field that describes `key` of `command` (`train.lr` -> Settings.lr), or None."""
    head, _, rest = key.partition(".")
    cls = SCHEMAS[command]
    if rest and head in GROUPS and head in {g for g, _, _ in cls.groups}:
        group = GROUPS[head]
        return next((f for f in dataclasses.fields(group.schema) if f.name == rest and rest in group.keys), None)
    return dict(flat_settings(cls)).get(key)


def check_config(command: str, cfg: Mapping[str, Any]) -> None:
    """Raise InputError (one line: the key, its value, what it must be) on the first bad value, then on the
    first broken rule between keys (the schema's `rules`), then check the path keys (calibration/schema/paths.py)."""
    from calibration.schema.paths import check_paths

    plain = plain_config(cfg)
    cls = SCHEMAS[command]
    _check_block(cls, plain, "")
    for group, _, _ in cls.groups:
        if group in GROUPS and isinstance(plain.get(group), Mapping):
            node = {k: v for k, v in plain[group].items() if k in GROUPS[group].keys}
            check_values(GROUPS[group].schema, node, prefix=f"{group}.")
    check_rules(cls, plain)
    check_paths(command, plain, not_paths=("model",) if command in ("train", "compare-judges") else ())


def plain_config(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A composed config (a DictConfig or a plain mapping) as a plain dict, interpolations resolved."""
    if isinstance(cfg, dict):
        return cfg
    from omegaconf import OmegaConf

    return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))  # a DictConfig's container is a dict


class RuleBroken(InputError):
    """A rule between keys of a command (its schema's `rules`) is broken: one line, exit status 2."""


def check_rules(cls: type[Command], values: Mapping[str, Any]) -> None:
    """Raise RuleBroken (one line) on the first of the schema's rules between keys that `values` break."""
    for rule in cls.rules:
        if rule.broken(values):
            raise RuleBroken(rule.explain(values) if rule.explain else rule.problem, fix=rule.fix)


def _check_block(cls: type, values: Mapping[str, Any], prefix: str) -> None:
    check_values(cls, values, prefix=prefix)
    for f in dataclasses.fields(cls):
        if "block" in f.metadata and isinstance(values.get(f.name), Mapping):
            _check_block(f.metadata["block"], values[f.name], f"{prefix}{f.name}.")


def check_settings(settings: Mapping[str, Any], *, source: Any = None) -> None:
    """The same checks for a Settings mapping (e.g. the `settings` block of a model.json)."""
    check_values(Settings, settings, prefix="setting ", source=source, fix="it must be {want}; retrain the model.")


def is_required(value: Any) -> bool:
    return value == MISSING
