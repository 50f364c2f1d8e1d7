"""One typed schema per command: each key's type, default, range and description, written once.

A command's keys are a frozen dataclass (calibration/schema/commands_*.py; shared keys in keys.py) with the
rules between them (`rules`), the `network` and `train` groups are `Settings` (calibration/model/settings.py),
the `judge` group `JudgeConfig` (rubric/judge/settings.py). `register()` stores them in Hydra's ConfigStore,
so `compose_config` composes from them; `check_config` checks a composed config; `build_config`
(calibration/schema/build.py) checks it and builds the object the command runs on; `role-rubric COMMAND
--help` and docs/reference/commands.md are written from them (calibration/schema/help.py).
"""

from calibration.schema.store import (
    GROUPS,
    SCHEMAS,
    check_config,
    check_settings,
    defaults,
    field_of,
    flat_settings,
    register,
)

__all__ = ["GROUPS", "SCHEMAS", "check_config", "check_settings", "defaults", "field_of", "flat_settings", "register"]
