"""Every example written in a docstring runs: the doctests of every module of both packages.

One test per module that has examples, found by walking the packages, so a new module's examples are run
without being listed here.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import calibration
import rubric

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules_with_examples() -> list[str]:
    finder = doctest.DocTestFinder()
    names = []
    for package in (calibration, rubric):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            module = importlib.import_module(info.name)
            if any(test.examples for test in finder.find(module)):
                names.append(info.name)
    return names


MODULES = _modules_with_examples()


def test_the_walk_finds_the_documented_modules() -> None:
    # A walk that silently found nothing would make every doctest "pass".
    assert {"calibration.evaluation.significance", "rubric.extraction"} <= set(MODULES)
    assert len(MODULES) >= 10


NEEDS_EXTRA = {"calibration.integrations.deepeval": ("deepeval", "deepeval")}
"""module -> (the package its examples run, the extra that installs it): skipped, with the reason, without it."""


def _needs(name: str) -> list[pytest.MarkDecorator]:
    if name not in NEEDS_EXTRA:
        return []
    package, extra = NEEDS_EXTRA[name]
    missing = importlib.util.find_spec(package) is None
    return [pytest.mark.skipif(missing, reason=f"{package} is not installed: pip install 'role-rubric[{extra}]'")]


@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs(n)) for n in MODULES])
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=FLAGS)
    assert result.attempted > 0
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"
