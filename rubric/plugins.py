"""One registry pattern for every kind of plug-in: judge backends, trace sources, publish targets.

A plug-in is registered once, by name, as the module and attribute that implement it and the optional extra
it needs. Nothing is imported until a command asks for the plug-in by name: `--help` stays fast, and a
missing extra is one line naming the install command (rubric/extras.py), never a traceback. Commands iterate
the registry (its names, its summaries for --help) instead of branching on names.

>>> from rubric.plugins import Plugin, Registry
>>> r = Registry("demo plug-in", [Plugin("json", "json", "dumps", summary="the standard library's JSON")])
>>> r.names()
['json']
>>> r.load("json").__name__
'dumps'
>>> r.load("yaml")
Traceback (most recent call last):
rubric.errors.InputError: no demo plug-in is named 'yaml' (the names are: json). Fix: use one of: json.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from rubric.errors import InputError
from rubric.extras import check

__all__ = ["Plugin", "Registry", "lazy_attribute"]

T = TypeVar("T")


@dataclass(frozen=True)
class Plugin:
    """One registered plug-in: `name` as the user writes it (source=mlflow), where it lives, what it needs."""

    name: str
    module: str
    """The module that implements it, imported on first use."""
    attribute: str
    """The class (or factory) in that module."""
    extra: str | None = None
    """The optional extra of pyproject.toml it needs (rubric/extras.py), checked before the import."""
    summary: str = ""
    """One line for --help and the docs."""


class Registry(Generic[T]):
    """The plug-ins of one kind, by name, in the order registered (the order --help lists them)."""

    def __init__(self, kind: str, plugins: Iterable[Plugin]):
        self.kind = kind
        self._plugins: dict[str, Plugin] = {}
        for plugin in plugins:
            if plugin.name in self._plugins:
                raise ValueError(f"{kind} {plugin.name!r} is registered twice")
            self._plugins[plugin.name] = plugin

    def names(self) -> list[str]:
        return list(self._plugins)

    def __iter__(self) -> Iterator[Plugin]:
        return iter(self._plugins.values())

    def __contains__(self, name: object) -> bool:
        return name in self._plugins

    def get(self, name: str) -> Plugin:
        """The registration of `name`; one clear error listing the names where there is none."""
        try:
            return self._plugins[name]
        except KeyError:
            known = ", ".join(self._plugins)
            raise InputError(
                f"no {self.kind} is named {name!r} (the names are: {known}).", fix=f"use one of: {known}."
            ) from None

    def load(self, name: str, *, by: str | None = None) -> T:
        """The implementation of `name`, imported (its extra checked first; `by`: what needs it, for the
        missing-extra message, e.g. "import source=mlflow")."""
        plugin = self.get(name)
        if plugin.extra is not None:
            check(plugin.extra, by=by or f"the {self.kind} {name!r}")
        module: Any = importlib.import_module(plugin.module)
        return cast(T, getattr(module, plugin.attribute))


def lazy_attribute(package: str, exports: Mapping[str, str], name: str) -> Any:
    """A package's public `name`, from the module `exports` gives for it, imported on first use: the body of
    the package's module `__getattr__` (PEP 562), so that importing the package imports none of them."""
    if name in exports:
        return getattr(importlib.import_module(exports[name]), name)
    raise AttributeError(f"module {package!r} has no attribute {name!r}")
