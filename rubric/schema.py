"""The rubric: questions, their options and numeric values, loaded from YAML with clear errors.

A rubric file looks like::

    name: role_adherence
    target: overall            # optional; default "overall" if present, else the last question (with a note)
    questions:
      - id: scope
        text: Does the reply stay within the topics and tasks the role covers?
        options:
          - {value: 1, label: "Clearly out of scope"}
          - {value: 2, label: "..."}

Questions may have different numbers of options; option values are numbers (the decoder takes the
expected value over them) and must be distinct within a question.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from rubric.errors import InputError, read_text_file
from rubric.ids import clean_id

log = logging.getLogger(__name__)  # warnings about the run (stderr); calibration/cli.py prints them (rubric/notices.py)


@dataclass(frozen=True)
class Option:
    """One answer option of a question."""

    value: float
    """Numeric value used for the expected answer (e.g. 1..4)."""
    label: str
    """What the option means, shown to the judge."""

    @property
    def key(self) -> str:
        """The option as written in files: integers without a trailing '.0'."""
        return format_value(self.value)


@dataclass(frozen=True)
class Question:
    """One rubric question with its own options."""

    id: str
    text: str
    options: tuple[Option, ...]

    @property
    def values(self) -> list[float]:
        return [o.value for o in self.options]

    def option_index(self, value: float) -> int | None:
        """Index of the option with this value, or None."""
        for i, o in enumerate(self.options):
            if o.value == value:
                return i
        return None

    @property
    def default_adheres_at(self) -> float:
        """Where "adheres" starts when adheres_at is not given: the lowest value of the upper half of the
        options (3 on 1-4), as in RoleAdherence, decide, estimate and the report."""
        values = sorted(self.values)
        return float(values[len(values) // 2])


@dataclass(frozen=True)
class Rubric:
    """An ordered set of questions; one of them is the training target."""

    name: str
    questions: tuple[Question, ...]
    target: str
    description: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    source: str | None = field(default=None, compare=False)
    """The rubric file it was read from, named by errors about it (None: built in code)."""
    target_defaulted: bool = field(default=False, compare=False)
    """True when nothing chose the target and the last question became it (see `note_default_target`)."""

    def __post_init__(self) -> None:
        ids = [q.id for q in self.questions]
        if self.target not in ids:
            raise InputError(
                f"target question {self.target!r} is not in the rubric (questions: {', '.join(ids)}).",
                path=self.source,
                fix="set target= to one of the rubric's question ids.",
            )

    @property
    def ids(self) -> list[str]:
        return [q.id for q in self.questions]

    def question(self, qid: str) -> Question:
        for q in self.questions:
            if q.id == qid:
                return q
        raise KeyError(qid)

    def with_target(self, target: str | None) -> Rubric:
        """The same rubric with another target question (None keeps the current one)."""
        if target is None:
            return self
        return replace(self, target=clean_id(target), target_defaulted=False)  # checked, naming self.source

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "target": self.target,
            "questions": [
                {"id": q.id, "text": q.text, "options": [{"value": o.value, "label": o.label} for o in q.options]}
                for q in self.questions
            ],
        }

    def fingerprint(self) -> str:
        """Hash of what the calibration network depends on: question ids and option values, in order."""
        shape = [[q.id, [o.value for o in q.options]] for q in self.questions]
        return hashlib.sha256(json.dumps(shape).encode()).hexdigest()[:16]


def format_value(value: float) -> str:
    """'3' for 3.0, '2.5' for 2.5: how option values are written in CSV headers and files."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def rubric_from_dict(data: Any, *, source: str | Path = "<rubric>", target: str | None = None) -> Rubric:
    """Build a Rubric from parsed YAML/JSON, failing with a message that names the source."""
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list) or not data["questions"]:
        raise InputError(
            "a rubric needs a non-empty 'questions' list.",
            path=source,
            fix="write 'questions:' with items that have id, text and options.",
        )
    questions = [_question(item, i, source) for i, item in enumerate(data["questions"], start=1)]
    ids = [q.id for q in questions]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(
            f"duplicate question id(s): {', '.join(dup)}.", path=source, fix="give every question its own id."
        )
    for key in ("name", "description", "target"):
        _text_field(data.get(key), f"the rubric's {key!r}", source, required=False)
    if target is not None and not isinstance(target, str):
        raise InputError(
            f"target={target!r} is not a question id.",
            path=source,
            fix="set target= to one of the rubric's question ids.",
        )
    own = data.get("target")
    if not target and own is not None and clean_id(own) not in ids:
        raise InputError(
            f"the rubric's target {clean_id(own)!r} is not one of its questions ({', '.join(ids)}).",
            path=source,
            fix="set 'target:' in this file (or target= on the command line) to one of its question ids.",
        )
    chosen = target or own or ("overall" if "overall" in ids else ids[-1])
    name = str(data.get("name") or Path(str(source)).stem)
    extra = {k: v for k, v in data.items() if k not in {"name", "questions", "target", "description"}}
    return Rubric(
        name,
        tuple(questions),
        clean_id(chosen),
        str(data.get("description") or ""),
        extra,
        source=str(source),
        target_defaulted=not (target or own or "overall" in ids),
    )


_NOTED: set[tuple[str | None, str]] = set()


def note_default_target(rubric: Rubric, command: str | None = None) -> None:
    """Say once per command which question became the target when the rubric chose none (no 'target:'
    and no 'overall' question), and how to choose another; silent otherwise. Called where a command
    settles its rubric, so a rubric loaded again inside a loop is not announced again."""
    key = (rubric.source, rubric.target)
    if not rubric.target_defaulted or key in _NOTED:
        return
    _NOTED.add(key)
    where = f"{rubric.source}: " if rubric.source else ""
    log.warning(
        (f"{command}: " if command else "")
        + f"{where}no 'target:' and no 'overall' question, so the last question, {rubric.target!r}, "
        "is the target (trained on, adherence read from); choose another with 'target: ID' in rubric.yaml or target=ID on the "
        "command line.",
    )


def _text_field(value: Any, what: str, source: str | Path, *, required: bool = True) -> str | None:
    """A text field: a string (a plain number is taken as its text); a list, mapping or true/false is an
    error, never its Python repr in a judge prompt."""
    if value is None:
        if required:
            raise InputError(f"{what} is empty (null).", path=source, fix="write it as text.")
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(
            f"{what} must be text, not {type(value).__name__} {_short(value)}.",
            path=source,
            fix="write it as a plain string (quote it in YAML).",
        )
    return str(value)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _question(item: Any, index: int, source: str | Path) -> Question:
    where = f"question {index}"
    if not isinstance(item, dict) or "id" not in item:
        raise InputError(f"{where} has no 'id'.", path=source, fix="give each question an id, text and options.")
    raw_id = item["id"]
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not str(raw_id).strip():
        raise InputError(
            f"{where} has id {_short(raw_id)}, not a name.",
            path=source,
            fix="give each question a non-empty text id such as 'scope'.",
        )
    qid = clean_id(raw_id)  # one rule for ids (rubric/ids.py)
    options = item.get("options")
    if not isinstance(options, list) or len(options) < 2:
        raise InputError(
            f"question {qid!r} needs at least two options.", path=source, fix="list options with a value and a label."
        )
    parsed = []
    for j, opt in enumerate(options, start=1):
        if not isinstance(opt, dict) or "value" not in opt:
            raise InputError(
                f"question {qid!r}, option {j} has no 'value'.", path=source, fix="write {value: N, label: ...}."
            )
        raw = opt["value"]
        try:
            if isinstance(raw, bool):
                raise TypeError
            value = float(raw)
        except (TypeError, ValueError):
            raise InputError(
                f"question {qid!r}, option {j} has a non-numeric value {_short(raw)}.",
                path=source,
                fix="option values must be numbers (they are averaged into an expected answer).",
            ) from None
        if not math.isfinite(value):
            raise InputError(
                f"question {qid!r}, option {j} has the value {raw!r}, not a finite number.",
                path=source,
                fix="option values must be finite numbers such as 1, 2, 3.",
            )
        label = opt.get("label", opt.get("description"))
        label = _text_field(label, f"question {qid!r}, option {j}'s label", source, required=False)
        parsed.append(Option(value, label or format_value(value)))
    values = [o.value for o in parsed]
    if len(set(values)) != len(values):
        raise InputError(f"question {qid!r} repeats an option value.", path=source, fix="make option values distinct.")
    text = _text_field(item.get("text"), f"question {qid!r}'s text", source, required=False)
    return Question(qid, text or qid, tuple(parsed))


class _Yaml12BoolLoader(yaml.SafeLoader):
    """SafeLoader where only true/false are booleans (YAML 1.2), so `label: no` stays the text "no"."""


_Yaml12BoolLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12BoolLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def load_rubric(path: str | Path, *, target: str | None = None) -> Rubric:
    """Load a rubric YAML file (or a directory containing rubric.yaml)."""
    path = Path(path)
    if path.is_dir():
        path = path / "rubric.yaml"
    if not path.exists():
        raise InputError("rubric file not found.", path=path, fix="pass the path of a rubric.yaml.")
    try:
        data = yaml.load(read_text_file(path), Loader=_Yaml12BoolLoader)  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise InputError(
            f"not valid YAML ({getattr(exc, 'problem', exc)}).",
            path=path,
            row=None if line is None else line + 1,
            fix="correct the YAML syntax.",
        ) from None
    return rubric_from_dict(data, source=path, target=target)


def save_rubric(rubric: Rubric, path: str | Path) -> Path:
    from rubric.files import atomic_write_text

    return atomic_write_text(path, yaml.safe_dump(rubric.to_dict(), sort_keys=False, allow_unicode=True))
