"""The console table of `role-rubric estimate`: one row per quantity and scope, the three columns side by side."""

from __future__ import annotations

import textwrap


def _cell(x: dict | None, digits: int) -> str:
    if x is None:
        return "-"
    return f"{x['estimate']:.{digits}f} [{x['low']:.{digits}f}, {x['high']:.{digits}f}]"


def _rows(scope: str, blocks: dict) -> list[list[str]]:
    rows = []
    for kind in ("rate", "mean"):
        b = blocks[kind]
        eff = b.get("effective_labels")
        rows.append(
            [
                scope,
                kind,
                f"{b['calibrator']:.3f}",
                _cell(b["humans"], 3),
                _cell(b["ppi"], 3),
                f"{b['n_labelled_conversations']}/{b['n_conversations']}",
                "-" if eff is None else ("all labelled" if eff == float("inf") else f"{eff:.0f}"),
            ]
        )
    return rows


def _short(role: str, width: int = 40) -> str:
    """A role's name for the console: roles are often the whole role prompt (estimate.json keeps it whole)."""
    return role if len(role) <= width else role[: width - 3].rstrip() + "..."


def format_table(result: dict) -> str:
    pct = round(100 * (1 - result["alpha"]))
    header = ["scope", "quantity", "calibrator*", f"humans {pct}% CI", f"ppi {pct}% CI", "labelled/conv", "eff. labels"]
    rows = _rows("overall", result)
    for role, blocks in result["by_role"].items():
        rows += _rows(f"role: {_short(role)}", blocks)
    for qid, blocks in result["by_question"].items():
        rows += _rows(f"question: {qid}", blocks)
    if "difference" in result:
        for kind in ("rate", "mean"):
            d = result["difference"][kind]
            rows.append(
                [
                    "vs baseline",
                    kind,
                    "",
                    "",
                    f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
                    f"p={d['p']:.3g}",
                    "",
                ]
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [
        f"target {result['target']!r}; rate = share of answers >= {result['adheres_at']:g}; "
        f"* calibrator: the uncorrected mean calibrated prediction (no interval).",
        "sampling: " + result["sampling"] + ".",
        result["note"],
    ]
    if "by_role_note" in result:
        notes.append(result["by_role_note"])
    return "\n".join(lines + [""] + [textwrap.fill(n, 110) for n in notes])
