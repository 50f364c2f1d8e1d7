"""`role-rubric COMMAND --help` and "did you mean" for bad overrides, both read from the packaged configs.

Nothing here is written per command: the help of a command is its line in the command table, the comment
block at the top of conf/COMMAND.yaml, then every key of the composed config with its default and the
comment beside it in the YAML (group keys such as `train.lr` from conf/train/default.yaml). A new command
or key gets its help by being documented in its YAML.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

_KEY_RE = re.compile(r"^(\s*)([A-Za-z_][\w-]*)\s*:(.*)$")


@dataclass
class YamlDoc:
    """What one YAML file says about itself: its header comment and a comment per dotted key."""

    header: list[str] = field(default_factory=list)
    comments: dict[str, str] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)
    """dotted key -> the value as written in the file (interpolations unresolved)."""


def _split_comment(rest: str) -> tuple[str, str]:
    """'  5   # folds' -> ('5', 'folds'); a '#' inside quotes is part of the value."""
    quote = None
    for i, ch in enumerate(rest):
        if ch in "'\"":
            quote = None if quote == ch else (ch if quote is None else quote)
        elif ch == "#" and quote is None and (i == 0 or rest[i - 1].isspace()):
            return rest[:i].strip(), rest[i + 1 :].strip()
    return rest.strip(), ""


def parse_yaml_doc(text: str) -> YamlDoc:
    """Comments of a config file by dotted key (a line-based reading of the simple YAML in conf/).

    >>> d = parse_yaml_doc("# top\\na: 1  # the a\\nb:\\n  c: x   # see\\n      # more\\n")
    >>> d.header, d.comments["a"], d.comments["b.c"], d.raw["b.c"]
    (['top'], 'the a', 'see more', 'x')
    """
    doc = YamlDoc()
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing mappings
    pending: list[str] = []  # full-line comments waiting for the key below them
    last: str | None = None
    last_indent = -1
    in_list = False
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = [] if last is not None else pending
            continue
        if stripped.startswith("#"):
            comment = stripped.lstrip("#").strip()
            indent = len(line) - len(line.lstrip())
            if last is None:
                doc.header.append(comment)
            elif indent > last_indent and doc.comments.get(last):  # continues the comment of the line above
                doc.comments[last] += " " + comment
            else:
                pending.append(comment)
            continue
        m = _KEY_RE.match(line)
        if m is None or stripped.startswith("- "):
            in_list = in_list or stripped.startswith("- ")
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = ".".join([k for _, k in stack] + [key])
        if path == "defaults" or path.startswith("defaults."):
            stack.append((indent, key))
            last, last_indent, pending = None, indent, []
            continue
        value, comment = _split_comment(rest)
        comment = " ".join([*pending, comment]).strip()
        doc.comments[path] = comment
        doc.raw[path] = value
        pending, last, last_indent = [], path, indent
        if not value:
            stack.append((indent, key))
    return doc


def _conf_text(*parts: str) -> str | None:
    node = resources.files("conf")
    for part in parts:
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8") if node.is_file() else None


def group_choices(group: str) -> list[str]:
    """The options of a config group: conf/GROUP/*.yaml without the suffix."""
    node = resources.files("conf").joinpath(group)
    if not node.is_dir():
        return []
    return sorted(p.name[:-5] for p in node.iterdir() if p.name.endswith(".yaml"))


def defaults_of(command: str) -> dict[str, str]:
    """group -> chosen option, from the `defaults:` list of conf/COMMAND.yaml."""
    text = _conf_text(f"{command}.yaml") or ""
    out, inside = {}, False
    for line in text.splitlines():
        if line.startswith("defaults:"):
            inside = True
            continue
        if inside:
            m = re.match(r"^\s*-\s*([\w-]+)\s*:\s*([\w.-]+)", line)
            if m:
                out[m.group(1)] = m.group(2)
            elif line.strip() and not line.lstrip().startswith(("-", "#")):
                break
    return out


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, Mapping) and node:
        out: dict[str, Any] = {}
        for k, v in node.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _docs(command: str, groups: Mapping[str, str]) -> tuple[YamlDoc, dict[str, str], dict[str, str]]:
    root = parse_yaml_doc(_conf_text(f"{command}.yaml") or "")
    comments, raw = dict(root.comments), dict(root.raw)
    for group, choice in groups.items():
        sub = parse_yaml_doc(_conf_text(group, f"{choice}.yaml") or "")
        comments.update({f"{group}.{k}": v for k, v in sub.comments.items()})
        raw.update({f"{group}.{k}": v for k, v in sub.raw.items()})
    return root, comments, raw


def _fmt_value(value: Any, raw: str | None) -> str:
    if raw and raw not in {">", ">-", "|", "|-"}:  # as written: keeps ${interpolations} and the spelling
        return raw
    if isinstance(value, list) and len(str(value)) > 60:
        ids = [v.get("id") for v in value if isinstance(v, Mapping) and v.get("id")]
        return f"[{len(value)} items{': ' + ', '.join(map(str, ids)) if ids else ''}]"
    if isinstance(value, str) and len(value) > 60:
        return value[:57] + "..."
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def command_help(command: str, summary: str, cfg: Any | None = None) -> str:
    """The --help text of a command: what it does, required keys, config groups and every key."""
    from omegaconf import OmegaConf

    from calibration.compose import compose_config

    groups = defaults_of(command)
    root, comments, raw = _docs(command, groups)
    if cfg is None:
        cfg = compose_config(command)
    flat = _flatten(OmegaConf.to_container(cfg, resolve=False))
    required = [k for k, v in flat.items() if v == "???"]
    lines = [
        f"usage: role-rubric {command} " + " ".join(f"{k}=..." for k in required) + " [key=value ...]",
        "",
    ]
    lines += [summary, ""]
    lines += [f"  {h}" for h in root.header if h]
    if required:
        lines += ["", "required: " + ", ".join(required)]
    if groups:
        lines += ["", "config groups (choose with GROUP=NAME; their keys are GROUP.KEY below):"]
        gw = max(len(f"{g}={c}") for g, c in groups.items()) + 4
        for group, choice in groups.items():
            lines.append(f"  {f'{group}={choice}':<{gw}}choices: {', '.join(group_choices(group))}")
            header = " ".join(parse_yaml_doc(_conf_text(group, f"{choice}.yaml") or "").header)
            note = "; ".join(t for t in (_defaults_comment(command, group), header) if t)
            lines += _wrap(note, gw + 2)
    lines += ["", "keys (default, then what the config file says about it):"]
    # top-level keys first, then each group's keys, in file order
    order = sorted(
        flat,
        key=lambda k: (
            k.split(".")[0] in groups,
            list(groups).index(k.split(".")[0]) if k.split(".")[0] in groups else 0,
        ),
    )
    width = min(34, max(len(k) for k in flat) + 6) if flat else 10
    for key in order:
        value = flat[key]
        text = f"{key}={_fmt_value(value, raw.get(key))}" + ("  (required)" if value == "???" else "")
        note = comments.get(key, "")
        if len(text) >= width - 1:
            lines.append(f"  {text}")
            lines += _wrap(note, width + 2)
        else:
            wrapped = _wrap(note, width + 2)
            lines.append(f"  {text:<{width}}{wrapped[0].lstrip() if wrapped else ''}".rstrip())
            lines += wrapped[1:]
    lines += [
        "",
        f"role-rubric {command} --cfg prints the composed config; any key above can be set as key=value.",
    ]
    return "\n".join(lines)


def _wrap(text: str, indent: int, width: int = 108) -> list[str]:
    if not text:
        return []
    return textwrap.wrap(text, width=width, initial_indent=" " * indent, subsequent_indent=" " * indent)


def _defaults_comment(command: str, group: str) -> str:
    text = _conf_text(f"{command}.yaml") or ""
    m = re.search(rf"^\s*-\s*{re.escape(group)}\s*:[^#\n]*#\s*(.*)$", text, re.M)
    return m.group(1).strip() if m else ""


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """' Did you mean 'x'?' for the closest valid name, or ''."""
    close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def diagnose_overrides(command: str, overrides: Sequence[str]) -> str | None:
    """One line that explains a bad override (unknown key or group choice), or None if none is found.

    Called after Hydra rejected the overrides, so the happy path costs nothing.
    """
    from omegaconf import OmegaConf

    from calibration.compose import compose_config

    groups = defaults_of(command)
    all_groups = sorted(
        p.name for p in resources.files("conf").iterdir() if p.is_dir() and not p.name.startswith("_")
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
                return (
                    f"unknown {key} {value!r}.{did_you_mean(value, choices)} "
                    f"Fix: use one of {', '.join(choices)}."
                )
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
        return (
            f"unknown key {key!r}.{hint} Valid {where}: {', '.join(pool)}. "
            f"Fix: see `role-rubric {command} --help`."
        )
    return None
