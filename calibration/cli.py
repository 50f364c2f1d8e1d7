"""`role-rubric COMMAND key=value ...`: compose the command's config (calibration/schema) with Hydra overrides
and run the stage.

Each command is a module of calibration/commands (its schema and `run(cfg)`); this file composes the
config, builds the command's checked, typed object from it (calibration/schema/build.py), locks the outputs
and dispatches, so a stage can equally be called from Python with `command_config(COMMAND, overrides)`.

Exit statuses: 0 done; 1 a failed CI gate (estimate's fail_under= / fail_if_worse=) and nothing else; 2 bad
input or a refusal (a missing or bad key, a bad file, on_shift=refuse); 3 gather wrote what succeeded but
some requests failed; 4 gather's judge mostly named no option; 70 a crash (a bug); 130 interrupted.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import ModuleType

from calibration.commands import COMMANDS as MODULES
from calibration.schema.build import command_config
from calibration.schema.compose import compose_config
from rubric.errors import InputError

__all__ = ["COMMANDS", "command_config", "compose_config", "main"]

COMMANDS: dict[str, tuple[ModuleType, str]] = {
    name: (module, module.Schema.summary) for name, module in MODULES.items()
}
"""command -> (its module in calibration/commands, one-line help), in the order of `role-rubric --help`."""

INTERNAL_ERROR = 70
"""The exit status of a crash (an exception that is no InputError): a bug to report (sysexits' EX_SOFTWARE)."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader of stdout went away (`role-rubric ... | head`): files written so far are kept (every
        # write is atomic); say nothing more, and exit as a process stopped by SIGPIPE does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


def _main(argv: Sequence[str] | None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help", "help"}:
        from calibration.schema.help import usage

        print(usage())
        return 0
    command, overrides = args[0], args[1:]
    if command not in COMMANDS:
        from calibration.schema.help import did_you_mean

        hint = did_you_mean(command, COMMANDS)
        print(
            f"role-rubric: error: unknown command {command!r}.{hint} Fix: use one of {', '.join(COMMANDS)}.",
            file=sys.stderr,
        )
        return 2
    if any(o in {"-h", "--help"} for o in overrides):
        from calibration.schema.help import command_help

        print(command_help(command))
        return 0
    show_cfg = "--cfg" in overrides
    overrides = [o for o in overrides if o != "--cfg"]
    try:
        cfg = compose_config(command, overrides)
    except Exception as exc:  # Hydra raises several types for bad overrides; all are user errors here.
        from calibration.schema.help import diagnose_overrides

        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        explained = diagnose_overrides(command, overrides)
        if explained is None:
            explained = f"bad override ({msg}). Fix: see `role-rubric {command} --help`."
        print(f"role-rubric {command}: error: {explained}", file=sys.stderr)
        return 2
    if show_cfg:
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(cfg))
        return 0
    try:
        from calibration.schema.build import build_config

        config = build_config(command, cfg)  # checked and typed (calibration/schema/build.py), before any work
        from calibration.schema.out_locks import locked_outputs
        from rubric.notices import cli_notices

        # one run per output, until its last write; the library's notices printed as they always were
        with locked_outputs(command, config), cli_notices():
            COMMANDS[command][0].run(config)
    except InputError as exc:  # exit 1: a failed CI gate only; 2: bad input or a refusal; 3, 4: gather's
        print(f"role-rubric {command}: {exc.label}: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"role-rubric {command}: interrupted; finished work is kept.", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug, not the user's input: its own status, never 1 (a failed gate in CI)
        import traceback

        traceback.print_exc()
        print(f"role-rubric {command}: internal error ({type(exc).__name__}); please report it.", file=sys.stderr)
        return INTERNAL_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
