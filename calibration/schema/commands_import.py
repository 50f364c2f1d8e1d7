"""The schema of `role-rubric import`: the command's keys built from each source's settings class
(calibration/schema/source_keys.py: each key declared once, in the source's own class).

`import source=X key=value ...` stays one flat command line: `Import`'s keys are the common ones (`source`,
`out`, `progress`) and every source's own, each shown in --help with the sources that take it. A key means
one thing per source (token_env's default is each service's own variable), and a key given that the chosen
source does not take is one line naming the source's keys. The import command builds the chosen source's
settings object (`source_settings`) and hands it to the source (calibration/connectors/sources.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from calibration.schema.base import Command, KeyRule, needs
from calibration.schema.keys import PROGRESS, required
from calibration.schema.source_keys import SOURCE_KEYS, SourceKeys
from rubric.config.settings import MISSING, Rule, choice, default_of, either, setting, settings_of

__all__ = ["Import", "source_settings"]

COMMON = ("source", "out", "progress")
"""The keys every source takes (the command's own)."""


def source_keys(cls: type[SourceKeys]) -> list[str]:
    """The keys of a source's settings, in their order."""
    return [f.name for f in settings_of(cls)]


S = TypeVar("S", bound=SourceKeys)


def source_settings(cls: type[S], values: Mapping[str, Any] | Any) -> S:
    """The settings of the source `cls` from the import's values (the command's object, or a mapping): the
    source's keys as given, its own default where not given. A key of another source given is refused."""
    plain = values if isinstance(values, Mapping) else {f.name: getattr(values, f.name) for f in import_fields()}
    _refuse_foreign(cls, plain)
    kwargs = {}
    for f in settings_of(cls):
        value = plain.get(f.name)
        if value is not None and value != MISSING:
            kwargs[f.name] = Path(value) if str(f.type).split(" | ")[0] == "Path" else value
    return cls(**kwargs)


def _foreign(cls: type[SourceKeys], values: Mapping[str, Any]) -> list[str]:
    """The keys given that `cls` does not take (a key left at the command's default is not given)."""
    own = set(source_keys(cls)) | set(COMMON)
    defaults = {f.name: default_of(f) for f in import_fields()}
    return [
        key
        for key, value in values.items()
        if key not in own and key in defaults and value not in (None, defaults[key])
    ]


def _refuse_foreign(cls: type[SourceKeys], values: Mapping[str, Any]) -> None:
    from rubric.errors import InputError

    foreign = _foreign(cls, values)
    if foreign:
        raise InputError(
            _foreign_problem(cls, foreign), fix=f"leave {foreign[0]}= out (or choose the source it is for)."
        )


def _foreign_problem(cls: type[SourceKeys], foreign: list[str]) -> str:
    takers = [name for name, other in SOURCE_KEYS.items() if foreign[0] in source_keys(other)]
    of = f" (a key of source={'|'.join(takers)})" if takers else ""
    return (
        f"source={cls.source} does not take {foreign[0]}={of}; its keys are "
        + ", ".join(f"{k}=" for k in source_keys(cls))
        + "."
    )


# -- the command's keys: the common ones and every source's, each declared in the sources' classes --------------


def _merged(name: str, owners: list[tuple[str, dataclasses.Field]]) -> dataclasses.Field:
    """One key of the command from the sources' fields of that name: shown with the sources that take it;
    its default theirs where they agree, else null ("the source's own")."""
    docs: dict[str, list[str]] = {}
    for source, f in owners:
        docs.setdefault(f.metadata["doc"], []).append(source)
    doc = "; ".join(f"source={'|'.join(sources)}: {d}" for d, sources in docs.items())
    found = {repr(default_of(f)) for _, f in owners}
    default = default_of(owners[0][1]) if len(found) == 1 and default_of(owners[0][1]) != MISSING else None
    if default is None and len(found) > 1 and MISSING not in {default_of(f) for _, f in owners}:
        doc += " (null: the source's own: " + ", ".join(f"{default_of(f)} for {s}" for s, f in owners) + ")"
    rules = [f.metadata["rule"] for _, f in owners]
    rule = rules[0] if len({r.type for r in rules}) == 1 else either(*rules)
    rule = _optional(rule) if default is None else rule
    return setting(default, doc, rule)


def _optional(rule: Rule) -> Rule:
    """`rule`, with null allowed (a key another source does without)."""
    shown = rule.type if "null" in rule.type else f"{rule.type} | null"
    return Rule(lambda v: None if v is None else rule.check(v), rule.want, shown)


def _source_fields() -> list[tuple[str, Any, dataclasses.Field]]:
    owners: dict[str, list[tuple[str, dataclasses.Field]]] = {}
    types: dict[str, Any] = {}
    for source, cls in SOURCE_KEYS.items():
        for f in settings_of(cls):
            owners.setdefault(f.name, []).append((source, f))
            types.setdefault(f.name, f.type)
    return [(name, "Any", _merged(name, fields)) for name, fields in owners.items()]


def _source_rules() -> tuple[KeyRule, ...]:
    """Per source: each required key, its own rules, and no key of another source."""
    rules: list[KeyRule] = []
    for name, cls in SOURCE_KEYS.items():
        wanted: list[str] = []
        for f in settings_of(cls):
            if default_of(f) == MISSING:
                wanted.append(f.name)
                if not f.metadata.get("with_next"):
                    rules.append(needs("source", *wanted, value=name, fix=f.metadata["fix"]))
                    wanted = []
        rules.extend(cls.rules)
        rules.append(_own_keys_rule(cls))
    return tuple(rules)


def _own_keys_rule(cls: type[SourceKeys]) -> KeyRule:
    return KeyRule(
        lambda v: v.get("source") == cls.source and bool(_foreign(cls, v)),
        f"source={cls.source} does not take a key given.",
        "leave out the keys of other sources.",
        f"source={cls.source} takes only its own keys",
        explain=lambda v: _foreign_problem(cls, _foreign(cls, v)),
    )


@dataclass(frozen=True)
class ImportCommand(Command):
    """role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR   (or url=URL project=ID, no export=)
    role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
    role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR
    role-rubric import source=otel files=EXPORT.jsonl|DIR|GLOB out=DIR
    role-rubric import source=mlflow tracking_uri=URL experiment=NAME out=DIR
    role-rubric import source=phoenix url=URL project=NAME out=DIR
    Conversations come from a chatbot's traces (OTLP JSON exports, an MLflow or a Phoenix server), reviewers'
    labels with them (MLflow HUMAN feedback, Phoenix HUMAN annotations): docs/how-to/traces.md.
    Labels come back from Label Studio (its JSON export, or pulled through its API) or from a filled labelling
    sheet; every answer is checked against data=DIR's rubric.yaml and each labelled turn against its
    conversations.jsonl. out=DIR gets the dataset (rubric.yaml, conversations.jsonl, llm.csv copied) with
    labels.csv = data's labels plus the imported ones, ready for `role-rubric train data=OUT` (docs/reference/files.md),
    and the sampling plan the labelled conversations were drawn with (sample_plan.csv), for `role-rubric estimate`.
    Each source takes its own keys (below, with the sources that take them); another source's key is refused."""

    name = "import"
    summary = "conversations from traces (OTLP, MLflow, Phoenix), labels from reviewers -> a native dataset dir"
    source: str = setting(
        "llm-rubric",
        "otel | mlflow | phoenix (a chatbot's traces) | label-studio | sheet | llm-rubric (the LLM-Rubric "
        "paper's TSV files)",
        choice(*SOURCE_KEYS),
    )
    out: Path = required("native dataset dir to write")
    progress: bool = PROGRESS()


def import_fields() -> tuple[dataclasses.Field, ...]:
    """Every key of the command (`Import`'s fields)."""
    return dataclasses.fields(Import)


if TYPE_CHECKING:
    Import = ImportCommand
else:
    Import = dataclasses.make_dataclass(
        "Import",
        _source_fields(),
        bases=(ImportCommand,),
        frozen=True,
        namespace={"rules": _source_rules(), "__doc__": ImportCommand.__doc__, "__module__": __name__},
    )
    """The command's schema: the common keys, then every source's (typed as the sources declare them, read
    through `source_settings`)."""
