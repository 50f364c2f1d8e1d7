"""The verdict at the top of the report: can I trust this calibrator? One box that compares the calibrated
model with the best baseline (whatever baselines the cv predictions hold), gives the worst smECE, names
the judge that produced the distributions, the data size, and what was skipped or is too small to read.

`prepare_verdict(...)` returns a dict (also written to metrics.json); `verdict_html(verdict)` draws it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from calibration.evaluation.cv_predictions import METHOD_LABELS, REFERENCE, TRAINABLE, best_trainable
from calibration.evaluation.releases import PREVIOUS, deploy_basis, deploy_choice, deploy_rmse
from rubric.judge.identity import stand_in_note

SMECE_GOOD = 0.05
ALPHA = 0.05
NOT_BASELINES = {REFERENCE, "calibrated_nested"}  # our own model, estimated another way


def _metric(table: pd.DataFrame, method: str, metric: str) -> dict[str, float]:
    row = table[(table["method"] == method) & (table["metric"] == metric)]
    if row.empty:
        return {"value": math.nan, "low": math.nan, "high": math.nan, "p_value": math.nan}
    r = row.iloc[0]
    return {k: float(r[k]) for k in ("value", "low", "high", "p_value")}


def prepare_verdict(
    table: pd.DataFrame,
    curves: Sequence[Mapping[str, Any]],
    *,
    judge: Mapping[str, Any] | None,
    size: Mapping[str, int],
    skipped: Iterable[str] = (),
    warnings: Iterable[str] = (),
    data: Any = "DIR",
    target: str | None = None,
    weights: Any = None,
    by_dataset: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """table: prepare_metrics_table's frame; curves: the reliability curves (name, n, positives, smece,
    low, high); size: judgments, judges, conversations, turns, folds. Returns the verdict as a dict:
    outcome ("better" | "no clear difference" | "worse"), the best baseline and both models' RMSE and
    Pearson with intervals and p-values, the worst smECE, trust ("trust" | "use with care" | "do not
    trust"), the judge, size, skipped and warnings; `deploy`: of the models `role-rubric train` ships, the one
    with the lowest RMSE and the command that trains it on `data` (with its p-value against the network).
    by_dataset: the metrics per directory of several (`metrics_by_dataset`): the last directory's RMSE then
    chooses the model to deploy (`deploy_basis`; the p-value, over every directory's rows, is left out)."""
    baselines = [m for m in dict.fromkeys(table["method"]) if m not in NOT_BASELINES]
    rmse = {m: _metric(table, m, "rmse")["value"] for m in baselines}
    finite = {m: v for m, v in rmse.items() if math.isfinite(v)}
    best = min(finite, key=finite.__getitem__) if finite else None
    ours = {k: _metric(table, REFERENCE, k) for k in ("rmse", "pearson")}
    theirs = {k: _metric(table, best, k) for k in ("rmse", "pearson")} if best else {}
    outcome = "no clear difference"
    if best is not None:
        p = theirs["rmse"]["p_value"]
        if math.isfinite(p) and p < ALPHA:
            outcome = "better" if ours["rmse"]["value"] < theirs["rmse"]["value"] else "worse"
    readable = [c for c in curves if int(c.get("positives", 0)) >= 10 and math.isfinite(float(c["smece"]))]
    worst = max(readable, key=lambda c: float(c["smece"]), default=None)
    calibrated_ok = worst is not None and float(worst["smece"]) <= SMECE_GOOD
    if outcome == "better" and calibrated_ok:
        trust = "trust"
    elif outcome == "worse":
        trust = "do not trust"
    else:
        trust = "use with care"
    stand_in = stand_in_note((judge or {}).get("model"))
    if stand_in and trust == "trust":
        trust = "use with care"
    deploy = _deploy(table, data, target, weights, dict(by_dataset or {}))
    return {
        "outcome": outcome,
        "deploy": deploy,
        "trust": trust,
        "best_baseline": best,
        "best_baseline_label": METHOD_LABELS.get(best, best) if best else None,
        "calibrated": ours,
        "baseline": theirs,
        "worst_smece": None if worst is None else {k: worst[k] for k in ("name", "smece", "low", "high", "positives")},
        "judge": dict(judge) if judge else None,
        "stand_in": stand_in,
        "size": dict(size),
        "skipped": list(skipped),
        "warnings": list(warnings),
    }


def _deploy(table: pd.DataFrame, data: Any, target: str | None, weights: Any, by_dataset: dict) -> dict | None:
    """Of the models `role-rubric train` ships, the one to deploy (cv's choice: calibration/evaluation/releases.py)
    and the command that trains it. On a `report model=` page of a linear or ordinal model the table names that
    model `calibrated` and the network `network` (calibration/report/shipped.py): each is read under its own
    name, and the lowest RMSE decides (the significance filter of several directories compares with the
    network's rows, which that page renamed)."""
    own = _own_names(set(table["method"]))
    table = table.assign(method=table["method"].map(lambda m: own.get(m, m)))
    by_dataset = {d: {own.get(m, m): v for m, v in per.items()} for d, per in by_dataset.items()}
    basis = deploy_basis(by_dataset)
    union = {m: {"rmse": _metric(table, m, "rmse")["value"]} for m in TRAINABLE}
    by_last = basis is not None and basis["by_last"]
    if own:
        deploy = best_trainable(deploy_rmse(union, by_dataset, basis), data, target, weights)
        if deploy is not None and basis is not None:
            deploy["basis"] = basis["note"]
    else:  # the same choice as cv's deploy line
        deploy = deploy_choice(union, by_dataset, data, target, weights)
    if deploy is not None and deploy["method"] not in (REFERENCE, PREVIOUS) and not by_last and not own:
        deploy["p_value"] = _metric(table, deploy["method"], "rmse")["p_value"]
    return deploy


def _own_names(methods: set[str]) -> dict[str, str]:
    """The table's method -> its own name where a `report model=` page renamed them (calibration/report/shipped.py
    `as_shipped`: the shipped linear or ordinal model's rows are `calibrated`, the network's `network`); {}
    on any other page."""
    from calibration.report.shipped import NETWORK

    if NETWORK not in methods:
        return {}
    shipped = [m for m in TRAINABLE if m != REFERENCE and m not in methods]
    return {REFERENCE: shipped[0], NETWORK: REFERENCE} if len(shipped) == 1 else {}


def _ci(m: Mapping[str, float]) -> str:
    if not math.isfinite(m.get("value", math.nan)):
        return "–"
    return f"{m['value']:.3f}&nbsp;[{m['low']:.3f},&nbsp;{m['high']:.3f}]"


def _p(p: float) -> str:
    return "–" if not math.isfinite(p) else (f"{p:.2g}" if p >= 0.001 else "&lt;0.001")


def _deploy_html(d: Mapping[str, Any], shipped: Mapping[str, Any] | None = None) -> str:
    """Which model to ship, and the command that trains it; on a `report model=` page, whether it is that one."""
    why = f"; {html.escape(d['why'])}" if d.get("why") else ""
    if d["method"] == PREVIOUS:  # adapting did not beat the model trained without the new release
        return (
            f"<b>Deploy</b>: the calibration network trained without the last directory ({d['rmse']:.3f})"
            f"{_basis(d)}{why}; train it: <code>{html.escape(d['command'])}</code>"
        )
    if shipped is not None:
        return _shipped_deploy_html(d, shipped)
    if d["method"] == REFERENCE:
        which = "the calibration network has the lowest RMSE of the models you can train"
    elif d.get("basis") and "p_value" not in d:
        which = f"the {html.escape(d['model'])} model has the lowest RMSE of the models you can train ({d['rmse']:.3f})"
    else:
        p = d.get("p_value", math.nan)
        clear = "clearly" if math.isfinite(p) and p < ALPHA else "not clearly"
        which = (
            f"the {html.escape(d['model'])} model has the lowest RMSE of the models you can train "
            f"({d['rmse']:.3f}; {clear} lower than the network's, p&nbsp;{_p(p)})"
        )
    return f"<b>Deploy</b>: {which}{_basis(d)}{why}; train it on all labels: <code>{html.escape(d['command'])}</code>"


def _basis(d: Mapping[str, Any]) -> str:
    return f" ({html.escape(d['basis'])})" if d.get("basis") else ""


def _shipped_deploy_html(d: Mapping[str, Any], shipped: Mapping[str, Any]) -> str:
    basis = _basis(d) + (f"; {html.escape(d['why'])}" if d.get("why") else "")
    which = "calibration network" if d["model"] == "network" else f"{html.escape(d['model'])} model"
    if d["model"] == shipped["kind"]:
        return (
            f"<b>Deploy</b>: this page's model, the {which}, has the lowest RMSE of the models you can train "
            f"({d['rmse']:.3f}){basis}: it is the one to ship."
        )
    return (
        f"<b>Deploy</b>: the {which} has the lowest RMSE of the models you can train ({d['rmse']:.3f}){basis}, "
        f"not this page's {html.escape(shipped['kind'])} model (see its row in the table of baselines); train it "
        f"on all labels: <code>{html.escape(d['command'])}</code>"
    )


COLOURS = {"trust": "#2a7a2a", "use with care": "#b07800", "do not trust": "#b00020"}


def verdict_html(v: Mapping[str, Any]) -> str:
    """The verdict box (first thing on the page)."""
    from calibration.pages.parts import prose_html
    from rubric.judge.identity import describe

    colour = COLOURS[v["trust"]]
    best = html.escape(str(v["best_baseline_label"] or "none"))
    ours, theirs = v["calibrated"], v["baseline"]
    if v["best_baseline"] is None:
        headline = "No baseline to compare with."
    elif v["outcome"] == "better":
        headline = f"The calibrated model agrees with the human judges better than the best baseline ({best})."
    elif v["outcome"] == "worse":
        headline = f"The calibrated model agrees with the human judges <b>worse</b> than the best baseline ({best})."
    else:
        headline = f"The calibrated model is not clearly better than the best baseline ({best})."
    rows = ""
    if theirs:
        rows = (
            "<table class='rr-verdict-table'><tr><th></th><th>RMSE (lower is better)</th><th>Pearson</th></tr>"
            f"<tr><td>calibrated</td><td>{_ci(ours['rmse'])}</td><td>{_ci(ours['pearson'])}</td></tr>"
            f"<tr><td>{best}</td><td>{_ci(theirs['rmse'])}</td><td>{_ci(theirs['pearson'])}</td></tr>"
            f"<tr><td>p (paired permutation)</td><td>{_p(theirs['rmse']['p_value'])}</td>"
            f"<td>{_p(theirs['pearson']['p_value'])}</td></tr></table>"
        )
    items = []
    w = v["worst_smece"]
    if w is None:
        items.append("<b>Calibration</b>: no reliability panel has enough positive answers to judge it.")
    else:
        good = "within" if w["smece"] <= SMECE_GOOD else "<b>above</b>"
        items.append(
            f"<b>Worst calibration</b>: smECE {w['smece']:.3f}&nbsp;[{w['low']:.3f},&nbsp;{w['high']:.3f}] for "
            f"'{html.escape(str(w['name']))}' ({good} the {SMECE_GOOD} we aim for; 0 = perfectly calibrated)."
        )
    if v.get("deploy"):
        items.append(_deploy_html(v["deploy"], v.get("shipped")))
    items.append(f"<b>Judge</b> that produced the distributions: {html.escape(describe(v['judge']))}.")
    if v["stand_in"]:
        items.append(f"<b class='rr-warn'>Stand-in judge</b>: {prose_html(v['stand_in'])}.")
    s = v["size"]
    items.append(
        f"<b>Data</b>: {s.get('judgments', 0)} judgments by {s.get('judges', 0)} human judges on "
        f"{s.get('turns', 0)} turns of {s.get('conversations', 0)} conversations; "
        f"{s.get('folds', 0)}-fold cross-validation grouped by conversation (every number is out of fold)."
    )
    if v["skipped"]:
        items.append("<b>Skipped</b>: " + "; ".join(prose_html(x) for x in v["skipped"]) + ".")
    for warning in v["warnings"]:
        items.append(f"<b class='rr-warn'>Warning</b>: {prose_html(warning)}")
    items.append(
        "<b>Which turns it gets most wrong</b>: <a href='#turns'>every turn with its text, worst "
        "disagreement first</a>."
    )
    lis = "".join(f"<li>{x}</li>" for x in items)
    return (
        f'<div class="rr-verdict" id="verdict" style="border-color:{colour}">'
        f"<p class='rr-verdict-head' style='color:{colour}'>Verdict: {html.escape(v['trust'])}</p>"
        f"<p>{headline}</p>{rows}<ul>{lis}</ul></div>"
    )


VERDICT_CSS = """
.rr-verdict { border: 3px solid; border-radius: 6px; padding: 0.6em 1.2em; margin: 1em 0 2em; }
.rr-verdict-head { font-size: 1.35em; font-weight: 700; margin: 0.2em 0; }
.rr-verdict-table td, .rr-verdict-table th { white-space: nowrap; }
.rr-verdict li { margin: 0.25em 0; } .rr-warn { color: #b00020; }
td { white-space: nowrap; }
"""
