"""The sources `role-rubric import` reads: one registry, one interface.

A source is a class registered here once, by the name `source=` takes; the import command loads it by name
(its extra checked first: rubric/plugins.py), builds its settings from the command's keys and calls
`import_into`. Nothing else names a source: --help, the error for an unknown name and the docs list this
registry.

The contract of a `TraceSource`:
- `settings`: its settings class (calibration/schema/commands_import.py), one `setting(...)` per key it
  takes: each key's type, default, range and description, written once. Its required keys and rules are
  checked before the source is made; a key of another source is refused naming this one's keys.
- `__init__(settings)`: nothing is read yet.
- `import_into(out, progress=)`: reads the source and writes the native dataset folder out=, only after every
  check has passed (bad input leaves out= as it was); gives back the counts it logged.
- What it reads: conversations (each turn's trace and span ids, and `started_at`, where they come from traces:
  docs/reference/files.md), reviewers' labels (as labels.csv rows, each answer checked against the rubric), and
  where it all came from (import_summary.json, or the export beside the labels).
- What it raises: `rubric.errors.InputError`, one line naming the file, the server or the key and the fix, for
  anything wrong with the input, the server or the credentials (secrets masked); never a traceback for bad
  input, and nothing half-written.

A trace source (spans from files or a server) implements `import_into` with `import_traces`
(calibration/connectors/trace_import.py) over a `SpanReader`, which reads the spans and annotations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

from calibration.schema.commands_import import Import, source_settings
from calibration.schema.source_keys import SourceKeys
from rubric.plugins import Plugin, Registry
from rubric.traces.spans import Annotation, Span

__all__ = ["SOURCES", "SpanReader", "TraceSource", "open_source"]


@runtime_checkable
class TraceSource(Protocol):
    """One source of `import` (see the module's docstring for the contract)."""

    settings: ClassVar[type[SourceKeys]]

    def __init__(self, settings: Any) -> None: ...

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        """Read the source and write the dataset folder out=; the counts."""
        ...


@runtime_checkable
class SpanReader(Protocol):
    """What a trace source reads from its files or server: spans (OTLP's ids, times in ns) and the reviewers'
    annotations stored beside them. Readers stream: `spans()` yields as it reads, so memory stays flat."""

    description: str
    """Where the traces come from, for messages: "OTLP files runs/traces/*.jsonl", "MLflow at http://..."."""

    @property
    def record(self) -> dict[str, Any]:
        """Where the conversations came from (each record's "source" field, with "kind" added)."""
        ...

    def spans(self) -> Iterator[Span]: ...

    def annotations(self) -> Iterator[Annotation]:
        """The HUMAN annotations (an OTLP export keeps none); read with the spans."""
        ...


SOURCES: Registry[type[TraceSource]] = Registry(
    "import source",
    [
        Plugin(
            "llm-rubric",
            "calibration.connectors.file_sources",
            "LlmRubricFiles",
            summary="the LLM-Rubric paper's TSV files",
        ),
        Plugin(
            "label-studio",
            "calibration.connectors.label_studio.source",
            "LabelStudioLabels",
            summary="reviewers' labels from Label Studio (an export, or pulled through its API)",
        ),
        Plugin("sheet", "calibration.connectors.file_sources", "SheetLabels", summary="a filled labelling sheet"),
        Plugin("otel", "calibration.connectors.otel.source", "OtelTraces", summary="OTLP JSON files"),
        Plugin(
            "mlflow",
            "calibration.connectors.mlflow.source",
            "MlflowTraces",
            extra="mlflow",
            summary="an MLflow tracking server's traces and HUMAN feedback",
        ),
        Plugin(
            "phoenix",
            "calibration.connectors.phoenix.source",
            "PhoenixTraces",
            summary="a Phoenix server's spans and HUMAN annotations",
        ),
    ],
)
"""source= -> the class that imports it, in the order --help lists them."""


def open_source(cfg: Import, registry: Registry[type[TraceSource]] = SOURCES) -> TraceSource:
    """The source cfg.source names, made with its settings from the command's keys (its extra checked first; a
    key of another source refused)."""
    cls = registry.load(cfg.source, by=f"import source={cfg.source}")
    return cls(source_settings(cls.settings, cfg))
