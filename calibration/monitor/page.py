"""OUT/monitor.html and OUT/monitor.png: per row (all conversations, then each role), the calibrated rate over the
windows with its 90% band, the reference period's rate, the windows with reviewers' labels and their PPI
interval, shift markers (the check fired) and the alarms. Rewritten from windows.jsonl and alarms.jsonl on every
run; one self-contained page (the figure embedded), from the report templates."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["plot_monitor", "prepare_monitor", "write_page"]

ALL = "all"


def prepare_monitor(windows: list[dict], alarms: list[dict], reference: dict | None) -> dict:
    """row -> arrays over the windows: x (window position), rate, low, high, ppi (estimate, low, high or NaN),
    shift (bool: the check fired), alarm (bool); plus the window ids and the reference rate per row."""
    ids = [w["window"] for w in windows]
    rows = list(dict.fromkeys(r for w in windows for r in w["rows"]))
    rows = [ALL, *sorted(r for r in rows if r != ALL)] if ALL in rows else sorted(rows)
    alarmed = {(a["window"], a["role"]) for a in alarms}
    out = {}
    for row in rows:
        series = {k: np.full(len(ids), np.nan) for k in ("rate", "low", "high", "ppi", "ppi_low", "ppi_high")}
        series["shift"] = np.zeros(len(ids), bool)
        series["alarm"] = np.zeros(len(ids), bool)
        for i, w in enumerate(windows):
            got = w["rows"].get(row)
            if not got:
                continue
            series["rate"][i] = got["rate"]
            if got.get("band"):
                series["low"][i], series["high"][i] = got["band"]
            ppi = (got.get("reviewers") or {}).get("ppi")
            if ppi:
                series["ppi"][i], series["ppi_low"][i], series["ppi_high"][i] = ppi["estimate"], ppi["low"], ppi["high"]
            series["shift"][i] = any(c["check"] == "shift" and c["fired"] for c in got.get("checks", []))
            series["alarm"][i] = (w["window"], row) in alarmed
        ref = (reference or {}).get(row)
        out[row] = {**series, "reference": ref["A"] / ref["m"] if ref and ref["m"] else None}
    return {"windows": ids, "rows": out}


def plot_monitor(prepared: dict, ax: Axes | None = None) -> tuple[Figure, np.ndarray]:
    """One panel per row, sharing the window axis; 1440x900-readable for 52 windows and 6 roles + all."""
    rows = prepared["rows"]
    n = max(len(rows), 1)
    fig, axes = plt.subplots(n, 1, figsize=(14, 1.6 * n + 1), sharex=True, squeeze=False)
    x = np.arange(len(prepared["windows"]))
    for ax_, (row, s) in zip(axes[:, 0], rows.items(), strict=True):
        ax_.fill_between(x, s["low"], s["high"], color="#9ecae1", alpha=0.6, lw=0)
        ax_.plot(x, s["rate"], color="#08519c", marker="o", ms=3, lw=1.2)
        if s["reference"] is not None:
            ax_.axhline(s["reference"], color="#555", ls="--", lw=0.8)
        labelled = ~np.isnan(s["ppi"])
        if labelled.any():
            err = [s["ppi"][labelled] - s["ppi_low"][labelled], s["ppi_high"][labelled] - s["ppi"][labelled]]
            ax_.errorbar(
                x[labelled],
                s["ppi"][labelled],
                yerr=err,
                fmt="D",
                color="#31a354",
                ms=4,
                capsize=2,
            )
        for i in np.flatnonzero(s["shift"]):
            ax_.axvspan(i - 0.5, i + 0.5, color="#fdae6b", alpha=0.35, lw=0)
        if s["alarm"].any():
            ax_.plot(x[s["alarm"]], s["rate"][s["alarm"]], "v", color="#d62728", ms=9)
        ax_.set_ylabel(row if len(row) <= 18 else row[:17] + "…", fontsize=9)
        seen = np.concatenate([s[k][~np.isnan(s[k])] for k in ("low", "rate", "high", "ppi_low", "ppi_high")])
        if len(seen):  # the rows' own range: a drop of a few points must show
            ax_.set_ylim(max(0.0, seen.min() - 0.05), min(1.0, seen.max() + 0.05))
        ax_.grid(axis="y", color="#eee")
    axes[0, 0].legend(handles=_legend(), fontsize=8, ncols=6, loc="lower left")
    step = max(1, len(x) // 13)
    axes[-1, 0].set_xticks(x[::step], [w[:10] for w in prepared["windows"]][::step], rotation=30, fontsize=8)
    fig.tight_layout()
    return fig, axes


def _legend() -> list:
    """Every mark of the figure, whichever panels have them."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [
        Patch(color="#9ecae1", label="90% band"),
        Line2D([], [], color="#08519c", marker="o", ms=3, label="calibrated rate"),
        Line2D([], [], color="#555", ls="--", label="reference"),
        Line2D([], [], color="#31a354", marker="D", ls="", label="reviewers (PPI)"),
        Patch(color="#fdae6b", alpha=0.5, label="shift check fired"),
        Line2D([], [], color="#d62728", marker="v", ls="", ms=8, label="alarm"),
    ]


def write_page(out: Path, windows: list[dict], alarms: list[dict], reference: dict | None) -> Path:
    """monitor.html (and monitor.png beside it) in OUT."""
    import pandas as pd

    from calibration.pages.parts import encode_png, html_table
    from calibration.pages.templating import Markup, render_page, section
    from rubric.files import atomic_write_text

    prepared = prepare_monitor(windows, alarms, reference)
    fig, _ = plot_monitor(prepared)
    image = (encode_png(fig, out / "monitor.png"), "calibrated adherence per role over the windows")
    note = (
        "Blue: the calibrated rate and its 90% band; dashed: the reference period's rate; green: the reviewers' "
        "rate (PPI interval) in windows with labels; orange: the shift check fired; red: an alarm."
    )
    table = pd.DataFrame(
        [
            {k: a.get(k) for k in ("window", "role", "check", "question", "e_value", "p_value", "level", "label", "of")}
            for a in alarms
        ]
    )
    parts = [section("compare_section", "Adherence over time", note, image, Markup(""))]
    if len(table):
        parts.append(
            section("compare_section", "Alarms", "What to do: label, then `estimate`.", None, Markup(html_table(table)))
        )
    intro = f"{len(windows)} windows, {len(prepared['rows'])} rows, {len(alarms)} alarms."
    return atomic_write_text(out / "monitor.html", render_page("monitor.html.j2", intro=intro, sections=parts))
