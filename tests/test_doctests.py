"""Every example written in a docstring runs: the doctests of every module of both packages.

One test per module that has examples, found by walking the packages, so a new module's examples are run
without being listed here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import calibration
import rubric
from rubric.extras import EXTRAS, available

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


NEEDS_EXTRA = {
    "calibration.connectors.deepeval.metric": "deepeval",
    "calibration.connectors.mlflow.scorer": "mlflow",
    # the documented paths that re-export them (calibration/integrations/)
    **{f"calibration.integrations.{extra}": extra for extra in ("deepeval", "mlflow")},
}
"""module -> the extra (rubric/extras.py) it imports at its top: never imported here without it (collecting the
suite must not need an optional extra), and its examples skipped, with the reason."""


def _missing_extra(name: str) -> str | None:
    extra = NEEDS_EXTRA.get(name)
    return extra if extra is not None and not available(EXTRAS[extra].module) else None


def _modules_with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    names = []
    for package in (calibration, rubric):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if _missing_extra(info.name):
                names.append(info.name)  # listed unread: skipped below, with the install command
                continue
            module = importlib.import_module(info.name)
            if any(test.examples for test in finder.find(module)):
                names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_walk_finds_the_documented_modules() -> None:
    # A walk that silently found nothing would make every doctest "pass".
    assert {"calibration.evaluation.significance", "rubric.judge.extraction"} <= set(MODULES)
    assert len(MODULES) >= 10


def _needs(name: str) -> list[pytest.MarkDecorator]:
    extra = _missing_extra(name)
    if extra is None:
        return []
    return [pytest.mark.skip(reason=f"[{extra}] is not installed: {EXTRAS[extra].install}")]


@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs(n)) for n in MODULES])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.attempted > 0
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
