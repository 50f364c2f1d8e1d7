"""The printed tables of `compare`: the unified AUC table (the paper's Table 8 layout) and AUC per
violation type, from the long results frame (one row per method, size and subset)."""

from __future__ import annotations

import pandas as pd


def unified_table(table: pd.DataFrame, subset: str = "all") -> pd.DataFrame:
    """Methods x sizes: 'AUC [low, high]' (the paper's Table 8 layout), plus separation, macro F1 and
    kappa at the largest size."""
    part = table[table["subset"] == subset]
    largest = part["size"].max()
    rows = []
    for method, by in part.groupby("method", sort=False):
        row = {"method": method, "family": by["family"].iloc[0]}
        for r in by.itertuples():
            row[f"AUC n={r.size}"] = f"{r.auc:.3f} [{r.auc_low:.3f}, {r.auc_high:.3f}]"
        top = by[by["size"] == largest].iloc[0]
        row[f"sep n={largest}"] = f"{top.separation:+.3g}"
        row[f"macro F1 n={largest}"] = f"{top.macro_f1:.3f}"
        row[f"kappa n={largest}"] = f"{top.kappa:.3f}"
        rows.append(row)
    return pd.DataFrame(rows)


def per_type_table(table: pd.DataFrame) -> pd.DataFrame:
    """Methods x violation types: AUC of adherent turns against that type alone, at the largest size."""
    part = table[(table["size"] == table["size"].max()) & (table["subset"] != "all")]
    wide = part.pivot_table(index="method", columns="subset", values="auc", sort=False)
    return wide.reset_index()
