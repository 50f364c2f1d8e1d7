"""The README and the docs site: short, product-only, generated parts in sync, numbers from benchmarks.

`mkdocs build --strict` itself runs in .ci/run (it needs the `[docs]` extra)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))

import results_tables  # noqa: E402

# Development history belongs in CHANGELOG.md, not in the product docs.
HISTORY = re.compile(r"\bsessions?\b|previous (?:commit|release)s?|\bcommit hash", re.I)
CODE = re.compile(r"`[^`]*`|\b\w+(?:\.\w+)+\b")
"""Code spans and dotted names (`using_session()`, session.id): the product's names, not history."""
# 7-40 hex characters with at least one digit and one letter: what a commit hash looks like
HASH = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def product_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_readme_is_a_short_front_door():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail to docs/ (at most 250)"


@pytest.mark.parametrize("page", product_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_product_pages_carry_no_development_history(page):
    text = page.read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        word = HISTORY.search(CODE.sub("", line))
        assert word is None, f"{page.relative_to(ROOT)}:{n}: {word.group(0)!r} is history: CHANGELOG.md"
        sha = HASH.search(line)
        assert sha is None, f"{page.relative_to(ROOT)}:{n}: {sha.group(0)!r} looks like a commit hash"


def test_the_history_check_catches_what_it_should():
    assert HISTORY.search("as in the previous commit") and HISTORY.search("this Session's run")
    assert HASH.search("merged in 4d9206f") and HASH.search("a1b2c3d4e5f6a7b8c9d0a1b2c3d4e5f6a7b8c9d0")
    assert not HASH.search("1,623 rows, 0.7345, 2026-11-26, deadbeefs and 12345678")
    assert not HISTORY.search(CODE.sub("", "named by session.id or `using_session(...)`"))
    assert HISTORY.search(CODE.sub("", "written in this session, see session.id"))


def test_ci_runs_the_readme_commands_as_written():
    """.ci/run reads the README's two set-up lines from README.md and runs them (eval), so they cannot drift."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for comment, variable in (
        ("# 1. install and run the main job", "INSTALL_AND_RUN"),
        ("# 2. run the tests", "TEST_COMMAND"),
    ):
        line = re.search(rf"^{re.escape(comment)}.*\n(.+)$", readme, re.M)
        assert line is not None, f"README.md has no line after {comment!r}"
        heading = re.search(rf'^{variable}=\$\(readme_line "(.+)"\)$', ci, re.M)
        assert heading is not None and comment[2:] in heading.group(1), f".ci/run must read {variable} from the README"
        assert f'eval "${variable}"' in ci, f".ci/run must run {variable}"
    assert "python -m pytest" in re.search(r"# 2\. run the tests\n(.+)\n", readme).group(1)


def test_generated_reference_and_readme_results_are_in_sync():
    done = subprocess.run(
        [sys.executable, str(DOCS / "gen_reference.py"), "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr  # names the file and `python docs/gen_reference.py`


def test_every_command_and_key_is_in_the_reference():
    from calibration.cli import COMMANDS

    page = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    for command in COMMANDS:
        assert f"## `{command}`" in page and f"usage: role-rubric {command} " in page, command
    assert "train.ensemble=" in page and "judge.concurrency=" in page and "threshold=0.5" in page


def test_every_results_marker_renders_from_a_committed_benchmark_file():
    markers = [
        (page, m.group("name"))
        for page in DOCS.rglob("*.md")
        for m in results_tables.MARKER.finditer(page.read_text(encoding="utf-8"))
    ]
    assert markers, "no results tables in docs/"
    for page, name in markers:
        record = results_tables.load(name)
        assert record is not None, f"{page.name}: benchmarks/results/{name}.json is not committed"
        out = results_tables.render(name)
        assert f"`{record['command']}`" in out and record["date"] in out and "|---|" in out, name


def test_results_render_the_numbers_the_json_holds(tmp_path):
    record = {
        "benchmark": "train_speed",
        "command": "python benchmarks/train_speed.py --repeats 1",
        "date": "2030-01-02 03:04 UTC",
        "wall_s": 12.5,
        "load_avg_1m_at_end": 1.5,
        "machine": {"cores": 2, "cpu_model": "Some CPU", "torch": "2.13.0"},
        "result": {
            "config": {
                "hidden": [25, 25],
                "batch_size": 64,
                "steps": [200, 300],
                "batched_models": 40,
                "workers": 2,
                "repeats": 1,
            },
            "one_at_a_time_models_per_s": 0.789,
            "batched_models_per_s": 3.456,
            "speedup": 4.38,
            "batched_2_workers_models_per_s": 5.321,
            "speedup_2_workers": 6.74,
            "per_model_step_ms": {"one_at_a_time": 2.55, "batched_forward_backward": 0.42, "batched_adam": 0.107},
        },
    }
    (tmp_path / "train_speed.json").write_text(json.dumps(record))
    out = results_tables.render_markers("a\n<!-- results: train_speed -->\nb", tmp_path)
    assert "| 3.46 | **4.4×** |" in out and "**6.7×**" in out and "Some CPU" in out and "2030-01-02" in out
    assert "Not measured" in results_tables.render("shift", tmp_path)  # a missing file is said, not filled


def test_score_columns_are_all_documented():
    from calibration.api import AdherenceResult, TurnResult
    from calibration.api.frames import results_frames

    dist = {"overall": {1.0: 0.2, 4.0: 0.8}}
    turn = TurnResult(0, dist, {"overall": 3.4}, 0.8, True, 0.8, dist, reason="ok")
    conv, turns = results_frames(
        [AdherenceResult("c", 0.8, True, 0.5, False, "continuous", True, "overall", 3.0, "all", [turn])]
    )
    page = (DOCS / "reference" / "files.md").read_text(encoding="utf-8")
    for column in [*conv.columns, *turns.columns]:
        documented = re.sub(r"_overall$", "_<question>", column)
        assert f"`{documented}`" in page, f"score's column {column!r} is not in docs/reference/files.md"


def test_readme_links_point_at_real_files_or_pages_of_the_site():
    """A link into docs/ must name a page of mkdocs.yml's nav (mkdocs build --strict then checks the page
    exists); any other relative link must name a file of the checkout."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", text, re.M))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme):
        if target.startswith(("http://", "https://")):
            continue
        if target.startswith("docs/") and target.endswith(".md"):
            assert target[len("docs/") :] in pages, f"README links to {target}, not a page of mkdocs.yml's nav"
        else:
            assert (ROOT / target).exists(), f"README links to {target}, which does not exist"
