"""The docs agree with themselves and with the commands: exit statuses, pages the help names, the how-to
lists, the pipeline on the home page, and the columns a how-to describes against the table it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
HOW_TOS = sorted(p.name for p in (DOCS / "how-to").glob("*.md"))
EXIT_LIST = re.compile(r"Exit statuses: (.*?)(?:\n\n|\n- |\n\"\"\")", re.S)


def test_every_exit_status_list_has_the_failed_gate():
    lists = [
        (p, m.group(1))
        for p in [DOCS / "gen_reference.py", *DOCS.rglob("*.md")]
        for m in EXIT_LIST.finditer(p.read_text(encoding="utf-8"))
    ]
    assert len(lists) >= 3, lists  # gen_reference.py, commands.md (generated from it), getting-started.md
    for path, text in lists:
        statuses = re.findall(r"(?:^|, )(\d+) ", " ".join(text.split()))
        assert statuses == ["0", "1", "2", "3", "4", "70", "130"], (path.name, statuses)
        assert "gate" in text, path.name


def test_every_page_the_help_names_exists():
    named = []
    for path in [*(ROOT / "conf").rglob("*.yaml"), *(ROOT / "calibration").rglob("*.py")]:
        text = path.read_text(encoding="utf-8")
        named += [(path, m.group(0)) for m in re.finditer(r"docs/[\w/.-]+\.md", text)]
        if path.suffix == ".yaml":  # the comments `--help` prints: a page, not a README section that may move
            assert not re.search(r'README "[^"]+"', text), f"{path}: point at a docs/ page, not a README section"
    assert len(named) > 10
    for path, page in named:
        assert (ROOT / page).is_file(), f"{path.relative_to(ROOT)} names {page}, which does not exist"


@pytest.mark.parametrize("page", ["docs/index.md", "mkdocs.yml"])
def test_the_index_and_the_nav_list_every_how_to(page):
    text = (ROOT / page).read_text(encoding="utf-8")
    missing = [name for name in HOW_TOS if f"how-to/{name}" not in text]
    assert not missing, f"{page} does not list {missing}"


def test_the_readme_lists_every_how_to():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert not [name for name in HOW_TOS if f"docs/how-to/{name}" not in text]


@pytest.mark.parametrize("page", ["docs/index.md", "README.md"])
def test_the_pipeline_on_the_front_pages_has_every_stage(page):
    block = re.search(r"```\n(conversations\.jsonl.*?)```", (ROOT / page).read_text(encoding="utf-8"), re.S).group(1)
    for stage in ("gather", "train", "predict", "evaluate / report", "score", "estimate"):
        assert re.search(rf"─{re.escape(stage)}(\(\w+\))?─", block), (page, stage)


def test_the_columns_the_release_page_describes_are_the_printed_ones():
    text = (DOCS / "how-to" / "release-estimates.md").read_text(encoding="utf-8")
    described = [
        re.sub(r" \d+% CI", "", c)  # the level follows alpha
        for c in re.findall(r"^\| `([^`]+)` \|", text.split("## What it prints")[1].split("##")[0], re.M)
    ]
    block = re.search(r"<!-- printed by the block above -->\n```text\n(.*?)```", text, re.S).group(1)
    printed = next(line for line in block.splitlines() if line.startswith("scope "))  # after any warning line
    header = re.sub(r" \d+% CI", "", printed).split()
    assert described and all(c in " ".join(header) for c in described), (described, header)
    assert described == [
        c
        for c in ("scope", "quantity", "calibrator*", "humans", "ppi", "labelled/conv", "eff. labels")
        if c in described
    ]
