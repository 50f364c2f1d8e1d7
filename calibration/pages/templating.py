"""The report and compare pages from Jinja2 templates (calibration/pages/templates/, shipped as package
data): one base layout for both pages and one macro per kind of section.

Autoescape is on: every value put into a page is escaped unless it is `Markup`, i.e. HTML this package
built itself (a table, a figure's note with its entities), so an id or a file name from the data can
never inject markup.
"""

from __future__ import annotations

import functools
from typing import Any

import jinja2
from markupsafe import Markup, escape

__all__ = ["Markup", "escape", "render_page", "section"]


@functools.cache
def environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("calibration.pages", "templates"),
        autoescape=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,  # a missing value is an error, never an empty spot in a page
    )


def render_page(template: str, *, sections: list[Any], intro: Any, **context: Any) -> str:
    """A whole page: `template` (report.html.j2 or compare.html.j2) around `sections`, joined by newlines.
    A section given as str is HTML built here (a macro's output); intro is escaped unless it is Markup."""
    return environment().get_template(template).render(sections=[Markup(s) for s in sections], intro=intro, **context)


def section(macro: str, *args: Any) -> Markup:
    """One section through its macro in sections.html.j2 (report_section, compare_section)."""
    return getattr(environment().get_template("sections.html.j2").module, macro)(*args)
