"""Report sections "What can be decided automatically" and "How many labels are enough".

Decisions: from the out-of-fold predictions of the calibrated model, each turn's adherence probability
is the mean over its (held-out) reviewers of the predicted P(answer >= adheres_at); `decide` itself averages
over every training judge, since a new turn has no reviewers yet. Per risk level, 20 times, half of the
conversations calibrate the threshold (calibration/release/decide.py) and the other half measure the share decided
and the disagreement on it.

Labels: reads the JSON of benchmarks/active_labelling.py (a simulation too long for the report itself).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from calibration.evaluation.metrics import jsonable
from calibration.evaluation.risk_control import RISK_LEVELS, validate
from calibration.pages.parts import encode_png, html_table
from calibration.report.page import section_html


def turn_table(rows: pd.DataFrame, adheres_at: float) -> pd.DataFrame:
    """Per turn: conversation_id, p_adheres (mean over its reviewers' predictions), n_adheres, n_reviewers.

    rows: one calibrated row per (turn, reviewer) with p_<value> columns and the answer (cv predictions).
    """
    above = [c for c in rows.columns if c.startswith("p_") and float(c[2:]) >= adheres_at]
    frame = rows.assign(p=rows[above].sum(axis=1), yes=(rows["answer"].astype(float) >= adheres_at).astype(int))
    grouped = frame.groupby(["conversation_id", "turn"], sort=True)
    return grouped.agg(p_adheres=("p", "mean"), n_adheres=("yes", "sum"), n_reviewers=("yes", "size")).reset_index()


def prepare_decisions(
    turns: pd.DataFrame,
    *,
    delta: float = 0.1,
    splits: int = 20,
    seed: int = 0,
    against: str = "majority",
    levels=RISK_LEVELS,
) -> pd.DataFrame:
    """One row per risk level: mean and minimum coverage, mean and 90% quantile of the realised
    disagreement on decided held-out turns, and the share of splits within the risk."""
    p = turns["p_adheres"].to_numpy(float)
    yes, n = turns["n_adheres"].to_numpy(int), turns["n_reviewers"].to_numpy(int)
    groups = turns["conversation_id"].astype(str).to_numpy()
    out = []
    for risk in levels:
        v = validate(p, yes, n, groups, risk=risk, delta=delta, against=against, splits=splits, seed=seed)
        out.append(
            {
                k: v[k]
                for k in (
                    "risk",
                    "coverage_mean",
                    "coverage_min",
                    "disagreement_mean",
                    "disagreement_q90",
                    "share_within_risk",
                )
            }
        )
    return pd.DataFrame(out)


def plot_decisions(table: pd.DataFrame, ax=None):
    """Risk (x) against the share of turns decided (y), with the realised disagreement's 90% quantile."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(5, 3.5))
    ax.plot(table["risk"], table["coverage_mean"], "o-", label="share decided (mean of splits)")
    ax.fill_between(table["risk"], table["coverage_min"], table["coverage_mean"], alpha=0.2, label="lowest split")
    ax.plot(table["risk"], table["disagreement_q90"], "s--", label="realised disagreement, 90% quantile")
    ax.plot(table["risk"], table["risk"], ":", color="grey", label="risk (the bound)")
    ax.set(xlabel="risk: allowed disagreement on decided turns", ylabel="share / rate", ylim=(0, 1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, ax


def prepare_labelling(path: str | Path) -> dict:
    """The summary of an active-labelling benchmark JSON (benchmarks/active_labelling.py)."""
    data = json.loads(Path(path).read_text())
    rows = [
        {
            "strategy": name,
            "label_saving": s["label_saving"],
            "share_to_reach_random_full_rmse": s["share_to_reach_random_full_rmse"],
            "rmse_at_start": s["rmse_mean"][0],
            "rmse_at_half": s["rmse_mean"][len(s["rmse_mean"]) // 2],
        }
        for name, s in data["strategies"].items()
    ]
    return {
        "table": pd.DataFrame(rows),
        "strategies": data["strategies"],
        "random_full_rmse": data["random_full_rmse"],
        "dataset": data["dataset"],
        "seeds": data["seeds"],
    }


def plot_labelling(labelling: dict, ax=None):
    """Test RMSE against the share of the pool labelled, one line per strategy (band: 95% CI over seeds)."""
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(5.5, 3.5))
    for name, s in labelling["strategies"].items():
        x, y, h = np.array(s["share"]), np.array(s["rmse_mean"]), np.array(s["rmse_ci95_half"])
        ax.plot(x, y, label=name)
        ax.fill_between(x, y - h, y + h, alpha=0.12)
    ax.axhline(labelling["random_full_rmse"], color="grey", ls=":", lw=1, label="random at 100%")
    ax.set(xlabel="share of the label pool used", ylabel="test RMSE of the target")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig, ax


def decision_sections(
    rows: pd.DataFrame, threshold: float | None, labelling_json: str | None, *, seed: int, out: Path
) -> tuple[dict, list[str]]:
    """Both sections for the report: what they add to metrics.json, and their HTML. "What can be decided"
    needs the adherence threshold (the calibrated model's out-of-fold `rows`); "How many labels" the JSON
    of benchmarks/active_labelling.py. Each writes its PNG into `out`."""
    results: dict = {}
    sections = []
    if threshold is not None:
        decisions = prepare_decisions(turn_table(rows, float(threshold)), seed=seed)
        results["decisions"] = jsonable(decisions.to_dict(orient="records"))
        sections.append(
            section_html(
                "What can be decided automatically",
                "Per turn: adheres, violates or escalate to a human (<code>role-rubric decide</code>). The "
                "threshold is set on a random half of the conversations so that, with probability 0.9, the "
                "disagreement with the reviewers' majority (answer &ge; "
                f"{float(threshold):g} adheres; a tie counts as a disagreement) on decided turns stays under "
                "the risk; the other half measures it (20 splits). Adherence probability: the mean of the "
                "out-of-fold predictions for the turn's own reviewers (decide averages every training judge).",
                ("decisions.png", encode_png(plot_decisions(decisions)[0], out / "decisions.png")),
                html_table(decisions.round(3)),
            )
        )
    if labelling_json:
        labelling = prepare_labelling(labelling_json)
        results["active_labelling"] = jsonable(labelling["table"].to_dict(orient="records"))
        sections.append(
            section_html(
                "How many labels are enough",
                f"Simulated active labelling ({html.escape(labelling['dataset'])}, "
                f"{len(labelling['seeds'])} seeds, benchmarks/active_labelling.py): from 10% of the label pool, "
                "5% more per round chosen by each strategy of <code>role-rubric suggest</code>; test RMSE of "
                "the target (band: 95% interval over seeds). Label saving: the share of labels not needed to "
                "reach random's RMSE with the whole pool.",
                ("active_labelling.png", encode_png(plot_labelling(labelling)[0], out / "active_labelling.png")),
                html_table(labelling["table"]),
            )
        )
    return results, sections
