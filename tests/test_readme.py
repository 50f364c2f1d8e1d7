"""The README's command blocks: every ```bash block is run here or says why not, and the run ones run
verbatim (the worked example: fake judge, gather, cv, report, train, score, predict, evaluate), followed by
the docs' run blocks (tests/test_doc_snippets.py). A
```python block marked as run runs at its place in the example, and what it prints must equal the ```text
block right after it in the README, so the numbers the README shows are the numbers the code gives."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.test_doc_snippets import check_outputs, docs_script

ROOT = Path(__file__).resolve().parents[1]
BLOCK_RE = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```bash\n(?P<code>.*?)```", re.S)
# a run python block and the ```text block that shows what it prints
PY_RE = re.compile(
    r"<!-- run by tests/test_readme.py -->\n```python\n(?P<code>.*?)```\n(?:[^`]*?)```text\n(?P<printed>.*?)```", re.S
)
RUN_BLOCK_RE = re.compile(r"<!-- run by tests/test_readme.py -->\n```(?P<lang>bash|python)\n(?P<code>.*?)```", re.S)
RUN = "run by tests/test_readme.py"


def readme_blocks() -> list[tuple[str, str]]:
    """(marker, code) of every bash block of the README, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group("marker") or "", m.group("code")) for m in BLOCK_RE.finditer(text)]


def readme_script() -> str:
    """The run blocks in README order; the n-th run python block prints into api_output_n.txt."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    parts, n = [], 0
    for m in RUN_BLOCK_RE.finditer(text):
        if m.group("lang") == "bash":
            parts.append(m.group("code"))
        else:
            parts.append(f"python - > api_output_{n}.txt <<'README_PY'\n{m.group('code')}README_PY\n")
            n += 1
    return "\n".join(parts)


def test_every_run_python_block_shows_what_it_prints():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    runs = RUN_BLOCK_RE.findall(text)
    shown = PY_RE.findall(text)
    assert shown and len(shown) == sum(lang == "python" for lang, _ in runs)
    assert all(printed.strip() for _, printed in shown)


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
    script = readme_script()  # then the docs' run blocks, as a reader pastes them after the README's example
    docs = docs_script()
    # The harness (not the README) stops on the first failure and never leaves the fake judge running.
    harness = (
        "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true; "
        'kill $(grep -o "kill [0-9]*" judge.txt 2>/dev/null | cut -c6-) 2>/dev/null || true\' EXIT\n'
    )
    (tmp_path / "readme.sh").write_text(harness + script + "\n" + docs)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.setdefault("OMP_NUM_THREADS", "1")
    done = subprocess.run(["bash", "readme.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    log = done.stdout[-6000:] + done.stderr[-6000:]
    assert done.returncode == 0, log
    # the README trains the model cv's last line names ("train it: role-rubric train data=... [model=KIND] ...")
    named = re.search(r"train it: role-rubric train data=runs/tiny( model=\w+)? out=MODEL_DIR", done.stdout)
    assert named, log
    assert f"role-rubric train data=runs/tiny{named.group(1) or ''} out=runs/tiny/model" in script
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
    url = (tmp_path / "judge.txt").read_text()
    assert re.search(r"at http://127\.0\.0\.1:\d+/v1, running in the background as process \d+", url), url
    assert json.loads((runs / "model" / "model.json").read_text())["judge"]["model"] == "fake-judge"
    turns = pd.read_csv(runs / "scores_turns.csv")
    assert {"user", "assistant", "adherence"} <= set(turns.columns) and turns["assistant"].str.len().min() > 0
    assert 'id="turns"' in (runs / "report" / "report.html").read_text()  # the per-turn drill-down
    assert "Traceback" not in done.stderr, log
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for n, (_, printed) in enumerate(PY_RE.findall(text)):
        got = (tmp_path / f"api_output_{n}.txt").read_text()
        assert got.strip() == printed.strip(), f"README python block {n} prints:\n{got}\nthe README shows:\n{printed}"
    check_outputs(tmp_path)  # docs/getting-started.md and docs/reference/api.md (tests/test_doc_snippets.py)
