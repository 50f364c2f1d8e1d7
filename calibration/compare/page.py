"""compare.html: one self-contained page (figures embedded as base64 PNG) with the unified AUC table,
separation against corpus size for the methods that depend on it, and AUC per violation type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from calibration.compare.metrics import METRICS  # noqa: E402
from calibration.compare.tables import per_type_table, unified_table  # noqa: E402
from calibration.pages.parts import encode_png, html_table, interval_column  # noqa: E402
from calibration.pages.templating import Markup, render_page, section  # noqa: E402
from rubric.files import atomic_write_text  # noqa: E402


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
    sections: list[tuple[str, str, Any, str]] = []  # (title, note, figure (png, alt) or None, html)
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
    detail = table.assign(**{m: interval_column(table, m) for m in ("auc", "ap", "separation", "macro_f1", "kappa")})
    cols = ["method", "size", "subset", "n_adherent", "n_violation", *METRICS, "cut"]
    sections.append(
        (
            "Every metric",
            "Per method, corpus size and subset; cut = median of the out-of-fold cuts.",
            None,
            html_table(detail[cols]),
        )
    )
    parts = [section("compare_section", title, note, image, Markup(body)) for title, note, image, body in sections]
    unavailable = "; ".join(f"{k}: {v}" for k, v in result["unavailable"].items()) or "none"
    intro = (
        f"{result['data']['labelled']} labelled turns; positive class = adherent; {result['settings']['n_boot']} bootstrap resamples "
        f"(seed {result['settings']['seed']}); encoder {result['settings']['encoder']}. Unavailable: {unavailable.rstrip('.')}."
    )
    return atomic_write_text(out / "compare.html", render_page("compare.html.j2", intro=intro, sections=parts))
