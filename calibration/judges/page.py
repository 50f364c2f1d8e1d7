"""compare-judges.html: one self-contained page (the figure embedded as base64 PNG): the recommendation per
question, each judge's calibrated agreement with intervals, the label multiplier, kappa beside the
reviewers' own with the base rate, the alternative annotator test, the cost and the turns to open first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from calibration.judges.page_alpha import alpha_sections  # noqa: E402
from calibration.pages.parts import encode_png, html_table  # noqa: E402
from calibration.pages.templating import Markup, escape, render_page, section  # noqa: E402
from rubric.files import atomic_write_text  # noqa: E402

TOP_DISAGREEMENTS = 20


def _ci(value: float | None, low: float, high: float, digits: int = 3) -> str:
    if value is None or not np.isfinite(value):
        return "–"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def recommendation_table(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for qid, block in result["questions"].items():
        r = block["recommendation"]
        confirm = block["held_out_confirmation"]
        rows.append(
            {
                "question": qid,
                "pick": r["pick"],
                "runner-up": r["runner_up"],
                "RMSE pick - runner-up": _ci(r["rmse_difference"], r["rmse_difference_low"], r["rmse_difference_high"]),
                "within noise": "yes" if r["within_noise"] else "no",
                "p_best": f"{r['p_best'][r['pick']]:.2f}",
                "held-out half": "–" if confirm is None else ("confirmed" if confirm["confirmed"] else "not confirmed"),
                "runner-up's labels": "{multiplier:.2f}x [{low:.2f}, {high:.2f}]".format(
                    **block["judges"][r["runner_up"]]["label_multiplier"]
                ),
            }
        )
    return pd.DataFrame(rows)


def agreement_table(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for qid, block in result["questions"].items():
        for name, j in block["judges"].items():
            row = {
                "question": qid,
                "judge": name,
                "RMSE": _ci(j["rmse"], j["rmse_low"], j["rmse_high"]),
                "log loss": _ci(j["nll"], j["nll_low"], j["nll_high"]),
                "kappa": _ci(j["kappa"], j["kappa_low"], j["kappa_high"]),
                "raw judge RMSE": "–" if j["raw_rmse"] is None else f"{j['raw_rmse']:.3f}",
                "R2 (conversation totals)": f"{j['r2']:.3f}",
                "labels vs pick": "{multiplier:.2f}x".format(**j["label_multiplier"]),
            }
            if "labels_for_width" in j:
                row["labels for width (ppi / humans)"] = "{ppi} / {humans}".format(**j["labels_for_width"])
            rows.append(row)
    return pd.DataFrame(rows)


def kappa_table(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for qid, block in result["questions"].items():
        rev = block["reviewers_kappa"]
        base = block["base_rate"]
        row = {
            "question": qid,
            "commonest answer share": f"{base['majority']:.2f}",
            "chance exact agreement": f"{base['chance_exact']:.2f}",
            "reviewer vs reviewer kappa": "–" if rev is None else _ci(rev["kappa"], rev["low"], rev["high"]),
            "reviewer vs reviewer exact": "–" if rev is None else f"{rev['exact']:.2f}",
        }
        for name, j in block["judges"].items():
            k = j["kappa_detail"]
            row[f"{name} vs reviewer kappa"] = _ci(k["kappa"], k["low"], k["high"])
            row[f"{name} exact"] = f"{k['exact']:.2f}"
        rows.append(row)
    return pd.DataFrame(rows)


def alt_test_table(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for qid, block in result["questions"].items():
        for name, a in block["alt_test"].items():
            test = a["alt_test"] or {}
            rate = test.get("winning_rate")
            rows.append(
                {
                    "question": qid,
                    "judge": name,
                    "outcome": test.get("outcome", "–"),
                    "winning rate": "–" if rate is None else f"{rate:.2f}",
                    "tested reviewers": test.get("tested", 0),
                }
            )
    return pd.DataFrame(rows)


def cost_table(result: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for name, j in result["judges"].items():
        c = j["cost_per_1000_turns"]
        rows.append(
            {
                "judge": name,
                "tokens per 1,000 turns": "–" if c is None else f"{c['tokens']:.0f}",
                "USD per 1,000 turns": "–" if not c or "usd" not in c else f"{c['usd']:.4f}",
            }
        )
    return pd.DataFrame(rows)


def plot_rmse(result: dict[str, Any], ax=None):
    """Each judge's calibrated RMSE with its 95% interval, per question."""
    questions = list(result["questions"])
    names = result["settings"]["judges"]
    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(max(5.0, 1.2 * len(questions) + 2), 3.6))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        x = np.arange(len(questions)) + (i - (len(names) - 1) / 2) * width
        js = [result["questions"][q]["judges"][name] for q in questions]
        y = np.array([j["rmse"] for j in js])
        err = [y - [j["rmse_low"] for j in js], np.array([j["rmse_high"] for j in js]) - y]
        ax.errorbar(x, y, yerr=err, fmt="o", capsize=3, label=name)
    ax.set_xticks(np.arange(len(questions)), questions)
    ax.set_ylabel("calibrated RMSE (out of fold)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, ax


def _intro(result: dict[str, Any]) -> str:
    """The page's first lines: what was compared, on what, how."""
    d = result["data"]
    intro = (
        f"{len(result['settings']['judges'])} judges, {d['conversations']} labelled conversations, "
        f"{d['label_rows']} label rows, {d['reviewers']} reviewers; calibrator {result['settings']['model']}, "
        f"{result['settings']['folds']} shared folds of conversations"
        + (
            f" (out-of-fold predictions averaged over {reps} splits)"
            if (reps := result["settings"].get("repeats", 1)) > 1
            else ""
        )
        + f", {result['settings']['n_boot']} bootstrap "
        f"resamples (seed {result['settings']['seed']})."
    )
    skipped = {n: sum(r.values()) for n, r in d.get("skipped", {}).items() if sum(r.values())}
    if skipped:
        intro += (
            " Labels left out (no distribution for their turn): "
            + ", ".join(f"{n} {k}" for n, k in skipped.items())
            + "."
        )
    return intro


def write_page(
    result: dict[str, Any],
    out: Path,
    disagreements: pd.DataFrame | None = None,
    second_reviewer: pd.DataFrame | None = None,
) -> Path:
    lines = "".join(f"<li>{escape(b['recommendation']['line'])}</li>" for b in result["questions"].values())
    lines += f"<li>{escape(result['overall']['whole_judge']['line'])}</li>"
    sections: list[tuple[str, str, tuple[str, str] | None, str]] = [
        (
            "Recommendation per question",
            "Pick = lowest calibrated out-of-fold RMSE; the difference is paired (the same label rows, "
            "conversations resampled); within noise where its 95% interval reaches 0. The last column: how many "
            "times the pick's labelled conversations the runner-up needs for a release estimate as narrow. The last "
            "line: each judge as a whole (its RMSE averaged over the questions, the same resamples).",
            None,
            f"<ul>{lines}</ul>" + html_table(recommendation_table(result)),
        ),
        ("The winner's curse", result["winners_curse"], None, ""),
    ]
    fig, _ = plot_rmse(result)
    sections.append(
        (
            "Calibrated agreement with the reviewers",
            "Per question and judge, with 95% intervals over resampled conversations. raw judge RMSE: the "
            "judge's own expected answer, uncalibrated. R2: the share of the conversation totals' variance the "
            "calibrated prediction explains, cross-fitted (what a release estimate's ppi interval gains).",
            (encode_png(fig, out / "rmse_by_question.png"), "calibrated RMSE per question"),
            html_table(agreement_table(result)),
        )
    )
    sections.append(
        (
            "Chance-corrected agreement (quadratic-weighted kappa)",
            "Reviewers with each other (every pair of reviewers of a turn) beside each calibrated judge with "
            "the reviewers, with the base rate: a skewed answer distribution makes a high exact agreement a "
            "modest kappa.",
            None,
            html_table(kappa_table(result)),
        )
    )
    sections += alpha_sections(result, second_reviewer)
    sections.append(
        (
            "Can a calibrated judge stand in for a reviewer?",
            f"The alternative annotator test per judge (epsilon {result['settings']['epsilon']:g}).",
            None,
            html_table(alt_test_table(result)),
        )
    )
    sections.append(
        (
            "Cost",
            "From each directory's gather_summary.json (– : no tokens recorded: an offline judge, imported data, "
            "or answers read from the cache).",
            None,
            html_table(cost_table(result)),
        )
    )
    if disagreements is not None and len(disagreements):
        top = disagreements.groupby("llm_judge", sort=False).head(TOP_DISAGREEMENTS)
        sections.append(
            (
                "Turns to open first",
                f"The {TOP_DISAGREEMENTS} label rows per judge where the calibrated judge and the reviewer "
                "disagree most (gap as a share of the question's range); all of them in disagreements.csv.",
                None,
                html_table(top),
            )
        )
    parts = [section("compare_section", title, note, image, Markup(body)) for title, note, image, body in sections]
    intro = _intro(result)
    return atomic_write_text(
        out / "compare-judges.html", render_page("compare-judges.html.j2", intro=intro, sections=parts)
    )
