"""The package layout: no import circles in rubric/ or calibration/, and layers import downwards only.

Imports are read with `ast` from every module, top-level and inside functions alike (a lazy import is still
an import: it only moves the circle to run time). Only imports of the project's own modules count.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rubric", "calibration")

# Lower layers never import higher ones: each module gets the rank of the longest prefix below that names it,
# and may import modules of its own rank or lower (circles within a rank are caught by the cycle test).
LAYERS = {
    "rubric": 0,
    "calibration.data": 1,
    "calibration.config_check": 1,
    "calibration.path_checks": 1,  # config_check's checks of the path keys (out=, inputs, data=[...])
    "calibration.compose": 1,  # composing a command's config; the CLI and its help both use it  # types and ranges of settings; model files and cv folders check theirs with it
    "calibration.labelling": 2,  # Label Studio and the labelling sheet: reads and writes dataset folders
    "calibration.model": 2,
    "calibration.model.network": 2,
    "calibration.model.recalibrate": 2,
    "calibration.model.settings": 3,
    "calibration.model.train": 4,
    "calibration.model.linear_calibrator": 4,  # train model=linear|ordinal: fits, as train does, with torch_threads
    "calibration.model.ensemble": 5,
    "calibration.model.files": 6,
    "calibration.model.predict": 7,
    "calibration.evaluation": 8,
    "calibration.release.inference": 1,  # the estimators: numpy and scipy only
    "calibration.release.intervals": 1,  # their arithmetic, vectorised over samples
    "calibration.compare": 9,
    "calibration.report": 9,
    "calibration": 10,  # the entry points at the top: api, score, demo, cli and the package's re-exports
}

# Import edges left out of the cycle test, each with the reason and who removes it. An entry that no longer
# matches an import fails the test, so the list only shrinks.
KNOWN_CIRCLES: dict[tuple[str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Every module of the packages, by dotted name (a package is its __init__.py)."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _known(name: str, modules: set[str]) -> str | None:
    """The longest prefix of `name` that is a project module (None outside the project)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def imports_of(path: Path, name: str, modules: set[str]) -> set[str]:
    """Project modules that the module `name` at `path` imports, anywhere in the file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from pkg import mod` imports the submodule; `from mod import name` the module itself.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        out |= {t for t in (_known(t, modules) for t in targets) if t is not None and t != name}
    return out


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(path, name, set(modules)) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A circle of imports [a, b, ..., a] in `graph` (module -> modules it imports), or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def rank(module: str) -> int:
    prefix = _known(module, set(LAYERS))
    assert prefix is not None, f"{module} has no layer: add its folder to LAYERS in tests/test_layout.py"
    return LAYERS[prefix]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as 'low (rank) -> high (rank)'."""
    return [f"{a} ({rank(a)}) -> {b} ({rank(b)})" for a in sorted(graph) for b in sorted(graph[a]) if rank(b) > rank(a)]


def test_no_import_cycles():
    graph = import_graph()
    assert {"calibration.model.train", "rubric.gather"} <= set(graph)  # the walk found the packages
    stale = [edge for edge in KNOWN_CIRCLES if edge[1] not in graph.get(edge[0], ())]
    assert not stale, f"remove these from KNOWN_CIRCLES, the imports are gone: {stale}"
    for a, b in KNOWN_CIRCLES:
        graph[a] = graph[a] - {b}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_layers_import_downwards_only():
    bad = upward_imports(import_graph())
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def test_cli_commands_name_existing_modules():
    from calibration.cli import COMMANDS

    for command, (target, _) in COMMANDS.items():
        module, _, func = target.partition(":")
        assert importlib.util.find_spec(module) is not None, f"{command}: no module {module}"
        assert f"def {func}(" in project_modules()[module].read_text(), f"{command}: no {func} in {module}"


def test_the_checks_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert upward_imports({"calibration.model.train": {"calibration.report.page"}, "calibration.report.page": set()}) == [
        "calibration.model.train (4) -> calibration.report.page (9)"
    ]
    with pytest.raises(AssertionError, match="has no layer"):
        rank("elsewhere.module")


def test_lazy_and_relative_imports_count(tmp_path):
    pkg = tmp_path / "calibration"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from calibration import b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    modules = {"calibration", "calibration.a", "calibration.b"}
    assert imports_of(pkg / "a.py", "calibration.a", modules) == {"calibration.b"}
    assert imports_of(pkg / "b.py", "calibration.b", modules) == {"calibration.a"}
