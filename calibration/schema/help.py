"""`role-rubric COMMAND --help` and "did you mean" for bad overrides, both written from the schemas.

Nothing here is written per command: the help of a command is its summary, its schema's docstring, its
config groups with their options (conf/GROUP/*.yaml), then every key of the composed config with its
type, default and description (the field that declares it). docs/reference/commands.md is this text.
"""

from __future__ import annotations

import difflib
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from typing import Any

from calibration.schema.store import SCHEMAS, field_of


def usage() -> str:
    """`role-rubric --help`: every command with its one-line summary."""
    lines = ["usage: role-rubric COMMAND [key=value ...]   (key=value are Hydra overrides of the command's config)", ""]
    width = max(len(name) for name in SCHEMAS) + 2
    lines += [f"  {name:<{width}} {cls.summary}" for name, cls in SCHEMAS.items()]
    lines += [
        "",
        "role-rubric COMMAND --help (or -h) lists its keys, their types, defaults and what each does;",
        "role-rubric COMMAND --cfg prints the composed config of a command.",
    ]
    return "\n".join(lines)


def group_choices(group: str) -> list[str]:
    """The options of a config group: conf/GROUP/*.yaml without the suffix, and the schema's `default`."""
    node = resources.files("conf").joinpath(group)
    found = {p.name[:-5] for p in node.iterdir() if p.name.endswith(".yaml")} if node.is_dir() else set()
    return sorted(found | ({"default"} if group in ("network", "train", "search") else set()))


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def format_value(value: Any) -> str:
    """A value as it is written on the command line: null, true, [a, b], {k: v}."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        text = "[" + ", ".join(format_value(v) for v in value) + "]"
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k}: {format_value(v)}" for k, v in value.items()) + "}"
    else:
        text = str(value)
    if isinstance(value, list) and len(text) > 60:
        ids = [v.get("id") for v in value if isinstance(v, Mapping) and v.get("id")]
        return f"[{len(value)} items{': ' + ', '.join(map(str, ids)) if ids else ''}]"
    return text if len(text) <= 60 else text[:57] + "..."


def command_help(command: str, cfg: Any | None = None) -> str:
    """The --help text of a command: what it does, required keys, config groups and every key."""
    from omegaconf import OmegaConf

    from calibration.schema.compose import compose_config

    cls = SCHEMAS[command]
    flat = _flatten(OmegaConf.to_container(cfg if cfg is not None else compose_config(command), resolve=False))
    required = [k for k, v in flat.items() if v == "???"]
    lines = [
        f"usage: role-rubric {command} " + " ".join(f"{k}=..." for k in required) + " [key=value ...]",
        "",
        cls.summary,
        "",
    ]
    lines += [f"  {line.strip()}" for line in (cls.__doc__ or "").strip().splitlines() if line.strip()]
    if required:
        lines += ["", "required: " + ", ".join(required)]
    if cls.rules:  # checked with the values, before any file is read (calibration/schema/build.py); a rule
        # generated per key (publish: target=X takes its own keys only) is stated once
        lines += ["", "rules between keys:"] + [f"  {doc}" for doc in dict.fromkeys(rule.doc for rule in cls.rules)]
    groups = [(g, option, note) for g, option, note in cls.groups]
    if groups:
        lines += ["", "config groups (choose with GROUP=NAME; their keys are GROUP.KEY below):"]
        gw = max(len(f"{g}={o}") for g, o, _ in groups) + 4
        for group, option, note in groups:
            lines.append(f"  {f'{group}={format_value(option)}':<{gw}}choices: {', '.join(group_choices(group))}")
            lines += _wrap(note, gw + 2)
    lines += ["", "keys (key=default  type: what it does):"]
    names = [g for g, _, _ in groups]
    order = sorted(
        flat, key=lambda k: (k.split(".")[0] in names, names.index(k.split(".")[0]) if k.split(".")[0] in names else 0)
    )
    for key in order:
        value = flat[key]
        f = field_of(command, key)
        kind = f.metadata["rule"].type if f is not None else "from the group's file"
        doc = f.metadata["doc"] if f is not None else ""
        lines.append(f"  {key}={format_value(value)}" + ("  (required)" if value == "???" else ""))
        lines += _wrap(doc if doc.startswith(kind) else f"{kind}: {doc}" if doc else kind, 6)
    lines += ["", f"role-rubric {command} --cfg prints the composed config; any key above can be set as key=value."]
    return "\n".join(lines)


def _wrap(text: str, indent: int, width: int = 108) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * indent)


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest valid name, or ''."""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def diagnose_overrides(command: str, overrides: Sequence[str]) -> str | None:
    """One line that explains a bad override (unknown key or group choice), or None if none is found.

    Called after Hydra rejected the overrides, so the happy path costs nothing.
    """
    from omegaconf import OmegaConf

    from calibration.schema.compose import compose_config

    groups = [g for g, _, _ in SCHEMAS[command].groups]
    all_groups = sorted(
        {
            *(p.name for p in resources.files("conf").iterdir() if p.is_dir() and not p.name.startswith("_")),
            "network",
            "train",
            "search",
        }
    )
    group_overrides = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            return f"bad override {item!r}: not key=value. Fix: write KEY=VALUE (see `role-rubric {command} --help`)."
        key = key.lstrip("+~")
        if key in all_groups or key in groups:
            choices = group_choices(key)
            if value not in choices:
                return f"unknown {key} {value!r}.{did_you_mean(value, choices)} Fix: use one of {', '.join(choices)}."
            group_overrides.append(item)
    try:
        cfg = compose_config(command, group_overrides)
    except Exception:
        return None
    flat = _flatten(OmegaConf.to_container(cfg, resolve=False))
    prefixes = {k.rsplit(".", i)[0] for k in flat for i in range(1, k.count(".") + 1)}
    valid = set(flat) | prefixes
    for item in overrides:
        key = item.partition("=")[0]
        if key.startswith("+") or key in all_groups or key in groups:
            continue
        key = key.lstrip("~")
        if key in valid:
            continue
        parent = key.rsplit(".", 1)[0] if "." in key else ""
        siblings = sorted(k for k in valid if k.rsplit(".", 1)[0] == parent and "." in k) if parent else []
        pool = siblings or sorted(k for k in flat if "." not in k) + sorted(groups)
        hint = did_you_mean(key, siblings or valid)
        where = f"keys of {parent}" if siblings else "top-level keys"
        return f"unknown key {key!r}.{hint} Valid {where}: {', '.join(pool)}. Fix: see `role-rubric {command} --help`."
    return None
