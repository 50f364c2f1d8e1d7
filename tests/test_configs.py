"""Every root config composes from the packaged config module, with every group option."""

from __future__ import annotations

import importlib.resources

import pytest

from calibration.cli import COMMANDS, compose_config

ROOTS = sorted(p.name[:-5] for p in importlib.resources.files("conf").iterdir() if p.name.endswith(".yaml"))


def test_every_command_has_a_root_config():
    assert set(COMMANDS) <= set(ROOTS), set(COMMANDS) - set(ROOTS)


@pytest.mark.parametrize("root", ROOTS)
def test_root_config_composes(root):
    cfg = compose_config(root, [])
    assert cfg is not None


@pytest.mark.parametrize("group", ["network", "train", "search", "judge", "rubric"])
def test_every_group_option_is_valid_yaml(group):
    import yaml

    folder = importlib.resources.files("conf").joinpath(group)
    options = [p for p in folder.iterdir() if p.name.endswith(".yaml")]
    assert options, f"conf/{group} is empty"
    for option in options:
        assert isinstance(yaml.safe_load(option.read_text()), dict), option.name


def test_settings_defaults_equal_the_packaged_config():
    from calibration.model.settings import Settings

    assert Settings.from_cfg(compose_config("train", ["data=x", "out=y"])) == Settings()
