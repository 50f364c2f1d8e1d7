"""The report's section "Can the calibrated judge replace a reviewer?" (calibration/evaluation/reviewers.py)."""

from __future__ import annotations

import pandas as pd

from calibration.evaluation.reviewers import MIN_REVIEWERS, MIN_SHARED_TURNS
from calibration.pages.parts import html_table, prose_html
from calibration.report.page import section_html


def _fmt(x) -> str:
    return "–" if x is None else f"{x:.3f}"


def reviewer_section(block: dict) -> str:
    """The section's HTML: the verdict per question in words, then the table of (a), (b) and (c)."""
    rows = []
    for qid, q in block["questions"].items():
        test, cal = q["alt_test"], q["calibrated"]
        rows.append(
            {
                "question": qid,
                "reviewers: pearson": _fmt(q["reviewers"]["pearson"]),
                "reviewers: rmse": _fmt(q["reviewers"]["rmse"]),
                "reviewers: kappa": _fmt(q["reviewers"]["kappa"]),
                "calibrated: pearson": _fmt(cal and cal["pearson"]),
                "calibrated: rmse": _fmt(cal and cal["rmse"]),
                "calibrated: kappa": _fmt(cal and cal["kappa"]),
                "alt-test: tested": "–" if test is None else str(test["tested"]),
                "winning rate": "–" if test is None or test["winning_rate"] is None else f"{test['winning_rate']:.0%}",
                "verdict": "not tested" if test is None else test["outcome"],
            }
        )
    words = "".join(f"<li>{prose_html(q['verdict'])}</li>" for q in block["questions"].values())
    text = (
        "Per question: <b>reviewers</b>, each reviewer against the mean of the turn's other "
        "reviewers (leave one reviewer out; quadratic-weighted kappa with that mean rounded to an option), the "
        "ceiling a judge can reach; <b>calibrated</b>, the calibrated judge's out-of-fold prediction against the "
        "same held-out reviewers on the same turns. <b>Alternative annotator test</b> (Calderon et al., ACL 2025): "
        f"for each reviewer with {MIN_SHARED_TURNS} or more turns shared with other reviewers, does the calibrated "
        "judge (the mixture of its out-of-fold predictions for the turn's reviewers) agree with the others at least "
        f"as often as that reviewer, within epsilon = {block['epsilon']:g}? Winning rate: the share of reviewers it "
        f"beats (Benjamini-Yekutieli, q = 0.05); it passes at 50% or more of at least {MIN_REVIEWERS} reviewers."
    )
    return section_html(
        "Can the calibrated judge replace a reviewer?",
        text,
        None,
        f"<ul>{words}</ul>\n" + html_table(pd.DataFrame(rows)),
    )
