"""Memory does not grow with the export: ten times the spans around the same conversations (web requests,
queries: what most of an export is) leave the import's peak memory where it was, gzipped too (read as a
stream)."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest

from rubric.traces.assemble import TraceSelection, assemble
from tests.traces.otlp_json import conversation_spans, jsonl, request, span


def write(path, extra_per_line: int) -> None:
    lines = []
    for i in range(20):
        spans = conversation_spans("genai", 1 + 10 * i, f"c{i}", start=100 * i)
        lines.append(request(spans))
        for k in range(extra_per_line // 100):  # the other spans of those traces, in lines of their own
            lines.append(request([span(1 + 10 * i, 10_000 * (i + 1) + 100 * k + n, 100 * i, {"db.query.text": "SELECT 1" * 20, "db.system.name": "postgresql"}, name="SELECT") for n in range(100)]))  # fmt: skip
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(jsonl(lines).encode()))
    else:
        path.write_text(jsonl(lines))


def size(path) -> int:
    """The export's size in bytes, uncompressed."""
    data = path.read_bytes()
    return len(gzip.decompress(data) if path.suffix == ".gz" else data)


def peak_of_import(path) -> tuple[int, list]:
    from rubric.traces.otlp import OtlpFiles

    tracemalloc.start()
    try:
        selection = TraceSelection()
        records = assemble(OtlpFiles(path, only=selection.read_keys()).spans(), selection, source={}, description="t")
        return tracemalloc.get_traced_memory()[1], records.records
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_more_spans_around_the_same_conversations_take_no_more_memory(tmp_path, suffix):
    small, big = tmp_path / f"small{suffix}", tmp_path / f"big{suffix}"
    write(small, 100)
    write(big, 2000)
    assert size(big) > 10 * size(small)
    small_peak, small_records = peak_of_import(small)
    big_peak, big_records = peak_of_import(big)
    assert big_records == small_records
    assert big_peak < 1.5 * small_peak, (small_peak, big_peak)
