"""Compose a command's config from its schema (calibration/schema) and the packaged config groups (conf/)
with Hydra overrides; works from a wheel install."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig


def compose_config(command: str, overrides: Sequence[str] = ()) -> DictConfig:
    """Compose the config of a command with overrides (works from a wheel, not only a checkout)."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from calibration.schema import register

    register()
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="conf", version_base="1.3"):
        return compose(config_name=command, overrides=list(overrides))
