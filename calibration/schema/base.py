"""How a command's schema is written: a dataclass of settings (rubric/config_types.py `setting`), nested
blocks (`report.n_boot`), and the config groups it composes (`judge=openai` reads conf/judge/openai.yaml)."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


def block(cls: type, doc: str, **defaults: Any) -> Any:
    """A nested block of settings (its keys are BLOCK.KEY on the command line); `defaults` replace some of
    its own."""
    return dataclasses.field(default_factory=lambda: cls(**defaults), metadata={"doc": doc, "block": cls})


_OWN = object()


def like(owner: type, name: str, default: Any = _OWN) -> Any:
    """The setting `name` of `owner` (its description and rule, and its default unless another is given):
    demo's trimmed report."""
    from rubric.config_types import default_of, setting

    f = next(f for f in dataclasses.fields(owner) if f.name == name)
    return setting(default_of(f) if default is _OWN else default, f.metadata["doc"], f.metadata["rule"], shared=True)


class Command:
    """A command's schema: a dataclass of its keys, its docstring the help's header."""

    name: ClassVar[str]
    summary: ClassVar[str]
    """One line: what the command does (the command table of `role-rubric --help`)."""
    groups: ClassVar[tuple[tuple[str, str | None, str], ...]] = ()
    """(group, default option, what it is) of each config group, in the order Hydra composes them."""
