"""mkdocs hook: every `<!-- results: NAME -->` in a page becomes the table benchmarks/results/NAME.json
holds (docs/results_tables.py), so the numbers on the results pages are always the ones a benchmark wrote."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # mkdocs loads this file by path

import results_tables  # noqa: E402


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (mkdocs' hook signature)
    return results_tables.render_markers(markdown)
