"""`role-rubric COMMAND key=value ...`: compose conf/COMMAND.yaml with Hydra overrides and run the stage.

Each command is a function `run(cfg) -> result` in the module of its stage; this file only dispatches,
so a stage can equally be called from Python with a config composed by `compose_config`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from omegaconf import OmegaConf

from calibration.compose import compose_config
from rubric.errors import InputError

__all__ = ["COMMANDS", "compose_config", "main"]

# command -> ("module:function", one-line help). Modules are imported lazily so `--help` is instant.
COMMANDS: dict[str, tuple[str, str]] = {
    "import": ("calibration.labelling.commands:run_import", "labels from Label Studio or a filled sheet, or LLM-Rubric files -> a native dataset dir"),
    "gather": ("rubric.gather:run_gather", "ask the LLM judge every rubric question about every turn -> llm.csv"),
    "train": ("calibration.model.files:run_train", "train the calibration network on a dataset dir -> model dir"),
    "cv": ("calibration.evaluation.crossval:run_cv", "cross-validate the calibrator and the baselines -> predictions + metrics"),
    "search": ("calibration.evaluation.search:run_search", "Optuna search of hyperparameters by inner cross-validation"),
    "predict": ("calibration.model.predict:run_predict", "predict per-judge / population answers -> predictions.csv"),
    "evaluate": ("calibration.evaluation.metrics:run_evaluate", "score predictions against human labels -> metrics.json"),
    "report": ("calibration.report.build:run_report", "reliability diagrams, baselines, ablations -> report.html"),
    "demo": ("calibration.demo:run_demo", "offline end-to-end run on the bundled role-adherence benchmark"),
    "score": ("calibration.score:run_score", "score a conversations file per conversation -> CSV"),
    "suggest": ("calibration.suggest:run_suggest", "rank unlabelled (turn, reviewer) pairs by what a label would teach -> CSV"),
    "estimate": ("calibration.release.estimate:run_estimate", "a release's adherence rate with valid intervals, a comparison and a CI gate"),
    "label-studio": ("calibration.labelling.commands:run_label_studio", "Label Studio tasks and labelling config from a dataset -> files or a project"),
    "decide": ("calibration.decide:run_decide", "adheres / violates / escalate per turn at a guaranteed disagreement risk"),
    "compare": ("calibration.compare.stage:run_compare", "reference-based scorers and judges on one scale: AUC table -> compare.json/html"),
    "serve-fake-judge": ("rubric.fake_server:run_serve", "a local OpenAI-protocol judge for trying the pipeline (judge=fake)"),
}


def _usage() -> str:
    lines = ["usage: role-rubric COMMAND [key=value ...]   (key=value are Hydra overrides of conf/COMMAND.yaml)", ""]
    width = max(len(name) for name in COMMANDS) + 2
    lines += [f"  {name:<{width}} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += [
        "",
        "role-rubric COMMAND --help (or -h) lists its keys, defaults and what each does;",
        "role-rubric COMMAND --cfg prints the composed config of a command.",
    ]
    return "\n".join(lines)


def _resolve(target: str) -> Any:
    module, func = target.split(":")
    return getattr(importlib.import_module(module), func)


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
        print(_usage())
        return 0
    command, overrides = args[0], args[1:]
    if command not in COMMANDS:
        from calibration.cli_help import did_you_mean

        hint = did_you_mean(command, COMMANDS)
        print(f"role-rubric: error: unknown command {command!r}.{hint} Fix: use one of {', '.join(COMMANDS)}.", file=sys.stderr)
        return 2
    if any(o in {"-h", "--help"} for o in overrides):
        from calibration.cli_help import command_help

        print(command_help(command, COMMANDS[command][1]))
        return 0
    show_cfg = "--cfg" in overrides
    overrides = [o for o in overrides if o != "--cfg"]
    try:
        cfg = compose_config(command, overrides)
    except Exception as exc:  # Hydra raises several types for bad overrides; all are user errors here.
        from calibration.cli_help import diagnose_overrides

        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        explained = diagnose_overrides(command, overrides)
        if explained is None:
            explained = f"bad override ({msg}). Fix: see `role-rubric {command} --help`."
        print(f"role-rubric {command}: error: {explained}", file=sys.stderr)
        return 2
    if show_cfg:
        print(OmegaConf.to_yaml(cfg))
        return 0
    try:
        from calibration.config_check import check_config

        check_config(command, cfg)  # every value's type and range, before any long work
        from calibration.run_lock import locked_outputs
        from rubric.notices import cli_notices

        # one run per output, until its last write; the library's notices printed as they always were
        with locked_outputs(command, cfg), cli_notices():
            _resolve(COMMANDS[command][0])(cfg)
    except InputError as exc:
        label = "gate failed" if exc.exit_code == 1 else "error"  # exit 1: a CI gate (estimate), not bad input
        print(f"role-rubric {command}: {label}: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"role-rubric {command}: interrupted; finished work is kept.", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
