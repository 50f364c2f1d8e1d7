"""The report and compare pages from the Jinja2 templates: values from the data are escaped (a target id,
a section title), HTML the package built is kept, and the templates ship in the wheel."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from calibration.pages.templating import Markup, render_page
from calibration.report.page import PAGE, section_html
from calibration.report.sections import agreement_section
from tests.calibration.test_report import _predictions

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "<script>alert(1)</script>"


def test_the_page_escapes_ids_and_keeps_built_html() -> None:
    section = section_html(HOSTILE, "answer &ge; 3", ("x.png", "AAAA"), "<table></table>")
    page = render_page(
        "report.html.j2",
        target=HOSTILE,
        intro=Markup("<code>data</code>"),
        sections=[section],
        extra_css=Markup(".x { }\n"),
    )
    assert HOSTILE not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 4  # title, heading, section title, image alt
    assert "answer &ge; 3" in page and "<table></table>" in page and "<code>data</code>" in page
    assert ".x { }\n</style>" in page and page.endswith("</body></html>\n")


def test_plain_text_intro_is_escaped_on_the_compare_page() -> None:
    page = render_page("compare.html.j2", intro="a < b & c", sections=["<h2>one</h2>", "<h2>two</h2>"])
    assert '<p class="note">a &lt; b &amp; c</p>\n<h2>one</h2>\n<h2>two</h2>\n</body></html>\n' in page


def test_page_keeps_the_format_call_of_the_old_string_template() -> None:
    page = PAGE.format(title="a&b", intro="<i>x</i>", sections="<p>s</p>")
    assert "<title>role-rubric report: a&amp;b</title>" in page and "<i>x</i>" in page and "<p>s</p>" in page


def test_the_target_id_in_the_agreement_note_is_escaped(tmp_path: Path) -> None:
    _, html = agreement_section(
        _predictions(conversations=20), target=HOSTILE, folds=2, seed=0, n_boot=10, n_perm=10, out=tmp_path
    )
    assert HOSTILE not in html and "Out-of-fold predictions of &lt;script&gt;" in html


def test_the_templates_ship_as_package_data() -> None:
    tomllib = pytest.importorskip("tomllib")
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    templates = sorted((ROOT / "calibration" / "pages" / "templates").iterdir())
    assert templates
    for path in templates:
        rel = path.relative_to(ROOT / "calibration" / "pages").as_posix()
        assert any(fnmatch.fnmatch(rel, p) for p in patterns["calibration.pages"]), rel
