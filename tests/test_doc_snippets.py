"""The code of the docs runs: every ```python block of docs/ is run after the README's worked example, as a
reader would paste it, or says why not; docs/reference/api.md and docs/getting-started.md carry their own
run blocks (the fake judge started as the README starts it, then the Python).

A run block is a ```python or ```bash block right after `<!-- run by tests/test_doc_snippets.py -->`
(`...; needs MODULE -->`: run where MODULE is installed, as with the `deepeval` extra); a ```text block after
`<!-- printed by the block above -->` is what the python block before it prints, exactly. The run itself is
part of the README's slow test (tests/test_readme.py `test_readme_blocks_run_verbatim`), which runs these
blocks in the README's scratch folder once its own blocks are done."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RUN_PAGES = [DOCS / "getting-started.md", DOCS / "reference" / "api.md"]
"""The pages whose run blocks run after the README's example, in this order."""
MARKER = re.compile(r"<!-- (?P<marker>[^>]*?) -->\n```(?P<lang>python|bash)\n(?P<code>.*?)```", re.S)
PYTHON = re.compile(r"(?:<!-- (?P<marker>[^>]*?) -->\n)?```python\n(?P<code>.*?)```", re.S)
PRINTED = re.compile(
    r"\A\n(?:(?!```)[^\n]*\n)*?<!-- printed by the block above -->\n```text\n(?P<printed>.*?)```", re.S
)
RUN = "run by tests/test_doc_snippets.py"
NOT_RUN = "not run by tests/test_doc_snippets.py: "


def run_blocks(page: Path) -> list[tuple[str, str, str | None, str | None]]:
    """(lang, code, module it needs or None, printed text or None) of the page's run blocks, in order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in MARKER.finditer(text):
        marker = m.group("marker")
        if not marker.startswith(RUN):
            continue
        needs = marker.split("; needs ", 1)[1].strip() if "; needs " in marker else None
        printed = PRINTED.match(text[m.end() :]) if m.group("lang") == "python" else None
        found.append((m.group("lang"), m.group("code"), needs, printed and printed.group("printed")))
    return found


def docs_script() -> str:
    """The run pages' blocks as one bash script; the n-th python block prints into doc_output_n.txt (a block
    whose module is missing writes `skipped: needs MODULE` there instead)."""
    parts, n = [], 0
    for page in RUN_PAGES:
        for lang, code, needs, _ in run_blocks(page):
            if lang == "bash":
                parts.append(code)
                continue
            run = f"python - > doc_output_{n}.txt <<'DOC_PY'\n{code}DOC_PY\n"
            if needs:
                run = (
                    f"if python -c 'import {needs}' 2>/dev/null; then\n{run}"
                    f"else echo 'skipped: needs {needs}' > doc_output_{n}.txt; fi\n"
                )
            parts.append(run)
            n += 1
    return "\n".join(parts)


def check_outputs(folder: Path) -> None:
    """Each run python block printed what its page shows (after the script ran in `folder`)."""
    n = 0
    for page in RUN_PAGES:
        for lang, _, needs, printed in run_blocks(page):
            if lang != "python":
                continue
            got = (folder / f"doc_output_{n}.txt").read_text()
            n += 1
            if printed is None or got.strip() == f"skipped: needs {needs}":
                continue
            assert got.strip() == printed.strip(), (
                f"{page.name}, python block {n - 1} prints:\n{got}\nthe page shows:\n{printed}"
            )


@pytest.mark.parametrize("page", sorted(DOCS.rglob("*.md")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_python_block_of_the_docs_is_run_or_says_why_not(page):
    for m in PYTHON.finditer(page.read_text(encoding="utf-8")):
        marker = m.group("marker") or ""
        ok = marker.startswith(RUN) or (marker.startswith(NOT_RUN) and len(marker) > len(NOT_RUN) + 15)
        assert ok, f"{page.relative_to(ROOT)}: a python block without a run/not-run marker:\n{m.group('code')[:200]}"


def test_the_api_page_shows_each_entry_point_run_and_printed():
    blocks = run_blocks(DOCS / "reference" / "api.md")
    code = "\n".join(code for lang, code, _, _ in blocks if lang == "python")
    for call in ("metric.measure(", "measure_many(", "estimate_release(", "RoleRubricMetric("):
        assert call in code, call
    assert sum(printed is not None for _, _, _, printed in blocks) >= 4
    bash = [code for lang, code, _, _ in blocks if lang == "bash"]
    assert "serve-fake-judge port=0 background=true" in bash[0] and "kill" in bash[-1]  # as the README does


def test_python_on_the_run_pages_reaches_the_judge_through_judge_url():
    """A fixed port (8765, the fake judge's default) is not where the README's judge listens."""
    for page in RUN_PAGES:
        for lang, code, _, _ in run_blocks(page):
            if lang == "python" and '"fake"' in code and "measure" in code:
                assert 'os.environ["JUDGE_URL"]' in code, page.name
    script = docs_script()
    assert "8765" not in script and "python - > doc_output_0.txt" in script
    assert "if python -c 'import deepeval'" in script  # a block that needs an extra runs only where it is
