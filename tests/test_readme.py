"""The README's command blocks: every ```bash block is run here or says why not, and the run ones run
verbatim (the worked example: fake judge, gather, cv, report, train, score, predict, evaluate)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK_RE = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```bash\n(?P<code>.*?)```", re.S)
RUN = "run by tests/test_readme.py"


def readme_blocks() -> list[tuple[str, str]]:
    """(marker, code) of every bash block of the README, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group("marker") or "", m.group("code")) for m in BLOCK_RE.finditer(text)]


def test_every_bash_block_is_run_or_says_why_not():
    blocks = readme_blocks()
    assert blocks, "no bash blocks found in README.md"
    for marker, code in blocks:
        ok = marker == RUN or (marker.startswith("not run by tests/test_readme.py: ") and len(marker) > 45)
        assert ok, f"README bash block without a run/not-run marker:\n{code[:200]}"
    run = "\n".join(code for marker, code in blocks if marker == RUN)
    for command in ("serve-fake-judge", "gather", "cv", "report", "train", "score", "predict", "evaluate"):
        assert f"role-rubric {command} " in run, command


@pytest.mark.slow
def test_readme_blocks_run_verbatim(tmp_path):
    """Minutes on 2 cores; CI runs it (.ci/run). Paths in the README are relative to the repository root,
    so the run happens in a scratch directory holding a link to data/."""
    (tmp_path / "data").symlink_to(ROOT / "data")
    script = "\n".join(code for marker, code in readme_blocks() if marker == RUN)
    # The harness (not the README) stops on the first failure and never leaves the fake judge running.
    harness = "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n"
    (tmp_path / "readme.sh").write_text(harness + script)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.setdefault("OMP_NUM_THREADS", "1")
    done = subprocess.run(
        ["bash", "readme.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
    )
    log = done.stdout[-6000:] + done.stderr[-6000:]
    assert done.returncode == 0, log
    runs = tmp_path / "runs" / "tiny"
    for name in (
        "llm.csv",
        "cv/predictions.csv",
        "report/report.html",
        "model/model.json",
        "scores.csv",
        "scores_turns.csv",
        "predictions.csv",
        "metrics.json",
    ):
        assert (runs / name).stat().st_size > 0, name
    assert "http://127.0.0.1:8765/v1" in done.stdout  # the server printed its base URL
    assert json.loads((runs / "model" / "model.json").read_text())["judge"]["model"] == "fake-judge"
    turns = pd.read_csv(runs / "scores_turns.csv")
    assert {"user", "assistant", "adherence"} <= set(turns.columns) and turns["assistant"].str.len().min() > 0
    assert 'id="turns"' in (runs / "report" / "report.html").read_text()  # the per-turn drill-down
    assert "Traceback" not in done.stderr, log
