"""The commands of `role-rubric`, one module each: its schema (`Schema`, the keys) and `run(cfg)`, which
calls the library. calibration/cli.py composes a command's config, checks it, locks its outputs and calls
`COMMANDS[name].run`: from a command's name to its module, to its stage, by ordinary imports.

`import` is a keyword, so its module is `import_`.
"""

from __future__ import annotations

from types import ModuleType

from calibration.commands import (
    compare,
    compare_judges,
    cv,
    decide,
    demo,
    estimate,
    evaluate,
    gather,
    import_,
    label_studio,
    monitor,
    predict,
    publish,
    report,
    score,
    search,
    serve_fake_judge,
    suggest,
    train,
)

COMMANDS: dict[str, ModuleType] = {
    "import": import_,
    "gather": gather,
    "train": train,
    "cv": cv,
    "search": search,
    "predict": predict,
    "evaluate": evaluate,
    "report": report,
    "demo": demo,
    "score": score,
    "suggest": suggest,
    "estimate": estimate,
    "label-studio": label_studio,
    "decide": decide,
    "compare": compare,
    "compare-judges": compare_judges,
    "serve-fake-judge": serve_fake_judge,
    "publish": publish,
    "monitor": monitor,
}
"""command -> its module, in the order of `role-rubric --help`."""

__all__ = ["COMMANDS"]
