"""OTLP's AnyValue both ways, in protobuf's JSON mapping: `any_value` reads one (otlp.py, for every attribute
that is not plain text), `encode_any_value` / `encode_attributes` write them (data/traces/generate.py and the
tests' exports: one encoder, so the bundled files and the tests' spell values alike)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any


def any_value(value: Mapping[str, Any]) -> Any:
    """One OTLP AnyValue in protobuf's JSON mapping -> str, int, float, bool, list, dict or bytes."""
    if "stringValue" in value:
        return value["stringValue"]
    if "intValue" in value:
        return int(value["intValue"])  # 64-bit integers are JSON text
    if "doubleValue" in value:
        return float(value["doubleValue"])  # "NaN", "Infinity" come as text
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return [any_value(v) for v in (value["arrayValue"] or {}).get("values", ())]
    if "kvlistValue" in value:
        return {kv["key"]: any_value(kv.get("value") or {}) for kv in (value["kvlistValue"] or {}).get("values") or ()}
    if "bytesValue" in value:
        return base64.b64decode(value["bytesValue"])
    return None


def encode_any_value(value: Any) -> dict[str, Any]:
    """A Python value -> one OTLP AnyValue in protobuf's JSON mapping (int64 as text, as the collector writes
    it); the inverse of `any_value` for str, int, float, bool, list and dict.

    >>> encode_any_value([1, "a", {"k": True}])
    {'arrayValue': {'values': [{'intValue': '1'}, {'stringValue': 'a'}, {'kvlistValue': {'values': [{'key': 'k', 'value': {'boolValue': True}}]}}]}}
    """
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [encode_any_value(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": encode_attributes(value)}}
    raise TypeError(f"no OTLP AnyValue for {type(value).__name__} {value!r}")


def encode_attributes(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """{key: value} -> OTLP's [{key, value: AnyValue}], in the mapping's order."""
    return [{"key": k, "value": encode_any_value(v)} for k, v in values.items()]
