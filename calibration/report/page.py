"""The report's HTML page: one self-contained file, every figure embedded as a base64 PNG.

`section_html` renders one section (title, note, image, table) and `PAGE` wraps the sections, both from the
Jinja2 templates of calibration/pages/ (calibration/pages/templating.py); `metrics_for_html` and
`per_judge_for_html` reshape the report's frames into the tables shown. The figures and tables themselves
are drawn with calibration/pages/parts.py, shared with the other pages.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibration.evaluation.cv_predictions import METHOD_LABELS, REFERENCE
from calibration.pages.templating import Markup, render_page, section


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
