"""benchmarks/import_traces.py at a small size: it generates an export, imports it in a child process, gets
every conversation back, and prints (and saves) spans per second and peak memory."""

from __future__ import annotations

import json

from tests.benchmark_runs import run_benchmark


def test_the_import_benchmark_runs_small(tmp_path):
    printed = run_benchmark("import_traces.py", "--spans", "3000", "--files", "2", results=tmp_path, timeout=300)
    assert printed["spans"] >= 3000 and printed["bytes"] > 1000 * printed["spans"] // 2
    assert printed["conversations"] >= 50 and printed["turns"] > 2 * printed["conversations"]
    assert printed["llm_calls"] >= printed["turns"]  # a tool turn takes two calls
    assert printed["spans_per_s"] > 0 and 0 < printed["peak_rss_mb"] < 500
    saved = json.loads((tmp_path / "import_traces.json").read_text())
    assert saved["result"] == printed and saved["command"].startswith("python benchmarks/import_traces.py")
