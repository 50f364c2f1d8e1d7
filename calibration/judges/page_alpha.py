"""compare-judges.html's sections on Krippendorff's alpha (per question, reviewer and role, the reviewers with each
other beside each calibrated judge, with the base rate) and on the second-reviewer plan."""

from __future__ import annotations

from typing import Any

import pandas as pd

from calibration.pages.parts import html_table

TOP_PLAN = 20


def _alpha(block: dict | None) -> str:
    if block is None or block["alpha"] is None:
        return "–"
    return f"{block['alpha']:.3f} [{block['low']:.3f}, {block['high']:.3f}]"


def _row(label: dict[str, str], both: dict) -> dict[str, str]:
    rev = both["reviewers"]
    base = (rev or next(iter(both["judges"].values())))["base_rate"]
    row = label | {
        "commonest answer share": f"{base['majority']:.2f}",
        "chance exact agreement": f"{base['chance_exact']:.2f}",
        "reviewers with each other": _alpha(rev),
        "turns with 2+ reviewers": "–" if rev is None else str(rev["turns"]),
    }
    return row | {f"{name} with the reviewers": _alpha(j) for name, j in both["judges"].items()}


def alpha_table(result: dict[str, Any], by: str | None = None) -> pd.DataFrame:
    """One row per question (by=None), or per question and reviewer (by="per_reviewer") or role ("per_role")."""
    rows = []
    for qid, block in result["questions"].items():
        a = block["alpha"]
        if by is None:
            rows.append(_row({"question": qid}, a))
        elif a.get(by):
            rows += [_row({"question": qid, by[4:]: name}, both) for name, both in a[by].items()]
    return pd.DataFrame(rows)


def plan_table(result: dict[str, Any]) -> pd.DataFrame:
    plan = result["second_reviewer"]
    return pd.DataFrame([{"question": qid} | q for qid, q in plan["questions"].items()])


def alpha_sections(result: dict[str, Any], second_reviewer: pd.DataFrame | None) -> list[tuple]:
    """(title, note, image, body) of each section, as write_page takes them."""
    level = next(iter(result["questions"].values()))["alpha"]["level"]
    note = (
        f"Krippendorff's alpha ({level}), 95% intervals over resampled conversations: 1 is perfect agreement, 0 "
        "what chance gives with these answers' spread (the base rate beside it), below 0 worse than chance. "
        "Reviewers: every pair of reviewers of a turn; a calibrated judge: its answer for each label row's "
        "reviewer beside that reviewer's."
    )
    out = [
        ("Krippendorff's alpha: reviewers beside each calibrated judge", note, None, html_table(alpha_table(result)))
    ]
    out.append(
        (
            "Alpha per reviewer",
            "Each reviewer with the other reviewers of the same turns, beside each calibrated judge with that "
            "reviewer's answers.",
            None,
            html_table(alpha_table(result, "per_reviewer")),
        )
    )
    by_role = alpha_table(result, "per_role")
    if len(by_role):
        out.append(("Alpha per chatbot role", "The same, on each role's conversations.", None, html_table(by_role)))
    if "second_reviewer" in result:
        plan = result["second_reviewer"]
        body = html_table(plan_table(result))
        if second_reviewer is not None and len(second_reviewer):
            body += html_table(second_reviewer.head(TOP_PLAN))
        out.append(
            (
                "Turns for a second reviewer",
                f"To measure the reviewers' alpha to an interval {plan['agreement_width']:g} wide: the turns one "
                "reviewer answered, ranked, to give a second; projected widths assume the interval narrows as "
                f"1/sqrt(turns). The first {TOP_PLAN} here, all {plan['turns']} in second_reviewer.csv.",
                None,
                body,
            )
        )
    return out
