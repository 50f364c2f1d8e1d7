"""The parts every page draws the same way: figures as base64 PNGs (`encode_png`, which saves without
varying metadata, so a rerun gives identical bytes, and with every text `legible` at page width) and tables
(`html_table` formats floats to 3 decimals and undefined values as "–"; `interval_column` writes a metric
with its interval; `prose_html` a library sentence with its `code` spans).
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
