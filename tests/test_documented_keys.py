"""Every `key=value` the README, the docs, `--help` or an error message tells users to pass is accepted:
the command composes it and the config check passes it. A command line (`role-rubric CMD k=v ...`, and a
command's --help) is checked for that command; a `k=v` named alone (in backticks, or in an error's text)
must name a key some command has, and one of those commands must accept the value. Placeholders (DIR,
FILE, <...>) are checked for the key only."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from calibration.cli import COMMANDS
from calibration.schema import check_config
from calibration.schema.compose import compose_config
from calibration.schema.store import RuleBroken
from rubric.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
KEY = r"[a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)*"
PAIR = re.compile(rf"(?<![\w.\-/=+])({KEY})=([^\s`\]\[,;]+|\[[^\]`]*\])")
COMMAND_LINE = re.compile(r"role-rubric ([a-z][a-z-]+)((?:[ \t]+[^\n`]*?)?)(?=`|\n|$)")


def _docs() -> list[Path]:
    return (
        [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
        if (ROOT / "docs").is_dir()
        else [ROOT / "README.md"]
    )


def _placeholder(value: str) -> bool:
    """DIR, FILE.gguf, MODEL_DIR, <imported data>, [id,...], a shell or CI expansion ($(hostname),
    ${{ github.sha }}): a stand-in for the user's own value."""
    core = value.strip("[]'\"")
    return (
        not core
        or "<" in value
        or "..." in value
        or "$(" in value
        or "${{" in value
        or re.fullmatch(r"[A-Z][A-Z0-9_]*(\.[a-z]+)?", core) is not None
        or any(word in core for word in ("NAME", "DIR", "FILE", "PATH", "URL"))
    )


def _pairs(text: str) -> list[tuple[str, str]]:
    found = []
    for key, value in PAIR.findall(text):
        if key == "key":  # the usage line's literal "key=value"
            continue
        value = value.rstrip(".:)").strip("'\"")
        for alternative in value.split("|") if not value.startswith("[") else [value]:
            found.append((key, alternative))
    return found


def _from_docs() -> tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str, str, str]]]:
    """(where, command, key, value) of command lines; (where, key, value, line, code) of keys named alone."""
    lines, alone = [], []
    for path in _docs():
        text = path.read_text().replace("\\\n", " ")
        for n, line in enumerate(text.splitlines(), start=1):
            where = f"{path.name}:{n}"
            spans = []
            for m in COMMAND_LINE.finditer(line):
                if m.group(1) in COMMANDS:
                    lines += [(where, m.group(1), k, v) for k, v in _pairs(m.group(2))]
                    spans.append(m.span())
            rest = "".join(ch if not any(a <= i < b for a, b in spans) else " " for i, ch in enumerate(line))
            for code in re.findall(r"`([^`]+)`", rest):
                alone += [(where, k, v, line, code) for k, v in _pairs(code)]
    from calibration.schema.help import command_help

    for command in COMMANDS:  # `role-rubric COMMAND --help`: the text, not the listing
        for n, line in enumerate(command_help(command).splitlines(), start=1):
            text = re.sub(r"^\s+\S+=\S+", "", line)  # a listed key=default is the config itself
            alone += [(f"{command} --help:{n}", k, v, line, text) for k, v in _pairs(text)]
    return lines, alone


def _from_messages() -> list[tuple[str, str, str]]:
    """(where, key, value) named in the text of an error (InputError's problem or fix) in the package."""
    found = []
    for path in sorted([*ROOT.joinpath("calibration").rglob("*.py"), *ROOT.joinpath("rubric").rglob("*.py")]):
        if path.name.startswith("api") or path.parent.name == "api":  # the Python API's: keyword arguments
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", ""))
                in ("InputError", "IncompleteRun", "fail", "LowCoverage", "check_plan_for", "refuse_another_plan")
            ):
                continue
            for part in [*node.args, *(k.value for k in node.keywords if k.arg in ("fix", "problem"))]:
                text = " ".join(
                    c.value for c in ast.walk(part) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                )
                found += [(f"{path.relative_to(ROOT)}:{node.lineno}", k, v) for k, v in _pairs(text)]
    return found


def _compose(command: str, overrides: list[str]):
    """compose_config without re-initialising Hydra on every call (hundreds of calls here)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra

    if not GlobalHydra.instance().is_initialized():
        compose_config(command, [])  # initialises Hydra for the packaged conf module
        from hydra import initialize_config_module

        initialize_config_module(config_module="conf", version_base="1.3").__enter__()
    return compose(config_name=command, overrides=overrides)


@cache
def _config(command: str):
    return _compose(command, [])


@cache
def _group_options(group: str, key: str) -> tuple[str, ...]:
    """The options of config group `group` (conf/GROUP/*.yaml) that have `key`."""
    import yaml

    found = []
    for path in sorted((ROOT / "conf" / group).glob("*.yaml")):
        node = yaml.safe_load(path.read_text()) or {}
        for part in key.split("."):
            node = node.get(part, "__absent__") if isinstance(node, dict) else "__absent__"
        if node != "__absent__":
            found.append(path.stem)
    return tuple(found)


@cache
def _groups(command: str) -> frozenset[str]:
    """The config groups of the command's schema (a `null` default has no key in the composed config, e.g.
    gather's scorer)."""
    from calibration.schema import SCHEMAS

    return frozenset(group for group, _, _ in SCHEMAS[command].groups)


def _has_key(command: str, key: str) -> bool:
    cfg = _config(command)
    head, _, rest = key.partition(".")
    if head not in set(cfg.keys()) and head not in _groups(command):  # set: `in` skips ??? values
        return False
    if not rest or OmegaConf.select(cfg, key, default="__absent__", throw_on_missing=False) != "__absent__":
        return True
    return bool((ROOT / "conf" / head).is_dir() and _group_options(head, rest))


@cache
def _accepts(command: str, key: str, value: str) -> str | None:
    """None, or why `command` refuses `key=value`."""
    if not _has_key(command, key):
        return f"{command} has no key {key!r}"
    if _placeholder(value):
        return None
    head, _, rest = key.partition(".")
    overrides = [f"{key}={value}"]
    if (
        rest
        and OmegaConf.select(_config(command), key, default="__absent__", throw_on_missing=False) == "__absent__"
        and (ROOT / "conf" / head).is_dir()
    ):
        overrides.insert(0, f"{head}={_group_options(head, rest)[0]}")  # a key of another group option
    try:
        cfg = _compose(command, overrides)
    except Exception as exc:  # Hydra's override errors
        return f"{command} does not compose {' '.join(overrides)}: {str(exc).splitlines()[0]}"
    try:
        check_config(command, cfg)
    except RuleBroken:  # a rule between keys is about the whole command line (results= needs mode=batch)
        return None
    except InputError as exc:
        if exc.problem.startswith(f"{key}=") or key in exc.problem:
            return f"{command} refuses {key}={value}: {exc.one_line()}"
    return None


LINES, ALONE = _from_docs()
MESSAGES = _from_messages()
# A sentence that shows a refused value ("`folds=1` is one such line") is not an instruction to pass it.
COLUMNS = {"source"}  # llm.csv's `source=sampled` is a column value, not import's source=
# Spelled like a setting, but another program's: the OpenAI Files API's upload purpose.
FOREIGN = {("purpose", "batch")}
PYTHON = {"None", "True", "False"}  # a keyword argument in Python (the command line says null/true/false)
REFUSAL = re.compile(r"refuse|such line|is an error|are errors|rejected", re.I)


def test_the_docs_and_the_messages_are_scanned():
    assert len(LINES) > 30 and len(ALONE) > 5 and len(MESSAGES) > 10, (len(LINES), len(ALONE), len(MESSAGES))
    assert any(k == "unmatched_labels" for _, k, _ in MESSAGES)


@pytest.mark.parametrize(("where", "command", "key", "value"), LINES, ids=[f"{w} {c} {k}={v}" for w, c, k, v in LINES])
def test_a_documented_command_line_is_accepted(where, command, key, value):
    problem = _accepts(command, key, value)
    assert problem is None, f"{where}: {problem}"


@pytest.mark.parametrize(("where", "key", "value"), MESSAGES, ids=[f"{w} {k}={v}" for w, k, v in MESSAGES])
def test_a_key_an_error_tells_users_to_pass_is_accepted(where, key, value):
    having = [c for c in COMMANDS if _has_key(c, key)]
    assert having, f"{where}: an error tells users to pass {key}={value}, but no command has the key {key!r}"
    _accepted_by_one(where, having, key, value)


@pytest.mark.parametrize(
    ("where", "key", "value", "line", "code"), ALONE, ids=[f"{w} {k}={v}" for w, k, v, _, _ in ALONE]
)
def test_a_setting_the_docs_name_is_accepted(where, key, value, line, code):
    having = [c for c in COMMANDS if _has_key(c, key)]
    if (
        not having
        or REFUSAL.search(line)
        or key in COLUMNS
        or (key, value) in FOREIGN
        or value in PYTHON
        or re.search(r"\w\(", code)
    ):  # f(x=1): Python
        pytest.skip(f"{key}= is no setting here (a column, a Python argument) or is shown refused")
    _accepted_by_one(where, having, key, value)


def _accepted_by_one(where: str, having: list[str], key: str, value: str) -> None:
    problems = []
    for command in having:
        problem = _accepts(command, key, value)
        if problem is None:
            return
        problems.append(problem)
    raise AssertionError(f"{where}: " + "; ".join(problems))


def test_batch_size_zero_means_full_batch(tmp_path):
    from calibration.cli import main
    from tests.calibration.conftest import make_native_dataset

    data = make_native_dataset(tmp_path / "d", n_conversations=6)
    assert (
        main(
            [
                "train",
                f"data={data}",
                f"out={tmp_path / 'm'}",
                "train.batch_size=0",
                "train.ensemble=1",
                "train.pretrain_steps=2",
                "train.finetune_steps=2",
            ]
        )
        == 0
    )


def test_unmatched_labels_skip_trains_and_counts(tmp_path, capsys):
    import pandas as pd

    from calibration.cli import main
    from tests.calibration.conftest import make_native_dataset

    data = make_native_dataset(tmp_path / "d", n_conversations=6)
    labels = pd.read_csv(data / "labels.csv", dtype=str)
    labels.loc[0, "conversation_id"] = "ghost"
    labels.to_csv(data / "labels.csv", index=False)
    args = [
        "train",
        f"data={data}",
        f"out={tmp_path / 'm'}",
        "train.ensemble=1",
        "train.pretrain_steps=2",
        "train.finetune_steps=2",
    ]
    assert main(args) == 2 and "unmatched_labels=skip" in capsys.readouterr().err
    assert main([*args, "unmatched_labels=skip"]) == 0
