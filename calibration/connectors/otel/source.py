"""`import source=otel`: OTLP JSON files (an OpenTelemetry Collector's file exporter) -> a native dataset folder.

The files are read by rubric/traces/otlp.py (`OtlpFiles`, streamed, decoding only the spans an import reads);
the conversations are rebuilt and written by calibration/connectors/trace_import.py. An export keeps no
reviewers' annotations.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from calibration.connectors.trace_import import import_traces
from calibration.schema.source_keys import OtelKeys
from rubric.traces.assemble import TraceSelection
from rubric.traces.spans import Annotation, Span

__all__ = ["OtelReader", "OtelTraces"]


class OtelReader:
    """The spans of OTLP files (`files`: a file, a folder or a glob), only the attributes the selection reads
    decoded."""

    def __init__(self, files: str, selection: TraceSelection):
        from rubric.traces.otlp import OtlpFiles

        self.files = OtlpFiles(files, only=selection.read_keys())
        self.description = self.files.description

    @property
    def record(self) -> dict[str, Any]:
        return {"files": self.files.files}

    def spans(self) -> Iterator[Span]:
        return self.files.spans()

    def annotations(self) -> Iterator[Annotation]:
        return iter(())


class OtelTraces:
    """source=otel (calibration/connectors/sources.py's contract)."""

    settings: ClassVar[type[OtelKeys]] = OtelKeys

    def __init__(self, settings: OtelKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        return import_traces(
            self.keys, lambda selection: OtelReader(self.keys.files, selection), out=out, progress=progress
        )
