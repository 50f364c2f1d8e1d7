"""A composed config -> the command's object: checked, then built, before any file is read.

Hydra composes a command's config (calibration/schema/compose.py) as a mapping; `build_config` checks it against
the command's schema (a required key not given, each value's type and range, the rules between keys, the
path keys) and builds the schema's dataclass from it: nested blocks as their dataclasses, the `network` and
`train` groups as one `Settings`, `search` as `SearchOptions`, `judge` as `JudgeConfig`, each value of the
type its field declares (`folds=5.0` is the int 5). The command runs on that object
(`cfg.folds`, `cfg.settings`); nothing below it reads the composed mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from calibration.schema.store import SCHEMAS, check_config, plain_config
from rubric.config.settings import MISSING, default_of
from rubric.errors import InputError

__all__ = ["MissingKey", "build_config", "command_config", "missing_keys"]


class MissingKey(InputError):
    """A required key was not given: one line naming it (exit status 2)."""


def command_config(command: str, overrides: Sequence[str] = ()) -> Any:
    """The object `command` runs on, from its overrides as the command line gives them (Python callers and
    tests: `run_train(command_config("train", ["data=DIR", "out=MODEL"]))`)."""
    from calibration.schema.compose import compose_config

    return build_config(command, compose_config(command, overrides))


def build_config(command: str, cfg: Mapping[str, Any]) -> Any:
    """The checked object of `command`'s schema from its composed config (a DictConfig or a plain mapping).
    Raises InputError, one line, on the first problem: a required key not given, a bad value, a broken rule
    between keys, a bad path."""
    plain = plain_config(cfg)
    cls = SCHEMAS[command]
    missing = next(missing_keys(cls, plain), None)
    if missing is not None:
        raise MissingKey(
            f"missing required key {missing[0]!r}.",
            fix=f"pass {missing[0]}={missing[1]} (see role-rubric {command} --help).",
        )
    check_config(command, plain)
    return _build(cls, plain)


def missing_keys(cls: type, values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, what to pass, e.g. DIR) of each required key of `cls` not given, in the schema's order."""
    for f in dataclasses.fields(cls):
        if "block" in f.metadata and isinstance(values.get(f.name), Mapping):
            yield from missing_keys(f.metadata["block"], values[f.name], f"{prefix}{f.name}.")
        elif "rule" in f.metadata and (values[f.name] if f.name in values else default_of(f)) == MISSING:
            yield prefix + f.name, _metavar(f)


def _metavar(f: dataclasses.Field) -> str:
    """What a required key takes, as the fix names it: DIR, FILE, N, ..."""
    if "metavar" in f.metadata:
        return f.metadata["metavar"]
    kind, doc = f.metadata["rule"].type, f.metadata["doc"].lower()
    if f.name in ("data", "model", "calibration"):  # a dataset or model folder (data=[A,B] where several)
        return "DIR"
    if kind.startswith("int"):
        return "N"
    if kind.startswith("path"):
        if "." in doc.split(" ")[0]:  # "conversations.jsonl ...", "predictions.csv to write"
            return "FILE"
        return "DIR" if " dir" in f" {doc}" or "folder" in doc else "FILE"
    if " | " in kind:  # the choices: otel|mlflow|phoenix
        return kind.replace(" ", "")
    return kind.split(" ")[0].upper()


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if "group" in f.metadata:
            kwargs[f.name] = _group(f.metadata["group"], values)
        elif "block" in f.metadata:
            kwargs[f.name] = _build(f.metadata["block"], values.get(f.name) or {})
        elif f.name in values:
            value = values[f.name]
            value = _typed(f.metadata["rule"].type, value) if "rule" in f.metadata else value
            kwargs[f.name] = Path(value) if value is not None and _declared_path(f) else value
    return cls(**kwargs)


def _declared_path(f: dataclasses.Field) -> bool:
    """Whether the schema declares the key a `Path` (`out: Path`, `turns_out: Path | None`): the command then
    gets a Path. The schemas' annotations are strings (`from __future__ import annotations`)."""
    return str(f.type).split(" | ")[0] == "Path"


def _typed(kind: str, value: Any) -> Any:
    """`value` as the type its rule declares: `folds=5.0` the int 5, `out=2024` the path '2024' (the check
    passed them: they are such values). An int stays an int where a float is declared (a number either way;
    written as given)."""
    if value is None or isinstance(value, bool):
        return value
    if kind.startswith("int") and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind.startswith("path") and isinstance(value, (int, float)):
        return str(value)
    return value


def _group(names: tuple[str, ...], values: Mapping[str, Any]) -> Any:
    """The object of a config group (see the module docstring); None where the command did not compose it."""
    if names == ("network", "train"):
        from calibration.model.settings import Settings

        return Settings.from_groups(values.get("network"), values.get("train"))
    (name,) = names
    node = values.get(name)
    if name == "search":
        from calibration.schema.commands_train import SearchOptions

        return _build(SearchOptions, node or {})
    if name == "judge":
        from rubric.judge.settings import JudgeConfig

        return None if node is None else JudgeConfig.from_mapping(node)
    return None if node is None else dict(node)
