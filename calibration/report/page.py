"""The report's HTML page: one self-contained file, every figure embedded as a base64 PNG.

`encode_png` saves a figure without varying metadata (a rerun gives identical bytes) and returns it
base64-encoded; `section_html` renders one section (title, note, image, table) and `PAGE` wraps the
sections, both from the Jinja2 templates in templates/ (calibration/report/templating.py). `html_table` renders a frame, formatting floats to 3 decimals and undefined values as "–";
`interval_column`, `metrics_for_html` and `per_judge_for_html` reshape the report's frames into the
tables shown.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.text import Text

from calibration.evaluation.cv_predictions import METHOD_LABELS, REFERENCE
from calibration.report.templating import Markup, render_page, section
from rubric.files import atomic_path

DPI = 90
PAGE_WIDTH_PX = 1150  # the page's content width (max-width 1200px less its padding)
MIN_TEXT_PX = 10


def legible(fig: Figure, *, dpi: float = DPI, page_px: float = PAGE_WIDTH_PX, min_px: float = MIN_TEXT_PX) -> Figure:
    """Enlarge every text of `fig` (ticks, labels, titles, legends) that would be drawn smaller than
    `min_px` pixels once the image is shrunk to the page width."""
    scale = min(1.0, page_px / (fig.get_figwidth() * dpi))
    min_pt = min_px / (dpi / 72 * scale)
    for text in fig.findobj(Text):
        if text.get_text() and float(text.get_fontsize()) < min_pt:  # in points (typed float | str)
            text.set_fontsize(min_pt)
    return fig


def encode_png(fig: Figure, path: Path) -> str:
    """Save `fig` as PNG with no varying metadata (so reruns give identical bytes), every text legible at
    page width (`legible`); return base64."""
    legible(fig)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI, metadata={"Software": None}, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    return base64.b64encode(path.read_bytes()).decode("ascii")


def prose_html(text: str) -> str:
    """A library sentence as HTML: escaped, with its `code` spans (written for the terminal) as <code>."""
    import re

    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text, quote=False))


def _fmt(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return "–" if not np.isfinite(value) else f"{value:.3f}"
    return html.escape(str(value))


def interval_column(frame: pd.DataFrame, metric: str) -> pd.Series:
    return frame.apply(
        lambda r: (
            "–"
            if not np.isfinite(r[metric])
            else f"{r[metric]:.3f} [{r[metric + '_low']:.3f}, {r[metric + '_high']:.3f}]"
        ),
        axis=1,
    )


def html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>" for row in frame.itertuples(index=False)
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def metrics_for_html(table: pd.DataFrame) -> pd.DataFrame:
    wide = {}
    for method, part in table.groupby("method", sort=False):
        row = {"method": METHOD_LABELS.get(method, method), "n": int(part["n"].iloc[0])}
        for r in part.itertuples():
            row[r.metric] = "–" if not np.isfinite(r.value) else f"{r.value:.3f} [{r.low:.3f}, {r.high:.3f}]"
            if method != REFERENCE:
                row[f"p {r.metric}"] = r.p_value
        wide[method] = row
    return pd.DataFrame(list(wide.values()))


def per_judge_for_html(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per judge: n, then RMSE and Pearson of every method side by side."""
    wide = frame.pivot(index="judge_id", columns="method", values=["rmse", "pearson"])
    methods = list(dict.fromkeys(frame["method"]))
    judges = list(dict.fromkeys(frame["judge_id"]))
    out = pd.DataFrame(
        {
            "judge": judges,
            "n": frame.drop_duplicates("judge_id").set_index("judge_id").loc[judges, "n"].to_numpy(),
        }
    )
    for metric in ("rmse", "pearson"):
        for method in methods:
            out[f"{metric} {METHOD_LABELS.get(method, method)}"] = wide.loc[judges, (metric, method)].to_numpy()
    return out


class ReportPage:
    """The report's layout (templates/report.html.j2) as `PAGE.format(title=..., intro=..., sections=...)`,
    the call of the string template it replaced: title is escaped, intro and sections are HTML."""

    def format(self, *, title: str, intro: str, sections: str, extra_css: str = "") -> str:
        return render_page(
            "report.html.j2", target=title, intro=Markup(intro), sections=[sections], extra_css=Markup(extra_css)
        )


PAGE = ReportPage()


def section_html(title: str, note: str, image: tuple[str, str] | None, table: str = "") -> str:
    """One report section (templates/sections.html.j2 `report_section`): the title is escaped; note and
    table are HTML (the note may hold entities such as &ge; and <code>: escape data put into it)."""
    return str(section("report_section", title, Markup(note), image, Markup(table)))
