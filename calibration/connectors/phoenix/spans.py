"""Phoenix's JSON of one span or one annotation (as its REST API answers them) -> `Span` / `Annotation`, as
OTLP carried the span: Phoenix moved the span kind out of the attributes (put back as
`openinference.span.kind`) and stored parsed a few attributes OpenInference sends as JSON text (put back as
JSON text: `otlp_attributes`). connectors/phoenix/source.py pages through the project with these.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from rubric.errors import InputError
from rubric.traces.spans import Annotation, Span, SpanEvent

JSON_TEXT_ATTRIBUTES = ("metadata", "llm.prompt_template.variables", "tool.parameters", "document.metadata")
"""Attributes OpenInference sends as JSON text and Phoenix stores parsed (its JSON_STRING_ATTRIBUTES): a key
ending in one of these, at a dot, holds JSON text in OTLP."""


def span_of(raw: Mapping[str, Any], project: str) -> Span:
    """One span as Phoenix's REST API gives it -> a `Span` as OTLP carried it (attributes unflattened where
    Phoenix parsed JSON text, the span kind put back); its resource names the project."""
    context: Mapping[str, Any] = raw["context"] if isinstance(raw.get("context"), dict) else {}
    trace_id, span_id = str(context.get("trace_id") or ""), str(context.get("span_id") or "")
    where = f"Phoenix span {span_id or raw.get('id')} (project {project!r})"
    if not trace_id or not span_id:
        raise InputError(f"{where} has no trace or span id.", fix="check url= (is it a Phoenix server?).")
    attributes = otlp_attributes(raw.get("attributes") or {})
    kind = raw.get("span_kind")
    if kind and kind != "UNKNOWN":  # Phoenix moved it out of the attributes; UNKNOWN is its "not given"
        attributes["openinference.span.kind"] = kind
    events = tuple(
        SpanEvent(str(e.get("name") or ""), _ns(e.get("timestamp"), where), dict(e.get("attributes") or {}))
        for e in raw.get("events") or ()
        if isinstance(e, dict)
    )
    return Span(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=raw.get("parent_id") or None,
        name=str(raw.get("name") or ""),
        start_ns=_ns(raw.get("start_time"), where),
        end_ns=_ns(raw.get("end_time"), where),
        attributes=attributes,
        resource={"openinference.project.name": project},
        events=events,
        where=where,
    )


def annotation_of(
    level: str, raw: Mapping[str, Any], trace_of: Mapping[str, str], *, reviewer: str, project: str
) -> Annotation:
    """One annotation as Phoenix's REST API gives it (level: span, trace or session) -> an `Annotation`; its score,
    else its label, is the value. trace_of: the trace of each span id (for span annotations)."""
    result: Mapping[str, Any] = raw["result"] if isinstance(raw.get("result"), dict) else {}
    value = result.get("score") if result.get("score") is not None else result.get("label")
    target = str(raw.get(f"{level}_id") or "")
    return Annotation(
        name=str(raw.get("name") or ""),
        value=value,
        reviewer=reviewer,
        trace_id=trace_of.get(target) if level == "span" else target if level == "trace" else None,
        span_id=target if level == "span" else None,
        session_id=target if level == "session" else None,
        where=f"Phoenix {level} annotation {raw.get('id')} on {level} {target} (project {project!r})",
    )


def otlp_attributes(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Phoenix's flattened attributes as OTLP carried them: keys under a JSON-text attribute (`metadata.user`)
    joined back into that attribute's JSON text (`metadata` = '{"user": ...}'), the rest as they are.

    >>> otlp_attributes({"session.id": "c1", "metadata.user": "u7", "metadata.tags.0.x": 1})
    {'session.id': 'c1', 'metadata': '{"user": "u7", "tags": [{"x": 1}]}'}
    """
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for key, value in attributes.items():
        head, rest = _json_text_split(key)
        if head is None:
            out[key] = value
        else:
            tree = nested.setdefault(head, {})
            parts = rest.split(".") if rest else []
            for part in parts[:-1]:
                tree = tree.setdefault(part, {})
            if parts:
                tree[parts[-1]] = value
            out.setdefault(head, None)  # keeps the attribute's place among the keys
    for head, tree in nested.items():
        out[head] = json.dumps(_lists(tree), ensure_ascii=False)
    return out


def _json_text_split(key: str) -> tuple[str | None, str]:
    """('metadata', 'user') for 'metadata.user'; (None, '') for a key under no JSON-text attribute."""
    for name in JSON_TEXT_ATTRIBUTES:
        at = key.find(name)
        while at >= 0:
            end = at + len(name)
            if (at == 0 or key[at - 1] == ".") and (end == len(key) or key[end] == "."):
                return key[:end], key[end + 1 :]
            at = key.find(name, at + 1)
    return None, ""


def _lists(tree: Any) -> Any:
    """Mappings whose keys are 0..n-1 back into lists (Phoenix flattened lists of objects by index)."""
    if not isinstance(tree, dict):
        return tree
    items = {k: _lists(v) for k, v in tree.items()}
    if items and all(k.isdigit() for k in items) and sorted(map(int, items)) == list(range(len(items))):
        return [items[str(i)] for i in range(len(items))]
    return items


def _ns(value: Any, where: str) -> int:
    """An ISO 8601 time as Phoenix writes it -> nanoseconds since the epoch (Phoenix keeps microseconds)."""
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{where} has no readable time ({value!r}).", fix="check url= (a Phoenix server).") from None
    moment = moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
