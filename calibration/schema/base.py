"""How a command's schema is written: a frozen dataclass of settings (rubric/config/settings.py `setting`),
nested blocks (`report.n_boot`), the config groups it composes (`judge=openai` reads conf/judge/openai.yaml)
and the rules between its keys (`fail_if_worse` needs `baseline`). calibration/schema/build.py checks a
composed config against them and builds the schema's object, which the command runs on."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rubric.config.settings import MISSING


def block(cls: type, doc: str, **defaults: Any) -> Any:
    """A nested block of settings (its keys are BLOCK.KEY on the command line); `defaults` replace some of
    its own."""
    return dataclasses.field(default_factory=lambda: cls(**defaults), metadata={"doc": doc, "block": cls})


def config_group(*names: str) -> Any:
    """The value of the config group(s) `names`, built with the rest of the command's object (calibration/
    schema/build.py): `network` and `train` -> one `Settings`, `search` -> `SearchOptions`, `judge` ->
    `JudgeConfig`; `rubric` and `scorer` (data in conf/) stay mappings. Not a key of its own: Hydra composes
    the group from conf/ and the command line."""
    return dataclasses.field(default=None, metadata={"group": names})


_OWN = object()


def like(owner: type, name: str, default: Any = _OWN) -> Any:
    """The setting `name` of `owner` (its description and rule, and its default unless another is given):
    demo's trimmed report."""
    from rubric.config.settings import default_of, setting

    f = next(f for f in dataclasses.fields(owner) if f.name == name)
    return setting(default_of(f) if default is _OWN else default, f.metadata["doc"], f.metadata["rule"], shared=True)


class Command:
    """A command's schema: a dataclass of its keys, its docstring the help's header."""

    name: ClassVar[str]
    summary: ClassVar[str]
    """One line: what the command does (the command table of `role-rubric --help`)."""
    groups: ClassVar[tuple[tuple[str, str | None, str], ...]] = ()
    """(group, default option, what it is) of each config group, in the order Hydra composes them."""
    rules: ClassVar[tuple[KeyRule, ...]] = ()
    """The rules between its keys, checked with the values, before any file is read."""


def given(values: Mapping[str, Any], key: str) -> bool:
    """Whether `key` is set: not null, not false, not empty, not the required mark."""
    value = values.get(key)
    return value is not None and value is not False and value != "" and value != MISSING


@dataclasses.dataclass(frozen=True)
class KeyRule:
    """A rule between keys of one command: `broken(values)` on the composed values; the error is one line,
    `problem` and `fix`. Declared on the schema (`rules`), shown by --help, checked before any work."""

    broken: Callable[[Mapping[str, Any]], bool]
    problem: str
    fix: str
    doc: str
    """The rule as --help states it."""
    explain: Callable[[Mapping[str, Any]], str] | None = None
    """The problem said from the values, where naming what broke it helps (a key of another source)."""


def needs(key: str, *others: str, value: Any = None, fix: str, doc: str = "") -> KeyRule:
    """`key` given (or, with `value`, `key=value`) needs every one of `others` given."""
    shown = f"{key}={_cli(value)}" if value is not None else f"{key}="
    wants = " and ".join(f"{o}=" for o in others)

    def broken(values: Mapping[str, Any]) -> bool:
        on = values.get(key) == value if value is not None else given(values, key)
        return on and not all(given(values, o) for o in others)

    return KeyRule(broken, f"{shown} needs {wants}.", fix, doc or f"{shown} needs {wants}")


def excludes(key: str, other: str, *, fix: str) -> KeyRule:
    """`key` and `other` are not given together."""
    return KeyRule(
        lambda v: given(v, key) and given(v, other),
        f"{key}= and {other}= both given.",
        fix,
        f"{key}= and {other}= exclude each other",
    )


def _cli(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
