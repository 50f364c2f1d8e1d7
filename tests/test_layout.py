"""The package layout: no import circles in rubric/ or calibration/, and layers import downwards only.

Imports are read with `ast` from every module, top-level and inside functions alike (a lazy import is still
an import: it only moves the circle to run time). Only imports of the project's own modules count.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rubric", "calibration")

# Lower layers never import higher ones: each module gets the rank of the longest prefix below that names it,
# and may import modules of its own rank or lower (circles within a rank are caught by the cycle test).
LAYERS = {
    # rubric/ from the bottom: the foundations at its top level (errors, files, jsonfile, ids, notices, progress,
    # extras, lifetime, secrets, plugins; the rubric schema and the conversations)
    "rubric": 0,
    "rubric.config": 0.1,  # what a config value must be, and printing one for the shell: the foundations only
    "rubric.transport": 0.1,  # JSON over HTTP for the connectors
    "rubric.servers": 0.1,  # fake and local judges: the client side names them, they import no client code
    "rubric.traces": 0.2,  # decoding traces into conversations (OTLP JSON, span conventions): the foundations only
    # rubric/judge/, the judge client, from the bottom: its settings, the backends' registry (names only, the
    # backends imported on first use), wire, prompts, cache and answer reading
    "rubric.judge": 0.3,
    "rubric.judge.backends": 0.4,  # the OpenAI-compatible backend
    "rubric.judge.embedding": 0.4,  # the offline embedding judge
    "rubric.scorers": 0.45,  # reference-based scorers (their encoder is the embedding judge's)
    "rubric.judge.outputs": 0.5,  # what a gather writes, from the backends' answers
    "rubric.judge.workers": 0.5,  # workers over a backend in this process
    "rubric.judge.parallel": 0.5,  # the same workers spread over processes
    "rubric.judge.batch": 0.6,  # gathering through batch files: writes the same outputs
    "rubric.judge.long_turns": 0.6,
    "rubric.judge.gather": 0.7,  # the stage, over all of the above
    "rubric.judge.__init__": 0.3,  # a docstring: the package's map
    "rubric.__init__": 0.9,  # the package's re-exports (see rank)
    "calibration.data": 1,
    "calibration.data.union": 2,  # several training directories: checks them with calibration.model.provenance
    "calibration.pages": 1,  # page templating and the parts every page draws (figures, tables)
    "calibration.schema.paths": 1,  # the checks of the path keys (out=, inputs, data=[...])
    "calibration.schema": 3,  # each command's keys (types, defaults, ranges); the network's are Settings'
    "calibration.schema.help": 10,  # --help and docs/reference/commands.md, written from the schemas
    "calibration.schema.compose": 3,  # composing a command's config; the CLI and its help both use it
    "calibration.schema.out_locks": 3,  # one run at a time per output, from the path keys
    "calibration.labelling": 2,  # Label Studio and the labelling sheet: reads and writes dataset folders
    "calibration.labelling.suggest": 7,  # which pairs to label next: over the model's predictions
    "calibration.model": 2,
    "calibration.model.network": 2,
    "calibration.model.recalibrate": 2,
    "calibration.model.settings": 3,
    "calibration.model.train": 4,
    "calibration.model.linear_calibrator": 4,  # train model=linear|ordinal: fits, as train does, with torch_threads
    "calibration.model.ensemble": 5,
    "calibration.model.record": 5,  # model.json's validated record: settings, the linear kinds, the checksum
    "calibration.model.files": 6,
    "calibration.model.predict": 7,
    "calibration.evaluation": 8,
    "calibration.release.decide": 8.2,  # decisions at a guaranteed risk (evaluation.risk_control)
    "calibration.release": 8.5,  # `estimate`, its plan and gate: over the model, evaluation and decide
    "calibration.release.inference": 1,  # the estimators: numpy and scipy only
    "calibration.release.intervals": 1,  # their arithmetic, vectorised over samples
    "calibration.compare": 9,
    "calibration.report": 9,
    "calibration.judges": 9.5,  # compare-judges: several judges calibrated on the same folds, over compare and report
    "calibration.publish": 9.5,  # results to MLflow / Phoenix / OTel: reads the release's table and gate
    # one folder per backend a chatbot lives in (its import, publish and scorer code) and the registries of
    # `import` sources and `publish` targets: over data, labelling, release and publish, below the commands
    "calibration.connectors": 9.7,
    "calibration.connectors.mlflow": 9.7,
    "calibration.connectors.phoenix": 9.7,
    "calibration.connectors.otel": 9.7,
    "calibration.connectors.label_studio": 9.7,
    "calibration.connectors.mlflow.scorer": 10.5,  # MLflow's scorers: over the api
    "calibration.connectors.deepeval": 10.5,  # deepeval's metric: over the api
    "calibration.api": 10,  # RoleAdherence, its results and the frames `score` writes
    "calibration": 10,  # the entry points: api, demo and the package's (lazy) re-exports
    "calibration.monitor": 10,  # `monitor`: over release, the pages and the package's re-exports
    "calibration.integrations": 11,  # the documented paths of deepeval's metric and MLflow's scorers
    "calibration.commands": 11,  # one module per command, over every stage
    "calibration.cli": 12,  # the dispatcher: composes, checks, locks and calls calibration.commands
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


def rank(module: str) -> float:
    """The layer of `module`; a package's __init__ may have a layer of its own (its re-exports sit above the
    modules they name), written as "PACKAGE.__init__"."""
    if f"{module}.__init__" in LAYERS:
        return LAYERS[f"{module}.__init__"]
    prefix = _known(module, set(LAYERS))
    assert prefix is not None, f"{module} has no layer: add its folder to LAYERS in tests/test_layout.py"
    return LAYERS[prefix]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a higher layer, as 'low (rank) -> high (rank)'."""
    return [f"{a} ({rank(a)}) -> {b} ({rank(b)})" for a in sorted(graph) for b in sorted(graph[a]) if rank(b) > rank(a)]


def test_no_import_cycles():
    graph = import_graph()
    assert {"calibration.model.train", "rubric.judge.gather"} <= set(graph)  # the walk found the packages
    stale = [edge for edge in KNOWN_CIRCLES if edge[1] not in graph.get(edge[0], ())]
    assert not stale, f"remove these from KNOWN_CIRCLES, the imports are gone: {stale}"
    for a, b in KNOWN_CIRCLES:
        graph[a] = graph[a] - {b}
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_layers_import_downwards_only():
    bad = upward_imports(import_graph())
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)


def packages() -> list[str]:
    """Every package (a folder with an __init__.py) of rubric/ and calibration/, dotted."""
    return sorted(module_name(p) for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))


def unplaced(names: list[str]) -> list[str]:
    """The packages of `names` without a layer of their own in LAYERS (their rank would be a parent's by
    accident, not a decision)."""
    return [p for p in names if p not in LAYERS and f"{p}.__init__" not in LAYERS]


def test_every_package_has_its_own_layer():
    found = packages()
    assert {
        "rubric.traces",
        "rubric.judge",
        "rubric.config",
        "calibration.api",
        "calibration.pages",
        "calibration.publish",
        "calibration.monitor",
        "calibration.integrations",
        "calibration.connectors",
        "calibration.connectors.mlflow",
        "calibration.connectors.label_studio",
    } <= set(found)
    missing = unplaced(found)
    assert not missing, f"give these packages a layer in LAYERS (tests/test_layout.py): {missing}"


def test_cli_commands_name_existing_modules():
    from calibration.cli import COMMANDS

    for command, (module, _) in COMMANDS.items():  # calibration/commands: imported, so they exist
        assert module.__name__ in project_modules() and callable(module.run), f"{command}: {module.__name__}"


def test_rubric_batch_names_its_modules_names():
    import rubric.judge.batch

    for name, module in (
        ("BatchSettings", "rubric.judge.batch.lines"),
        ("split_lines", "rubric.judge.batch.lines"),
        ("gather_batch", "rubric.judge.batch.run"),
    ):
        assert getattr(rubric.judge.batch, name) is getattr(importlib.import_module(module), name)


def test_the_checks_can_fail():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    assert upward_imports(
        {"calibration.model.train": {"calibration.report.page"}, "calibration.report.page": set()}
    ) == ["calibration.model.train (4) -> calibration.report.page (9)"]
    with pytest.raises(AssertionError, match="has no layer"):
        rank("elsewhere.module")
    assert unplaced(["calibration.report", "calibration.newpackage", "rubric"]) == ["calibration.newpackage"]


def test_lazy_and_relative_imports_count(tmp_path):
    pkg = tmp_path / "calibration"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from calibration import b\n")
    (pkg / "b.py").write_text("from .a import f\n")
    modules = {"calibration", "calibration.a", "calibration.b"}
    assert imports_of(pkg / "a.py", "calibration.a", modules) == {"calibration.b"}
    assert imports_of(pkg / "b.py", "calibration.b", modules) == {"calibration.a"}


# Sizes a reader takes in at once. Each entry over them names its module (and function) and who shortens it.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80
OVERSIZED: dict[str, str] = {}


def oversized(modules: dict[str, Path]) -> list[str]:
    """'module (N lines)' and 'module:function (N lines)' over the limits."""
    found = []
    for name, path in sorted(modules.items()):
        source = path.read_text()
        if (n := len(source.splitlines())) > MAX_MODULE_LINES:
            found.append(f"{name} ({n} lines)")
        for node in ast.walk(ast.parse(source, filename=str(path))):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                found.append(f"{name}:{node.name} ({n} lines)")
    return found


def over_the_limits(modules: dict[str, Path], known: dict[str, str]) -> tuple[list[str], list[str]]:
    """(what is over the limits and not in `known`, the entries of `known` no longer over them)."""
    found = oversized(modules)
    bad = [f for f in found if f.split(" (")[0] not in known]
    return bad, sorted(set(known) - {f.split(" (")[0] for f in found})


def test_modules_and_functions_are_short():
    bad, stale = over_the_limits(project_modules(), OVERSIZED)
    assert not bad, (
        f"over {MAX_MODULE_LINES} lines a module or {MAX_FUNCTION_LINES} a function (split by meaning): {bad}"
    )
    assert not stale, f"remove these from OVERSIZED, they are short now: {stale}"


# The scripts beside the packages, under the same limits: the benchmarks and the docs' own Python (the
# reference generator, the results tables, the build hook). Those over them when the limits reached them are
# listed, each with why and what shortens it; a new one fails, and an entry that is short now fails too.
SCRIPT_FOLDERS = ("benchmarks", "docs")
OVERSIZED_SCRIPTS: dict[str, str] = {
    "benchmarks.estimate": "the release-estimate benchmark: its draws, coverage cells, peeking and planner "
    "studies in one script; one module per study, sharing the draws",
    "docs.results_tables": "every benchmark's table renderer in one module; one module per benchmark's table, "
    "as benchmarks/ has one script per benchmark",
    "docs.results_tables:estimate": "the estimate table's rows (benchmark, kind, n) and its notes in one "
    "function; split the rows from the notes",
    "docs.results_tables:trust": "the trust page's tables (the shift check and the others) in one function; one "
    "function per table",
    "docs.results_tables:readme_table": "the README's results table, every benchmark's rows in one function; one "
    "small function per benchmark",
}


def script_modules() -> dict[str, Path]:
    """The Python scripts of SCRIPT_FOLDERS (not their data), by dotted name."""
    return {module_name(p): p for folder in SCRIPT_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}


def test_benchmarks_and_docs_scripts_are_short():
    scripts = script_modules()
    assert {"benchmarks.estimate", "docs.results_tables", "docs.gen_reference"} <= set(scripts)
    bad, stale = over_the_limits(scripts, OVERSIZED_SCRIPTS)
    assert not bad, (
        f"over {MAX_MODULE_LINES} lines a script or {MAX_FUNCTION_LINES} a function (split by meaning): {bad}"
    )
    assert not stale, f"remove these from OVERSIZED_SCRIPTS, they are short now: {stale}"


# Private names imported from another module, with who makes them public. An entry no longer imported fails.
PRIVATE_IMPORTS: dict[tuple[str, str], str] = {
    (
        "calibration.model.linear_calibrator",
        "calibration.model.bases._for_every_question",
    ): "accuracy's calibration/model/",
}


def private_imports(modules: dict[str, Path]) -> set[tuple[str, str]]:
    """(importer, 'module.name') for every `_name` imported from another module of the project: a name
    that two modules share is public in the module that owns it."""
    found = set()
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                found |= {
                    (name, f"{node.module}.{a.name}")
                    for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")
                }
    return found


def test_no_private_names_across_modules():
    found = private_imports(project_modules())
    assert not found - set(PRIVATE_IMPORTS), (
        f"make these public where they are defined: {sorted(found - set(PRIVATE_IMPORTS))}"
    )
    assert not set(PRIVATE_IMPORTS) - found, f"remove from PRIVATE_IMPORTS: {sorted(set(PRIVATE_IMPORTS) - found)}"


def test_the_size_and_privacy_checks_can_fail(tmp_path):
    long = tmp_path / "long.py"
    long.write_text("def f():\n" + "    x = 1\n" * 85 + "\n" * 320 + "from calibration.a import _b\n")
    assert oversized({"long": long}) == ["long (407 lines)", "long:f (86 lines)"]
    assert over_the_limits({"long": long}, {"long": "why", "gone": "why"}) == (["long:f (86 lines)"], ["gone"])
    assert private_imports({"long": long}) == {("long", "calibration.a._b")}
