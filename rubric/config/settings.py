"""What a config value must be, written once beside the setting it describes.

A setting is a dataclass field made with `setting(default, doc, rule)`: its default, a one-line description
and a `Rule` (the type and range: `integer(1, 20)`, `number(above=0)`, `choice("warn", "refuse")` ...).
`check_values` checks a plain mapping against such a dataclass and raises one line
("KEY=VALUE is out of range. Fix: set KEY to a whole number >= 1."); `--help` and docs/reference/commands.md
read the same fields (calibration/schema). Here, below both packages, so that the judge's settings
(rubric/judge/settings.py) are described the same way as the calibrator's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from rubric.errors import InputError
from rubric.secrets import looks_like_secret

MISSING = "???"
"""A required value (Hydra's mark): the command says which file to pass."""


@dataclass(frozen=True)
class Rule:
    """What one config value must be. `check(value) -> None | str`: the problem, if any."""

    check: Callable[[Any], str | None]
    want: str
    """The fix's description of a good value, e.g. 'a number > 0'."""
    type: str = "any"
    """The type as --help shows it: int, float, bool, str, list, ..."""


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
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

    return Rule(check, want, _typed("int", low, high, optional))


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
        if not is_number(v):
            return "is not a finite number"
        if (
            (low is not None and v < low)
            or (high is not None and v > high)
            or (above is not None and v <= above)
            or (below is not None and v >= below)
        ):
            return "is out of range"
        return None

    lo = f"[{low}" if low is not None else (f"({above}" if above is not None else "")
    hi = f"{high}]" if high is not None else (f"{below})" if below is not None else "")
    range_ = f" in {lo or '(-inf'}, {hi or 'inf)'}" if lo or hi else ""
    return Rule(check, want.strip(), "float" + range_ + (" | null" if optional else ""))


def _typed(name: str, low: Any, high: Any, optional: bool) -> str:
    range_ = (
        f" in [{low}, {high}]"
        if low is not None and high is not None
        else (f" >= {low}" if low is not None else (f" <= {high}" if high is not None else ""))
    )
    return name + range_ + (" | null" if optional else "")


def boolean() -> Rule:
    return Rule(lambda v: None if isinstance(v, bool) else "is not true or false", "true or false", "bool")


def choice(*allowed: Any) -> Rule:
    return Rule(
        lambda v: None if v in allowed else "is not one of the choices",
        f"one of {', '.join(map(str, allowed))}",
        " | ".join("null" if a is None else str(a) for a in allowed),
    )


def text(*, optional: bool = False) -> Rule:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        return None if isinstance(v, str) and v.strip() else "is not a non-empty text"

    return Rule(check, "a text" + (" (or null)" if optional else ""), "str" + (" | null" if optional else ""))


def path(*, optional: bool = False) -> Rule:
    """A file or folder name. What it must be on disk is checked by calibration/schema/paths.py and the
    loaders (which can name the row); here only the type."""
    return Rule(lambda v: None, "a path" + (" (or null)" if optional else ""), "path" + (" | null" if optional else ""))


def paths() -> Rule:
    """data= of the commands that read several folders as one: a path or a list of paths."""
    return Rule(lambda v: None, "a path or a list of paths", "path | [path, ...]")


def anything(type_: str) -> Rule:
    """A value whose parts are checked where it is used (a mapping of scorer parameters, a rubric...)."""
    return Rule(lambda v: None, type_, type_)


def text_list(*, non_empty: bool = False, optional: bool = False) -> Rule:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        if not isinstance(v, (list, tuple)) or not all(
            isinstance(x, (str, int)) and not isinstance(x, bool) for x in v
        ):
            return "is not a list of names"
        return "is an empty list" if non_empty and not v else None

    return Rule(
        check,
        "a list like [a, b]" + (" with at least one entry" if non_empty else ""),
        "[str, ...]" + (" | null" if optional else ""),
    )


def fractions() -> Rule:
    def check(v: Any) -> str | None:
        ok = isinstance(v, (list, tuple)) and v and all(is_number(x) and 0 < x <= 1 for x in v)
        return None if ok else "is not a list of fractions"

    return Rule(check, "a list of numbers in (0, 1], e.g. [0.25, 0.5, 1.0]", "[float in (0, 1], ...]")


def either(*rules: Rule) -> Rule:
    """A value one of `rules` accepts. Refused, the problem said is that of a rule of the value's type (-3 for
    "a whole number >= 1 or a text" is out of range, not "not a text"), else the last rule's.

    >>> either(integer(1), text()).check(-3), either(integer(1), text()).check(""), either(integer(1), text()).check(2)
    ('is out of range', 'is not a non-empty text', None)
    """

    def check(v: Any) -> str | None:
        problems = [r.check(v) for r in rules]
        if any(p is None for p in problems):
            return None
        of_its_type = [p for p in problems if p is not None and not p.startswith("is not ")]
        return of_its_type[0] if of_its_type else problems[-1]

    return Rule(check, " or ".join(r.want for r in rules), " | ".join(r.type for r in rules))


def _url(v: Any) -> bool:
    return isinstance(v, str) and v.lower().startswith(("http://", "https://")) and len(v) > len("https://")


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
        check, "null (OUT/search.db) or a database URL such as sqlite:///path.db or postgresql://host/db", "URL | null"
    )


def base_url() -> Rule:
    return Rule(
        lambda v: None if v is None or v == "local" or _url(v) else "is not an http(s) URL",
        "null (the environment's), local, or a URL such as http://localhost:8000/v1",
        "URL | local | null",
    )


def http_url() -> Rule:
    return Rule(
        lambda v: None if v is None or _url(v) else "is not an http(s) URL",
        "null or a URL such as http://localhost:8080",
        "URL | null",
    )


def env_name(*, optional: bool = False) -> Rule:
    def check(v: Any) -> str | None:
        if v is None and optional:
            return None
        ok = isinstance(v, str) and v.replace("_", "a").isalnum() and not v[:1].isdigit()
        return None if ok else "is not the name of an environment variable"

    return Rule(
        check,
        "a variable name such as LABEL_STUDIO_API_KEY (the token itself never goes on the command line)",
        "env var name" + (" | null" if optional else ""),
    )


def setting(default: Any, doc: str, rule: Rule, **meta: Any) -> Any:
    """A dataclass field that is a setting: its default, what it is (one line) and what it must be.
    A list or mapping default is copied for each instance; `meta` adds to the field's metadata."""
    meta = {"doc": doc, "rule": rule, **meta}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: _copy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _copy(value: Any) -> Any:
    import copy

    return copy.deepcopy(value)


def default_of(f: dataclasses.Field) -> Any:
    """A field's default (calling its factory)."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def settings_of(cls: type) -> list[dataclasses.Field]:
    """The fields of `cls` made with `setting()`."""
    return [f for f in dataclasses.fields(cls) if "rule" in f.metadata]


def check_values(
    cls: type, values: Mapping[str, Any], *, prefix: str = "", fix: str | None = None, source: Any = None
) -> None:
    """Raise InputError (one line: the key, its value, what it must be) on the first bad value of `values`
    that `cls` describes. Keys `cls` does not describe, and required values not given, are skipped.

    >>> @dataclass
    ... class Options:
    ...     folds: int = setting(5, "cross-validation folds", integer(2, 1000))
    >>> check_values(Options, {"folds": 3, "other": "x"})
    >>> check_values(Options, {"folds": 1})
    Traceback (most recent call last):
    rubric.errors.InputError: folds=1 is out of range. Fix: set folds to a whole number >= 2 and <= 1000.
    """
    for f in settings_of(cls):
        if f.name not in values or values[f.name] == MISSING:
            continue
        value, rule = values[f.name], f.metadata["rule"]
        problem = rule.check(value)
        if problem is not None:
            key = prefix + f.name
            raise InputError(
                f"{key}={show(value)} {problem}.",
                path=source,
                fix=(fix or "set {key} to {want}.").format(key=key, want=rule.want),
            )


def show(value: Any) -> str:
    """A value as an error message shows it: a token is never echoed, a long value is cut."""
    if isinstance(value, str) and looks_like_secret(value):  # token_env=<the token itself>: never echoed
        return "'***' (not shown: it looks like a token or key)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
