"""compare.html: one self-contained page (figures embedded as base64 PNG) with the unified AUC table,
separation against corpus size for the methods that depend on it, and AUC per violation type."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from calibration.compare.metrics import METRICS  # noqa: E402
from calibration.compare.tables import per_type_table, unified_table  # noqa: E402
from calibration.report.page import encode_png, html_table, interval_column  # noqa: E402

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><link rel="icon" href="data:,">
<title>role-rubric compare</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}
h1 {{ font-size: 1.5em; }} h2 {{ font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }}
th, td {{ padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
img {{ max-width: 100%; }} .note {{ color: #555; font-size: 0.9em; }}
</style></head><body>
<h1>role-rubric compare: reference-based scorers and judges on one scale</h1>
<p class="note">{intro}</p>
{sections}
</body></html>
"""


def prepare_separation(table: pd.DataFrame) -> dict[str, dict[str, list[float]]]:
    """method -> sizes, separation and its interval (all violations), for methods whose scores change
    with the corpus size."""
    part = table[table["subset"] == "all"]
    out = {}
    for method, by in part.groupby("method", sort=False):
        if by["separation"].round(12).nunique() > 1:
            by = by.sort_values("size")
            out[method] = {
                k: by[c].tolist()
                for k, c in [
                    ("size", "size"),
                    ("sep", "separation"),
                    ("low", "separation_low"),
                    ("high", "separation_high"),
                ]
            }
    return out


def plot_separation(curves: dict[str, dict[str, list[float]]], ax=None):
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(6.5, 4))
    for method, c in curves.items():
        ax.errorbar(
            c["size"],
            c["sep"],
            yerr=[np.subtract(c["sep"], c["low"]), np.subtract(c["high"], c["sep"])],
            marker="o",
            capsize=3,
            label=method,
        )
    ax.axhline(0, color="#888", lw=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("references per role (n)")
    ax.set_ylabel("separation: mean adherent - mean violation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, ax


def plot_auc_by_type(table: pd.DataFrame, ax=None):
    part = table[(table["size"] == table["size"].max()) & (table["subset"] != "all")]
    methods = list(dict.fromkeys(part["method"]))
    types = sorted(part["subset"].unique())
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(9, 4))
    width = 0.8 / len(types)
    for j, kind in enumerate(types):
        rows = part[part["subset"] == kind].set_index("method").reindex(methods)
        x = np.arange(len(methods)) + (j - (len(types) - 1) / 2) * width
        err = [rows["auc"] - rows["auc_low"], rows["auc_high"] - rows["auc"]]
        ax.bar(x, rows["auc"], width, yerr=err, capsize=2, label=kind)
    ax.axhline(0.5, color="#888", lw=0.8, ls="--")
    ax.set_xticks(np.arange(len(methods)), methods, rotation=20, fontsize=8)
    ax.set_yticks(np.arange(0, 1.01, 0.2))
    ax.set_ylim(0, 1.2)  # room for the legend above the bars
    ax.set_ylabel("AUC (adherent vs this type)")
    ax.legend(fontsize=8, ncols=len(types), loc="upper center")
    fig.tight_layout()
    return fig, ax


def write_page(result: dict[str, Any], out: Path) -> Path:
    table = pd.DataFrame(result["results"])
    sections = []
    sections.append(
        (
            "Unified table (all violations)",
            "AUC with 95% bootstrap intervals over conversations at every corpus size; separation, macro F1 and kappa at the largest.",
            None,
            html_table(unified_table(table)),
        )
    )
    curves = prepare_separation(table)
    if curves:
        fig, _ = plot_separation(curves)
        sections.append(
            (
                "Separation against corpus size",
                "Methods fitted on the role's reference corpus; bars are 95% intervals.",
                (encode_png(fig, out / "separation_vs_n.png"), "separation against corpus size"),
                "",
            )
        )
    fig, _ = plot_auc_by_type(table)
    sections.append(
        (
            "AUC per violation type",
            "Adherent turns against each violation type alone, at the largest corpus size.",
            (encode_png(fig, out / "auc_by_type.png"), "AUC per violation type"),
            html_table(per_type_table(table)),
        )
    )
    detail = table.assign(
        **{m: interval_column(table, m) for m in ("auc", "ap", "separation", "macro_f1", "kappa")}
    )
    cols = ["method", "size", "subset", "n_adherent", "n_violation", *METRICS, "cut"]
    sections.append(
        (
            "Every metric",
            "Per method, corpus size and subset; cut = median of the out-of-fold cuts.",
            None,
            html_table(detail[cols]),
        )
    )
    parts = []
    for title, note, image, body in sections:
        img = f'<img alt="{html.escape(image[1])}" src="data:image/png;base64,{image[0]}">' if image else ""
        parts.append(f"<h2>{html.escape(title)}</h2><p class='note'>{html.escape(note)}</p>{img}{body}")
    unavailable = "; ".join(f"{k}: {v}" for k, v in result["unavailable"].items()) or "none"
    intro = (
        f"{result['data']['labelled']} labelled turns; positive class = adherent; {result['settings']['n_boot']} bootstrap resamples "
        f"(seed {result['settings']['seed']}); encoder {result['settings']['encoder']}. Unavailable: {unavailable.rstrip('.')}."
    )
    path = out / "compare.html"
    path.write_text(PAGE.format(intro=html.escape(intro), sections="\n".join(parts)))
    return path
