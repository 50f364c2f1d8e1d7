"""Every command's config composes from its schema, with every group option; each key's default is written
once (a default found in two places fails here)."""

from __future__ import annotations

import ast
import dataclasses
import importlib.resources
from pathlib import Path

import pytest

from calibration.cli import COMMANDS, compose_config
from calibration.schema import GROUPS, SCHEMAS, flat_settings
from rubric.config.settings import default_of

ROOT = Path(__file__).resolve().parents[1]


def test_every_command_has_a_schema():
    assert list(COMMANDS) == list(SCHEMAS)


@pytest.mark.parametrize("command", sorted(SCHEMAS))
def test_command_config_composes_with_every_key_described(command):
    cfg = compose_config(command, [])
    for key, f in flat_settings(SCHEMAS[command]):
        assert f.metadata["doc"].strip() and f.metadata["rule"].want, key
        assert key.split(".")[0] in set(cfg.keys()), key  # set: `in` skips ??? values


@pytest.mark.parametrize("group", ["judge", "rubric", "scorer"])
def test_every_group_option_is_valid_yaml(group):
    import yaml

    folder = importlib.resources.files("conf").joinpath(group)
    options = [p for p in folder.iterdir() if p.name.endswith(".yaml")]
    assert options, f"conf/{group} is empty"
    for option in options:
        assert isinstance(yaml.safe_load(option.read_text()), dict), option.name


def test_the_settings_groups_compose_to_the_settings_defaults():
    from calibration.model.settings import Settings
    from calibration.schema.build import command_config

    assert command_config("train", ["data=x", "out=y"]).settings == Settings()


def test_no_config_file_repeats_a_schema_default():
    """conf/ holds only the options of the data groups (judge presets, rubrics, scorers): no command's config
    and no file of a settings group, whose defaults are the schema's."""
    conf = ROOT / "conf"
    assert not [p.name for p in conf.glob("*.yaml")], "a command's config is its schema (calibration/schema)"
    for group in ("network", "train", "search"):
        assert not list((conf / group).glob("*.yaml")), f"conf/{group}/: its default is {GROUPS[group].schema.__name__}"


def _schema_keys() -> set[str]:
    keys = {key.rsplit(".", 1)[-1] for cls in SCHEMAS.values() for key, _ in flat_settings(cls)}
    return keys | {k for g in ("network", "train", "search") for k in GROUPS[g].keys}


def _default_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, key) of every `X.get("key", default)` with a literal default: a second home for a default."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and isinstance(node.args[1], ast.Constant)
            and isinstance(getattr(node.func.value, "id", getattr(node.func.value, "attr", "")), str)
            and "cfg" in getattr(node.func.value, "id", getattr(node.func.value, "attr", "")).lower()
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def test_the_default_read_check_finds_a_repeated_default():
    tree = ast.parse('def run(cfg):\n    return cfg.get("target", "overall"), cfg.get("threads"), opts.get("x", 1)\n')
    assert _default_reads(tree) == [(2, "target")]


def test_no_command_repeats_a_schema_default_in_code():
    """A command reads its key from the composed config (every key is there, with the schema's default):
    `cfg.get("folds", 5)` would be a second home for folds' default, and would drift."""
    keys = _schema_keys()
    repeated = []
    for path in sorted([*ROOT.joinpath("calibration").rglob("*.py"), *ROOT.joinpath("rubric").rglob("*.py")]):
        for line, key in _default_reads(ast.parse(path.read_text(encoding="utf-8"))):
            if key in keys:
                repeated.append(f"{path.relative_to(ROOT)}:{line} {key}")
    assert not repeated, "defaults repeated outside the schema: " + ", ".join(repeated)


def test_each_default_is_declared_once_in_the_schemas():
    """A shared key (target, seed, on_shift...) is declared once in calibration/schema/keys.py and named by
    each command; a key that two schemas declare separately must differ in what it means (its default, its
    description), or it belongs in keys.py."""
    seen: dict[tuple[str, str, str], tuple] = {}
    twice = []
    for name, cls in SCHEMAS.items():
        for key, f in flat_settings(cls):
            ident = (key, repr(default_of(f)), f.metadata["doc"])
            first = seen.setdefault(ident, (name, f))
            if first[1] is not f and not f.metadata.get("shared"):  # the same block's field is one declaration
                twice.append(f"{key} ({first[0]} and {name})")
    assert not twice, twice


def test_no_judge_preset_repeats_a_judge_default():
    """conf/judge/NAME.yaml extends judge/base (JudgeConfig's defaults) with what it changes, and only that."""
    import yaml

    from rubric.judge.settings import JudgeConfig

    base = {f.name: default_of(f) for f in dataclasses.fields(JudgeConfig)}
    for path in sorted((ROOT / "conf" / "judge").glob("*.yaml")):
        preset = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert preset.pop("defaults") == ["base", "_self_"], path.name
        same = [k for k, v in preset.items() if k in base and v == base[k] and type(v) is type(base[k])]
        assert not same, f"{path.name} repeats JudgeConfig's default of {same}"


def test_a_number_out_of_range_says_so_where_a_key_also_takes_text(tmp_path, capsys):
    """import's project= takes a Label Studio id (a whole number >= 1) or a Phoenix project's name: -3 is a
    number out of range, not "not a text"."""
    from calibration.cli import main

    assert main(["import", "source=phoenix", "url=http://127.0.0.1:9", "project=-3", f"out={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "project=-3 is out of range. Fix: set project to a whole number >= 1 or a text" in err


def test_path_keys_declared_path_arrive_as_paths(tmp_path, monkeypatch):
    """A key its schema declares `Path` reaches the command as a Path (a number given too), a path key declared
    `str` stays a str, and an optional one not given stays None (calibration/schema/build.py)."""
    from calibration.schema.build import command_config

    monkeypatch.chdir(tmp_path)
    Path("conv.jsonl").write_text("{}\n")
    cfg = command_config("score", ["conversations=conv.jsonl", "out=2024", "turns_out=t.csv", "cache=c.db"])
    assert (cfg.out, cfg.turns_out, cfg.conversations) == (Path("2024"), Path("t.csv"), Path("conv.jsonl"))
    assert all(isinstance(p, Path) for p in (cfg.out, cfg.turns_out, cfg.conversations))
    assert cfg.cache == "c.db" and isinstance(cfg.cache, str)
    assert cfg.calibrator is None and cfg.rubric_file is None


def test_keys_declared_path_are_path_keys():
    """Only a key with a path rule may be declared `Path`: anything else would arrive as a Path too."""
    declared = [
        (command, key, f.metadata["rule"].type)
        for command, cls in SCHEMAS.items()
        for key, f in flat_settings(cls)
        if str(f.type).split(" | ")[0] == "Path"
    ]
    assert ("score", "out", "path") in {(c, k, t.split(" ")[0]) for c, k, t in declared}
    assert all(kind.startswith("path") for _, _, kind in declared), declared
