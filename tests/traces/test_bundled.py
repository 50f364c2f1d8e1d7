"""The bundled OTLP exports (data/traces/, written by data/traces/generate.py): what the generator writes today,
small, and read back by `import source=otel` as exactly the benchmark conversations they were made from."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from calibration.cli import main

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "data" / "traces"
BENCHMARK = ROOT / "data" / "role_adherence" / "conversations.jsonl"


def _generator():
    spec = importlib.util.spec_from_file_location("traces_generate", TRACES / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_exports_are_what_the_generator_writes(tmp_path):
    written = _generator().generate(tmp_path)
    assert [p.name for p in written] == ["genai.jsonl", "openinference.jsonl", "openllmetry.jsonl"]
    for path in written:
        assert path.read_bytes() == (TRACES / path.name).read_bytes(), "regenerate: python data/traces/generate.py"
    assert sorted(p.name for p in TRACES.glob("*.jsonl")) == [p.name for p in written]
    assert sum(p.stat().st_size for p in written) < 300_000


def test_importing_them_gives_back_the_benchmark_conversations(tmp_path):
    assert main(["import", "source=otel", f"files={TRACES}", f"out={tmp_path / 'imported'}"]) == 0
    lines = (tmp_path / "imported" / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    imported = {c["conversation_id"]: c for c in map(json.loads, lines)}
    benchmark = {c["conversation_id"]: c for c in map(json.loads, BENCHMARK.read_text(encoding="utf-8").splitlines())}
    assert len(imported) == 12
    assert {benchmark[cid]["role"] for cid in imported} == {
        "fintech_support",
        "maths_tutor",
        "telehealth_intake",
        "airline_booking",
    }
    for cid, got in imported.items():
        want = benchmark[cid]
        assert got["chatbot_role"] == want["chatbot_role"]
        assert [(t["user"], t["assistant"]) for t in got["turns"]] == [
            (t["user"], t["assistant"]) for t in want["turns"]
        ]
        assert all(len(t["trace_id"]) == 32 and len(t["span_id"]) == 16 for t in got["turns"])
        assert got["started_at"].startswith("2026-11-02T")
