"""An OTLP export in any of the forms a collector (or a person) leaves it gives the same conversations: JSON
lines, gzipped (`.jsonl.gz`, `.json.gz`), the file exporter's length-prefixed messages (`format: proto`,
`.pb`, protobuf or JSON inside), gzipped too (`.pb.gz`), and whatever the file is named; gzip is read as a
stream (memory flat). A damaged one is one line naming the file and the message."""

from __future__ import annotations

import gzip
import json

import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from rubric.errors import InputError
from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from tests.traces.otlp_json import conversation_spans, jsonl, request


def requests(n: int = 3) -> list[dict]:
    return [request(conversation_spans(c, 1 + 10 * i, f"c{i}", start=100 * i)) for i, c in enumerate(
        ["genai", "openinference", "openllmetry"][:n])]  # fmt: skip


def prefixed(messages: list[bytes]) -> bytes:
    """What the file exporter writes with format: proto: each message after its length, 4 bytes big-endian."""
    return b"".join(len(m).to_bytes(4, "big") + m for m in messages)


def protobuf(r: dict) -> bytes:
    return ParseDict(r, ExportTraceServiceRequest()).SerializeToString()


FORMATS = {
    "export.jsonl.gz": lambda rs: gzip.compress(jsonl(rs).encode()),
    "export.json.gz": lambda rs: gzip.compress(json.dumps(rs[0], indent=1).encode()),  # one document
    "export.pb": lambda rs: prefixed([protobuf(r) for r in rs]),
    "export.pb.gz": lambda rs: gzip.compress(prefixed([protobuf(r) for r in rs])),
    "json-messages.pb": lambda rs: prefixed([json.dumps(r).encode() for r in rs]),
    "protobuf-named.jsonl": lambda rs: prefixed([protobuf(r) for r in rs]),
    "gzip-named.jsonl": lambda rs: gzip.compress(jsonl(rs).encode()),
}


def imported(path) -> list[dict]:
    source = OtlpFiles(path)
    out = assemble(source.spans(), TraceSelection(), source={"kind": "otel"}, description=source.description)
    return out.records


@pytest.mark.parametrize("name", list(FORMATS))
def test_every_form_of_an_export_gives_the_same_conversations(tmp_path, name):
    n = 1 if name == "export.json.gz" else 3
    rs = requests(n)
    plain = tmp_path / "plain.jsonl"
    plain.write_text(jsonl(rs))
    other = tmp_path / name
    other.write_bytes(FORMATS[name](rs))
    assert imported(other) == imported(plain) and len(imported(plain)) == n


def test_a_folder_finds_gzipped_and_protobuf_exports_beside_json(tmp_path):
    rs = requests(3)
    (tmp_path / "a.jsonl").write_text(jsonl(rs[:1]))
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(jsonl(rs[1:2]).encode()))
    (tmp_path / "c.pb.gz").write_bytes(gzip.compress(prefixed([protobuf(rs[2])])))
    (tmp_path / "notes.txt").write_text("not an export")
    source = OtlpFiles(tmp_path)
    assert [p.name for p in source.paths] == ["a.jsonl", "b.jsonl.gz", "c.pb.gz"]
    assert [r["conversation_id"] for r in imported(tmp_path)] == ["c0", "c1", "c2"]


def _cut(data: bytes) -> bytes:
    return data[: len(data) - 40]


BAD = {
    "gzip cut short": (
        "export.jsonl.gz",
        lambda rs: _cut(gzip.compress(jsonl(rs).encode())),
        r"export\.jsonl\.gz: not a whole gzip file \(.*\): cut short, or damaged\. Fix: copy the export again",
    ),
    "message cut short": (
        "export.pb",
        lambda rs: _cut(prefixed([protobuf(r) for r in rs])),
        r"export\.pb, row 3: message 3 is cut short \(\d[\d,]* of \d[\d,]* bytes\).*Fix: export again",
    ),
    "not protobuf": (
        "export.pb",
        lambda rs: prefixed([protobuf(rs[0]), b"\xff\xff\xff\xff garbage"]),
        r"export\.pb, row 2: message 2 is not an OTLP protobuf ExportTraceServiceRequest",
    ),
    "zstd messages": (
        "export.pb",
        lambda rs: prefixed([b"\x28\xb5\x2f\xfd" + b"\0" * 20]),
        r"export\.pb, row 1: message 1 is zstd-compressed .*Fix: export without compression",
    ),
    "a bare protobuf message": (
        "export.pb",
        lambda rs: protobuf(rs[0]),
        r"export\.pb, row \d+: not UTF-8 text .*each message after its 4-byte length",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_damaged_export_is_one_line_naming_the_file_and_message(tmp_path, case):
    name, make, message = BAD[case]
    path = tmp_path / name
    path.write_bytes(make(requests(3)))
    with pytest.raises(InputError, match=message) as caught:
        imported(path)
    assert "\n" not in str(caught.value) and "Fix: " in str(caught.value)
