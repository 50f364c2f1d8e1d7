"""The import's selection keys: service=, since=/until= (on a conversation's first span), sample= seed=,
role=, role_from=, conversation_key=; each checked on an export where it changes the answer."""

from __future__ import annotations

import pytest

from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from rubric.traces.selection import parse_time
from tests.traces.otlp_json import SYSTEM, conversation_spans, jsonl, request


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """Six conversations an hour apart (c0 at 11:06:40 UTC, c1 at 12:06:40, ...), c4 and c5 of another
    service; c3's spans carry the role and a team's own chat id as attributes."""
    lines = []
    for i in range(6):
        spans = conversation_spans(
            ("genai", "openinference", "openllmetry")[i % 3], 1 + 10 * i, f"c{i}", start=3600 * i
        )
        if i == 3:
            for s in spans:
                s["attributes"].append({"key": "app.persona", "value": {"stringValue": "You are a pirate."}})
        lines.append(request(spans, service="chatbot" if i < 4 else "other-bot", resource={"app.chat": f"chat-{i}"}))
    path = tmp_path_factory.mktemp("selection") / "export.jsonl"
    path.write_text(jsonl(lines))
    return path


def ids(path, **keys):
    selection = TraceSelection(**keys)
    source = OtlpFiles(path, only=selection.read_keys())
    return [r["conversation_id"] for r in assemble(source.spans(), selection, source={}, description="t").records]


def test_service_since_and_until(export):
    assert ids(export) == ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert ids(export, service="other-bot") == ["c4", "c5"]
    since, until = parse_time("2026-11-18T12:06:40Z", "since"), parse_time("2026-11-18T14:06:40", "until")
    assert ids(export, since=since, until=until) == ["c1", "c2"]  # until is exclusive; no zone: UTC


def test_sample_is_seeded_and_in_order_of_start(export):
    drawn = ids(export, sample=3, seed=7)
    assert len(drawn) == 3 and drawn == sorted(drawn) and drawn == ids(export, sample=3, seed=7)
    assert {tuple(ids(export, sample=3, seed=s)) for s in range(8)} != {tuple(drawn)}


def test_role_role_from_and_conversation_key(export):
    selection = TraceSelection(role="You are a helper.")
    records = assemble(OtlpFiles(export).spans(), selection, source={}, description="t").records
    assert {r["chatbot_role"] for r in records} == {"You are a helper."}
    selection = TraceSelection(role_from="app.persona", service="chatbot", since=parse_time("2026-11-18T14:00", "s"))
    records = assemble(OtlpFiles(export, only=selection.read_keys()).spans(), selection, source={}, description="t")
    assert [(r["conversation_id"], r["chatbot_role"]) for r in records.records] == [("c3", "You are a pirate.")]
    assert ids(export, conversation_key="app.chat") == [f"chat-{i}" for i in range(6)]  # a resource attribute
    plain = assemble(OtlpFiles(export).spans(), TraceSelection(), source={}, description="t").records
    assert {r["chatbot_role"] for r in plain} == {SYSTEM}
