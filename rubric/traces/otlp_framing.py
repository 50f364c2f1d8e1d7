"""How an OTLP export file is laid out, read without loading it: gzip or not, lines of JSON or length-prefixed
messages (protobuf or JSON), each handed on as one ExportTraceServiceRequest in protobuf's JSON mapping.

- gzip (`.json.gz`, `.jsonl.gz`, `.pb.gz`, or any name: the file's first two bytes say) is decompressed as it
  is read, so memory stays flat.
- The Collector's file exporter with `format: proto` (or `compression:`) writes each message after its length,
  4 bytes big-endian; a message is protobuf (decoded with opentelemetry-proto, then to protobuf's JSON
  mapping) or JSON. Such a file starts with a zero byte (no message is 16 MiB), which no JSON file does, so it
  is recognised by its content, whatever its name.
- Anything else is JSON text: lines (one request each) or one document; otlp.py reads those.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rubric.errors import InputError

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SUFFIXES = (".json", ".jsonl", ".pb", ".json.gz", ".jsonl.gz", ".pb.gz")
"""The file names a folder's export is found by (a file or a glob is read whatever its name)."""


def is_export_name(name: str) -> bool:
    return name.endswith(SUFFIXES)


def open_export(path: Path, buffering: int) -> IO[bytes]:
    """The file's bytes, decompressed when it is gzip."""
    raw = open(path, "rb", buffering=buffering)  # noqa: SIM115  (returned, closed by the caller)
    magic = raw.read(2)  # not peek(): it copies the whole buffer (megabytes) to look at two bytes
    raw.seek(0)
    if magic != GZIP_MAGIC:
        return raw
    return io.BufferedReader(gzip.GzipFile(fileobj=raw, mode="rb"), buffer_size=buffering)


def is_length_prefixed(first: bytes) -> bool:
    """A file whose first byte is zero: messages each after their 4-byte length (the exporter's proto form)."""
    return first[:1] == b"\x00"


def gzip_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged or cut-short gzip file raises (caught to name the file)."""
    return (EOFError, zlib.error, gzip.BadGzipFile)


def prefixed_messages(fh: IO[bytes], path: Path, first: bytes = b"") -> Iterator[tuple[int, Any]]:
    """(message number from 1, the request as protobuf's JSON mapping) for each length-prefixed message;
    first: the file's bytes already read."""
    number = 0
    while True:
        head = first + fh.read(4 - len(first))
        first = b""
        if not head:
            return
        number += 1
        size = int.from_bytes(head.ljust(4, b"\0"), "big")
        body = fh.read(size) if len(head) == 4 else b""
        if len(head) < 4 or len(body) < size:
            raise InputError(
                f"message {number} is cut short ({len(body):,} of {size:,} bytes): the export stopped mid-write.",
                path=path,
                row=number,
                fix="export again, or cut the file before its last message (each message is its 4-byte length, "
                "then the message).",
            )
        yield number, _message(body, path, number)


def _message(body: bytes, path: Path, number: int) -> Any:
    import json

    if body[:1] in (b"{", b"["):
        try:
            return json.loads(body)
        except ValueError as exc:
            raise InputError(
                f"message {number} is not JSON ({str(exc).splitlines()[0]}).",
                path=path,
                row=number,
                fix="pass files= an export the collector's file exporter wrote, unchanged.",
            ) from None
    if body[:4] == ZSTD_MAGIC:
        raise InputError(
            f"message {number} is zstd-compressed (the file exporter's compression: zstd), which is not read.",
            path=path,
            row=number,
            fix="export without compression: (gzip the whole file instead if it must be small: .jsonl.gz is read).",
        )
    from google.protobuf.json_format import MessageToDict  # type: ignore[import-untyped]
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise InputError(
            f"message {number} is not an OTLP protobuf ExportTraceServiceRequest ({exc}).",
            path=path,
            row=number,
            fix="pass files= OTLP traces (JSON, or the file exporter's format: proto output, unchanged).",
        ) from None
    return MessageToDict(request)
