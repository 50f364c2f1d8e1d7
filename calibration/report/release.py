"""The report's "The release as a whole": the data's adherence rate by the reviewers, by the calibrator
(out of fold, uncorrected) and by the raw judge, and what a release estimate (`role-rubric estimate`) would
give on a release like this one with only n labelled conversations.

The cross-validated predictions are out of fold (each conversation predicted by models that never trained on
it), which is what an estimate needs; so labelling n conversations of this data at random and estimating
from them is simulated exactly: the width of the humans-only and the prediction-powered intervals, the labels
the latter is worth, and how often it holds the rate of all the labels.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from calibration.evaluation.adherence import item_adherence
from calibration.pages.parts import html_table
from calibration.release.inference import ClusterSample, classical_mean, effective_labels, ppi_mean
from calibration.report.page import section_html

N_VALUES = (10, 20, 40, 80)


def raw_adherence(ds, adheres_at: float) -> float:
    """The raw judge's mean P(target >= adheres_at) over the labelled turns of `ds`."""
    t = ds.target_index
    k = int(ds.n_options[t])
    above = ds.option_values()[t, :k] >= adheres_at
    return float(ds.probs[np.unique(ds.label_item), t, :k][:, above].sum(1).mean())


def release_summary(
    predictions: pd.DataFrame,
    raw_adherence: float,
    *,
    adheres_at: float,
    alpha: float = 0.1,
    seed: int = 0,
    draws: int = 200,
) -> dict:
    """The rates and, per n, the mean interval widths, effective labels and coverage over `draws` samples."""
    items = item_adherence(predictions, "calibrated", adheres_at=adheres_at)
    conv_codes, conv = pd.factorize(items["conversation_id"])
    m = np.bincount(conv_codes).astype(float)
    F = np.bincount(conv_codes, weights=items["adherence"].to_numpy())
    Y = np.bincount(conv_codes, weights=items["human"].to_numpy())
    truth = float(items["human"].mean())
    rng = np.random.default_rng(seed)
    by_n = []
    for n in N_VALUES:
        if n + 1 > len(conv):
            continue
        widths, cover, eff = [], [], []
        for _ in range(draws):
            picked = rng.choice(len(conv), size=n, replace=False)
            s = ClusterSample(A=F, m_all=m, Y=Y[picked], F=F[picked], m_lab=m[picked])
            humans, ppi = classical_mean(s, alpha=alpha), ppi_mean(s, alpha=alpha)
            widths.append((humans.width, ppi.width))
            cover.append(ppi.low <= truth <= ppi.high)
            eff.append(effective_labels(n, humans, ppi))
        w = np.mean(widths, axis=0)
        by_n.append(
            {
                "n": n,
                "humans_width": float(w[0]),
                "ppi_width": float(w[1]),
                "effective_labels": float(np.median(eff)),
                "ppi_coverage": float(np.mean(cover)),
            }
        )
    return {
        "adheres_at": adheres_at,
        "alpha": alpha,
        "draws": draws,
        "n_conversations": len(conv),
        "humans": truth,
        "calibrator": float(items["adherence"].mean()),
        "raw_judge": raw_adherence,
        "by_n": by_n,
    }


def release_section(summary: dict) -> str:
    rates = pd.DataFrame(
        [
            {"who": "reviewers (every label)", "adherence rate": summary["humans"]},
            {"who": "calibrator (out of fold, uncorrected)", "adherence rate": summary["calibrator"]},
            {"who": "raw judge", "adherence rate": summary["raw_judge"]},
        ]
    )
    plan = pd.DataFrame(summary["by_n"]).rename(
        columns={
            "n": "labelled conversations",
            "humans_width": "humans-only width",
            "ppi_width": "ppi width",
            "effective_labels": "ppi is worth (labels)",
            "ppi_coverage": "ppi coverage",
        }
    )
    pct = round(100 * (1 - summary["alpha"]))
    note = (
        f"Share of turns whose target answer is &ge; {summary['adheres_at']:g}, over the "
        f"{summary['n_conversations']} conversations of this data. A release is judged by "
        "<code>role-rubric estimate</code> from a random sample of labelled conversations: the calibrator's mean "
        "corrected by its error on that sample (prediction-powered inference), valid however wrong the calibrator "
        f"is. The second table simulates it here ({summary['draws']} random samples of n conversations, out-of-fold "
        f"predictions): mean width of the {pct}% intervals, the humans-only sample size with the same width, and "
        "how often the interval held the rate of every label."
    )
    return section_html("The release as a whole", note, None, html_table(rates) + html_table(plan))
