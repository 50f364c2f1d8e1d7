"""Properties of the rebuild: the conversations do not depend on the order spans come in (shuffled within
and across lines), on how the export is split into files, nor on how much history each call repeats (all of
it, a window, none), in any convention."""

from __future__ import annotations

import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from tests.traces.otlp_json import CONVENTIONS, call_attributes, request, span

SYSTEM = "You are a travel agent for Rail Co: trains only."

conversation = st.lists(  # exchanges: (with a tool call first?)
    st.booleans(), min_size=1, max_size=4
)


def calls_of(cid: str, tools: list[bool], history: str) -> list[tuple[list[dict], list[dict]]]:
    """The LLM calls of one conversation; history: "all" (every call repeats it), "window" (the last two
    messages), "none" (only the new messages)."""
    out = []
    messages: list[dict] = []
    for i, tool in enumerate(tools):
        user = {"role": "user", "content": f"{cid} question {i}"}
        new = [user]
        if tool:
            asks = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": "timetable", "arguments": f'{{"day": {i}}}'}}
            ]}  # fmt: skip
            out.append((_sent(messages, new, history), [asks]))
            messages += new
            new = [asks, {"role": "tool", "tool_call_id": f"call_{i}", "content": f"trains on day {i}"}]
        reply = {"role": "assistant", "content": f"{cid} answer {i}"}
        out.append((_sent(messages, new, history), [reply]))
        messages += [*new, reply]
    return out


def _sent(messages: list[dict], new: list[dict], history: str) -> list[dict]:
    past = messages if history == "all" else messages[-2:] if history == "window" else []
    return [{"role": "system", "content": SYSTEM}, *past, *new]


def export_spans(conversations: dict[str, tuple[str, list[bool]]], history: str) -> list[dict]:
    spans = []
    sid = 1
    for n, (cid, (convention, tools)) in enumerate(sorted(conversations.items())):
        for k, (inputs, outputs) in enumerate(calls_of(cid, tools, history)):
            attrs, events = call_attributes(convention, inputs, outputs, cid)
            spans.append(span(100 * n + k + 1, sid, 1000 * n + 10 * k, attrs, events=events))
            spans.append(span(100 * n + k + 1, sid + 1, 1000 * n + 10 * k, {"db.system.name": "redis"}, name="GET"))
            sid += 2
    return spans


def write(folder, spans: list[dict], files: int, per_line: int, rng: random.Random) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines: list[list[str]] = [[] for _ in range(files)]
    for start in range(0, len(spans), per_line):
        lines[rng.randrange(files)].append(json.dumps(request(spans[start : start + per_line])) + "\n")
    for i, part in enumerate(lines):
        (folder / f"part-{i}.jsonl").write_text("".join(part))


def records(folder) -> list[dict]:
    source = OtlpFiles(folder, only=TraceSelection().read_keys())
    got = assemble(source.spans(), TraceSelection(), source={"kind": "otel"}, description="test").records
    return [{k: v for k, v in r.items() if k != "source"} for r in got]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    chats=st.dictionaries(
        st.sampled_from([f"conv-{i}" for i in range(6)]),
        st.tuples(st.sampled_from(CONVENTIONS), conversation),
        min_size=1,
        max_size=4,
    ),
    history=st.sampled_from(["window", "none"]),
    seed=st.integers(0, 2**16),
    files=st.integers(1, 3),
    per_line=st.integers(1, 7),
)
def test_order_files_and_history_do_not_change_the_conversations(
    tmp_path_factory, chats, history, seed, files, per_line
):
    root = tmp_path_factory.mktemp("prop")
    rng = random.Random(seed)
    canonical = export_spans(chats, "all")
    write(root / "canonical", canonical, 1, len(canonical), rng)
    expected = records(root / "canonical")
    assert [r["conversation_id"] for r in expected] == sorted(chats)
    for r in expected:
        tools = chats[r["conversation_id"]][1]
        assert [t["user"] for t in r["turns"]] == [f"{r['conversation_id']} question {i}" for i in range(len(tools))]
        assert [bool(t.get("tools")) for t in r["turns"]] == tools

    shuffled = list(canonical)
    rng.shuffle(shuffled)
    write(root / "shuffled", shuffled, files, per_line, rng)
    assert records(root / "shuffled") == expected

    other = export_spans(chats, history)
    rng.shuffle(other)
    write(root / "history", other, files, per_line, rng)
    assert records(root / "history") == expected
