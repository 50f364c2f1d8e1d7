"""Types and ranges of every config value, checked once before a command starts any long work.

One table, `RULES`: a dotted key (as on the command line) -> what it must be. A key absent from a
command's config is skipped, so one table serves every command; a new setting is one line here. Keys
that name files are checked elsewhere (by the loaders, which can name the row); here only that an output
path is not a file where a folder is expected, or a folder where a file is.

Unknown keys and bad config-group choices are Hydra's (calibration/cli.py); this is the values.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from calibration.path_checks import check_paths
from calibration.path_checks import lookup as _lookup
from rubric.errors import InputError
from rubric.responses import looks_like_secret


@dataclass(frozen=True)
class Rule:
    """What one config value must be. `check(value) -> None | str`: the problem, if any."""

    check: Callable[[Any], str | None]
    want: str
    """The fix's description of a good value, e.g. 'a number > 0'."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def integer(low: int | None = None, high: int | None = None, *, optional: bool = False) -> Rule:
    lo, hi = "" if low is None else f" >= {low}", "" if high is None else f" <= {high}"
    want = f"a whole number{lo}{' and' if lo and hi else ''}{hi}" + (" (or null)" if optional else "")

    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if not _is_int(v):
            return "is not a whole number"
        if (low is not None and v < low) or (high is not None and v > high):
            return "is out of range"
        return None

    return Rule(check, want)


def number(
    low: float | None = None,
    high: float | None = None,
    *,
    above: float | None = None,
    below: float | None = None,
    optional: bool = False,
) -> Rule:
    bounds = [
        f">= {low}" if low is not None else "",
        f"> {above}" if above is not None else "",
        f"<= {high}" if high is not None else "",
        f"< {below}" if below is not None else "",
    ]
    want = "a number " + " and ".join(b for b in bounds if b) + (" (or null)" if optional else "")

    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if not _is_number(v):
            return "is not a finite number"
        if (
            (low is not None and v < low)
            or (high is not None and v > high)
            or (above is not None and v <= above)
            or (below is not None and v >= below)
        ):
            return "is out of range"
        return None

    return Rule(check, want.strip())


def boolean() -> Rule:
    return Rule(lambda v: None if isinstance(v, bool) else "is not true or false", "true or false")


def choice(*allowed: Any) -> Rule:
    return Rule(
        lambda v: None if v in allowed else "is not one of the choices",
        f"one of {', '.join(map(str, allowed))}",
    )


def text(*, optional: bool = False) -> Rule:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        return None if isinstance(v, str) and v.strip() else "is not a non-empty text"

    return Rule(check, "a text" + (" (or null)" if optional else ""))


def text_list(*, non_empty: bool = False) -> Rule:
    def check(v: Any) -> str | None:
        if not isinstance(v, (list, tuple)) or not all(
            isinstance(x, (str, int)) and not isinstance(x, bool) for x in v
        ):
            return "is not a list of names"
        return "is an empty list" if non_empty and not v else None

    return Rule(check, "a list like [a, b]" + (" with at least one entry" if non_empty else ""))


def either(*rules: Rule) -> Rule:
    def check(v: Any) -> str | None:
        problems = [r.check(v) for r in rules]
        return None if any(p is None for p in problems) else problems[-1]

    return Rule(check, " or ".join(r.want for r in rules))


def storage_url() -> Rule:
    schemes = ("sqlite", "postgresql", "mysql", "oracle", "mssql")

    def check(v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str) or "://" not in v:
            return "is not a database URL"
        scheme = v.split("://", 1)[0].split("+", 1)[0].lower()
        return None if scheme in schemes else f"has the unknown scheme {scheme!r}"

    return Rule(
        check, "null (OUT/search.db) or a database URL such as sqlite:///path.db or postgresql://host/db"
    )


def base_url() -> Rule:
    def check(v: Any) -> str | None:
        if v is None or v == "local":
            return None
        ok = isinstance(v, str) and v.lower().startswith(("http://", "https://")) and len(v) > len("https://")
        return None if ok else "is not an http(s) URL"

    return Rule(check, "null (the environment's), local, or a URL such as http://localhost:8000/v1")


def http_url() -> Rule:
    def check(v: Any) -> str | None:
        if v is None:
            return None
        ok = isinstance(v, str) and v.lower().startswith(("http://", "https://")) and len(v) > len("https://")
        return None if ok else "is not an http(s) URL"

    return Rule(check, "null or a URL such as http://localhost:8080")


def env_name() -> Rule:
    def check(v: Any) -> str | None:
        ok = isinstance(v, str) and v.replace("_", "a").isalnum() and not v[:1].isdigit()
        return None if ok else "is not the name of an environment variable"

    return Rule(check, "a variable name such as LABEL_STUDIO_API_KEY (the token itself never goes on the command line)")


def _judges() -> Rule:
    """predict: labelled | population | [ids]; score: null (every training judge) | population | [ids]."""
    return either(choice("labelled", "population", None), text_list(non_empty=True))


# Settings of the network and its training, by field name (calibration/model/settings.py); also used to
# check the settings stored in a model file.
SETTINGS_RULES: dict[str, Rule] = {
    "hidden1": integer(1, 4096),
    "hidden2": integer(1, 4096),
    "personalised": boolean(),
    "drop_questions": text_list(),
    "lr": number(above=0, high=10),
    "finetune_lr": number(above=0, high=10),
    "batch_size": integer(0),  # 0 = full batch (calibration/model/train.py _batch_indices)
    "pretrain_steps": integer(0),
    "finetune_steps": integer(1),
    "l2_judge": number(0),
    "weight_decay": number(0),
    "ensemble": integer(1, 1024),
    "val_fraction": number(above=0, high=0.5),
    "eval_every": integer(1),
    "patience": integer(1),
    "train_fraction": number(above=0, high=1),
    "pool": choice("geometric", "arithmetic"),
    "recalibrate": choice("vector", "none"),
    "recalibrate_prior": number(0),
    "recalibrate_min_members": integer(1),
    "base": choice("linear", "none"),
    "base_l2": number(0),
}

RULES: dict[str, Rule] = {
    **{
        f"network.{k}": v
        for k, v in SETTINGS_RULES.items()
        if k in ("hidden1", "hidden2", "personalised", "drop_questions", "base", "base_l2")
    },
    **{f"train.{k}": v for k, v in SETTINGS_RULES.items()},
    # commands
    "seed": integer(0, 2**32 - 1),
    "fold_seed": integer(0, 2**32 - 1),
    "folds": integer(2, 1000),
    "limit": integer(1, optional=True),
    "target": text(optional=True),
    "nested": boolean(),
    "group": text(optional=True),
    "progress": boolean(),
    "include_reason": boolean(),
    "granularity": choice("turn", "conversation"),
    # gather mode=batch (rubric/batch.py)
    "mode": choice("online", "batch"),
    "submit": boolean(),
    "results": text(optional=True),
    "batch.max_requests": integer(1),
    "batch.max_mb": number(above=0),
    "batch.poll_s": number(above=0),
    "batch.price_factor": number(0),
    "threads": integer(1, 1024),
    "judges": _judges(),
    "threshold": number(0, 1),
    "strict_mode": boolean(),
    "output_mode": choice("continuous", "binary"),
    "adheres_at": number(optional=True),
    "show": integer(0, optional=True),
    "source": choice("llm-rubric", "label-studio", "sheet"),
    "unmatched_labels": choice("error", "skip"),
    "long_turn_tokens": integer(1, optional=True),
    "long_turns": choice("warn", "refuse"),
    # import from and export to Label Studio
    "url": http_url(),
    "project": integer(1, optional=True),
    "token_env": env_name(),
    "timeout": number(above=0),
    "title": text(),
    "background": boolean(),  # serve-fake-judge
    "annotations_per_task": integer(1, 100),
    # suggest and decide
    "budget": integer(1),
    "strategy": choice("random", "entropy", "bald", "variance"),
    "diversity": number(0, 1),
    "risk": number(above=0, below=1),
    "delta": number(above=0, below=1),
    "against": choice("majority", "reviewers"),
    "purpose": choice("learn", "estimate"),
    # estimate
    "alpha": number(above=0, below=1),
    "fail_under": number(0, 1, optional=True),
    "fail_if_worse": boolean(),
    "allow_judge_mismatch": boolean(),  # bool("no") is True: a typo here would silently lift a guard
    "overwrite": boolean(),
    "population": choice("finite", "process"),
    "bias_margin": number(above=0),
    # the shift check of score, predict, estimate (calibration/model/shift.py)
    "on_shift": choice("warn", "refuse", "ignore"),
    # cv: the alternative annotator test (calibration/evaluation/reviewers.py)
    "epsilon": number(above=0, below=1),
    "width": number(above=0, below=0.5, optional=True),  # estimate / suggest purpose=estimate: the rate's half-width
    "decide_at": number(0, 1, optional=True),
    "sequential": boolean(),
    "strata": text(optional=True),  # suggest purpose=estimate: a stratified sample (role, or a conversations.jsonl field)
    "crossfit": integer(2, optional=True),  # estimate: folds of the labelled conversations (calibration/release/crossfit.py)
    # search
    "search.trials": integer(1),
    "search.inner_folds": integer(2, 100),
    "search.storage": storage_url(),
    "search.study": text(),
    "search.timeout": number(above=0, optional=True),
    "search.workers": integer(1, 256),
    "search.resume": boolean(),
    "search.heartbeat": integer(1, 3600),
    # judge (rubric/judge_settings.py JudgeConfig)
    "judge.backend": choice("chat", "completions", "embedding"),
    "judge.model": text(),
    "judge.output_mode": choice("distribution", "binary"),
    "judge.answer_mode": choice("auto", "logprobs", "sampled"),
    "judge.top_logprobs": integer(1, 20),
    "judge.samples": integer(1, 1000),
    "judge.sample_temperature": number(0, 5),
    "judge.concurrency": integer(1, 10000),
    "judge.processes": either(choice("auto"), integer(0, 256)),
    "judge.http_client": choice("aiohttp", "openai"),
    "judge.timeout": number(above=0),
    "judge.max_retries": integer(0, 100),
    "judge.backoff": number(0),
    "judge.max_backoff": number(0),
    "judge.reasks": integer(0, 10),
    "judge.floor": number(above=0, below=0.05),
    "judge.reason_max_tokens": integer(1),
    "judge.price_input_per_mtok": number(0, optional=True),
    "judge.price_output_per_mtok": number(0, optional=True),
    "judge.seed": integer(0),
    "judge.base_url": base_url(),
    "judge.temperature": number(0, 5),
    "judge.answer_tokens": integer(1, 64),
    "judge.system_role": boolean(),
    "judge.allow_low_coverage": boolean(),
    # report
    "report.adheres_threshold": number(optional=True),
    "report.n_boot": integer(1),
    "report.n_perm": integer(1),
    "report.smece_boot": integer(1),
    "report.band_bootstrap": integer(1),
    "report.max_judges": integer(1),
    "report.ensemble": integer(1, 1024, optional=True),
    "report.torch_threads": integer(1, 1024, optional=True),
    "report.workers": integer(1, 256),
    "report.ablations": boolean(),
    "report.targets": boolean(),
    "report.learning_curve.repeats": integer(0),
}

# Keys whose meaning depends on the command (elsewhere `model` is a model folder to read).
COMMAND_RULES: dict[str, dict[str, Rule]] = {
    "train": {"model": choice("network", "linear", "ordinal")},  # calibration/model/linear_calibrator.py MODELS
}

def check_config(command: str, cfg: Mapping[str, Any]) -> None:
    """Raise InputError (one line: the key, its value, what it must be) on the first bad config value."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True) if not isinstance(cfg, dict) else cfg
    for key, rule in {**RULES, **COMMAND_RULES.get(command, {})}.items():
        found, value = _lookup(plain, key)
        if not found or value == "???":  # a required value not given: the command says which file to pass
            continue
        problem = rule.check(value)
        if problem is not None:
            raise InputError(f"{key}={_show(value)} {problem}.", fix=f"set {key} to {rule.want}.")
    _check_fractions(plain)
    check_paths(command, plain, not_paths=COMMAND_RULES.get(command, {}).keys())


def check_settings(settings: Mapping[str, Any], *, source: str | Path | None = None) -> None:
    """The same checks for a Settings mapping (e.g. the `settings` block of a model.json)."""
    for key, value in settings.items():
        rule = SETTINGS_RULES.get(key)
        problem = None if rule is None else rule.check(value)
        if problem is not None:
            raise InputError(
                f"setting {key}={_show(value)} {problem}.",
                path=source,
                fix=f"it must be {rule.want}; retrain the model.",
            )


def _check_fractions(cfg: Mapping[str, Any]) -> None:
    fractions = _lookup(cfg, "report.learning_curve.fractions")
    if fractions[0]:
        v = fractions[1]
        if not isinstance(v, list) or not v or not all(_is_number(x) and 0 < x <= 1 for x in v):
            raise InputError(
                f"report.learning_curve.fractions={_show(v)} is not a list of fractions.",
                fix="set it to a list of numbers in (0, 1], e.g. [0.25, 0.5, 1.0].",
            )


def _show(value: Any) -> str:
    if isinstance(value, str) and looks_like_secret(value):  # token_env=<the token itself>: never echoed
        return "'***' (not shown: it looks like a token or key)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
