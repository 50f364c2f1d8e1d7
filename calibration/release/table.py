"""The console table of `role-rubric estimate`: one row per quantity and scope, the three columns side by side,
and its notes (the method's paragraph only with verbose=true: it is estimate.json's `note` and
docs/how-to/release-estimates.md's "How the intervals are made")."""

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


def format_table(result: dict, *, verbose: bool = False) -> str:
    """The table and its notes; verbose: with the paragraph on how the intervals are made."""
    pct = round(100 * (1 - result["alpha"]))
    header = ["scope", "quantity", "calibrator*", f"humans {pct}% CI", f"ppi {pct}% CI", "labelled/conv", "eff. labels"]
    rows = _rows("overall", result)
    for role, blocks in result["by_role"].items():
        rows += _rows(f"role: {role}", blocks)  # a short id already (calibration/release/roles.py)
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
        result["note"]
        if verbose
        else "how the intervals are made: estimate.json's note (verbose=true prints it here) and "
        "docs/how-to/release-estimates.md.",
    ]
    if "by_role_note" in result:
        notes.append(result["by_role_note"])
    return "\n".join(
        lines + [""] + [textwrap.fill(n, 110, break_on_hyphens=False, break_long_words=False) for n in notes]
    )


def terminal_lines(result: dict, *, verbose: bool = False) -> list[str]:
    """What `estimate` prints before it writes estimate.json: the table and its notes, the transport audit
    with its next step, the width plan, the gate's result (a failed gate is the command's error line) and
    the adapted model's folder with crossfit=."""
    from calibration.release.audit import audit_line
    from calibration.release.gate import gate_line

    lines = [format_table(result, verbose=verbose), f"estimate: {audit_line(result['transport_audit'])}"]
    strata = result.get("rate", {}).get("stratified", {})
    if strata and not strata.get("humans_only_why") and strata.get("note"):  # a stratum too small: not combined
        lines.append(f"estimate: note: {strata['note']}")
    if strata.get("humans_only_strata"):  # which interval the stratified ppi reports, and why
        lines.append(
            f"estimate: stratified ppi: {', '.join(strata['humans_only_strata'])}: {strata['humans_only_why']}"
        )
    if "line" in result.get("width_plan", {}):
        lines.append("estimate: " + result["width_plan"]["line"])
    if "gate" in result and not result["gate"]["failed"]:
        lines.append("estimate: " + gate_line(result))
    if "crossfit" in result:
        lines.append(f"estimate: wrote {result['crossfit']['adapted_model']} (the calibrator adapted on every label)")
    return lines
