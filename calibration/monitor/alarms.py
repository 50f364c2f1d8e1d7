"""`monitor`'s alarms, and the false-alarm guarantee over any number of windows.

The guarantee: while the chatbot, its users within each role and the judge stay as they were (every role's
conversations a draw of the same behaviour; the mix of roles may move freely), the chance that ANY alarm is
raised, for any role, rubric question or check, ever, is at most `alpha` (the shift check: within `horizon`).

How: alpha is split (a union bound) between the families switched on: the target's rate checks (half), the other
rubric questions' drop checks (a quarter), the shift check (the rest; see FAMILY_WEIGHTS), renormalised over
those on. Inside a family, equally between checks (fail_under=, drop=) and questions; inside a drop check half goes
to the reference period's lower bounds (one per role) and half to the betting e-processes (calibration/monitor/
evidence.py): a quarter to "all" (the product of the roles' wealths) and a quarter to the roles, the k-th role in
order of first appearance getting 6/(pi^2 k^2) of it, so a role that appears late still has a fixed share. Each
e-process alarms when its wealth reaches 1 / its share: by Ville's inequality that happens with chance at most its
share, over every window to come, whatever the shape of the rates. The shift check keeps its per-window
permutation test, its share split over `horizon` windows and the window's roles.

The checks, per rubric question q (the target, and with questions=true every other):
- drop=D: "every conversation of the role is expected at >= L_r - D", L_r the reference period's lower bound on
  the role's mean rate of q; it alarms once evidence that the role fell by more than D has accumulated.
- fail_under=X (the target only): "every conversation of the role is expected at >= X".
An e-process that alarmed stays alarmed (its row says so every window) and raises no second alarm.
"""

from __future__ import annotations

import math

import numpy as np

from calibration.monitor.evidence import Bettor, lower_bound, role_shares
from calibration.release.gate import GateFailed

__all__ = ["ALL", "FAMILY_WEIGHTS", "MonitorAlarm", "budget", "evidence_checks", "freeze_reference", "label_advice"]

ALL = "all"
FAMILY_WEIGHTS = {"rate": 0.5, "questions": 0.25, "shift": 0.15, "canary": 0.1}
"""Shares of alpha per family of checks, renormalised over the families switched on."""


class MonitorAlarm(GateFailed):
    """A new alarm: the command line exits 1 with this line (like a failed gate), so cron or CI can page
    someone; everything is written first."""

    label = "alarm"


def budget(alpha: float, *, fail_under: float | None, drop: float | None, questions: int, shift: bool) -> dict:
    """Alpha per family and check: {"fail_under", "drop" (the target's), "question_drop" (each other question's),
    "shift" (per window, before its split over roles), "lower_bound" and "evidence" fractions of a drop check}.
    questions: how many rubric questions other than the target are monitored."""
    on = {
        "rate": fail_under is not None or drop is not None,
        "questions": drop is not None and questions > 0,
        "shift": shift,
    }
    total = sum(FAMILY_WEIGHTS[f] for f, yes in on.items() if yes) or 1.0
    share = {f: alpha * FAMILY_WEIGHTS[f] / total if yes else 0.0 for f, yes in on.items()}
    rate_checks = (fail_under is not None) + (drop is not None)
    return {
        "fail_under": share["rate"] / rate_checks if fail_under is not None else 0.0,
        "drop": share["rate"] / rate_checks if drop is not None else 0.0,
        "question_drop": share["questions"] / questions if on["questions"] else 0.0,
        "shift": share["shift"],
    }


def _role_level(share: float, role: str, order: list[str]) -> float:
    return share * role_shares(order.index(role) + 1)


def freeze_reference(rates: dict, *, drop: float, drop_share: dict) -> dict:
    """The drop checks' thresholds at the end of the reference period: per question, per role, the reference's
    lower bound on the role's mean rate (each at half the question's drop share, split over the roles) minus
    drop. rates: question -> role -> the reference's per-conversation rates in arrival order."""
    out = {}
    for q, by_role in rates.items():
        roles = sorted(r for r, x in by_role.items() if len(x) >= 2)
        delta = drop_share[q] / 2 / max(len(roles), 1)
        out[q] = {}
        for role in roles:
            x = np.asarray(by_role[role], float)
            bound = lower_bound(x, delta)
            out[q][role] = {"theta": bound - drop, "lower_bound": bound, "mean": float(x.mean()), "n": len(x)}
            out[q][role]["delta"] = delta
    return out


def evidence_checks(
    rates: dict[str, np.ndarray],
    *,
    question: str,
    state: dict,
    settings: dict,
    shares: dict,
    target: bool,
) -> dict[str, list[dict]]:
    """One window's sequential checks for one question: row (each role, and "all") -> its checks, each with its
    e-value, the level it alarms at, whether it fired in this window, and whether it has alarmed before.
    rates: role -> the window's per-conversation rates of this question in arrival order. state: the monitor's
    (its "bettors", "thresholds", "alarmed" and "roles" are read and moved on)."""
    out: dict[str, list[dict]] = {row: [] for row in [*rates, ALL]}
    order = state["roles"]
    checks = []
    if target and settings["fail_under"] is not None:
        checks.append(("fail_under", {r: settings["fail_under"] for r in rates}, shares["fail_under"]))
    thresholds = (state.get("thresholds") or {}).get(question)
    if settings["drop"] is not None and thresholds is not None:
        share = shares["drop"] if target else shares["question_drop"]
        checks.append(("drop", {r: thresholds[r]["theta"] for r in rates if r in thresholds}, share / 2))
    for check, theta, share in checks:
        combined = 0.0
        for role, x in rates.items():
            if role not in theta or len(x) == 0:
                continue
            key = f"{question}|{check}|{role}"
            bettor = _bettor(state, key, theta[role], thresholds, question, role)
            bettor = bettor.update(np.asarray(x, float)[None, :], theta=np.array([theta[role]]))
            state["bettors"][key] = bettor.to_json()
            level = _role_level(share / 2 if check == "drop" else share, role, order)
            out[role].append(_decide(state, key, check, question, float(bettor.log_wealth[0]), level, theta[role]))
        if check == "drop" and ALL not in rates:  # one stratum only: its row is the "all" row already
            combined = sum(
                float(Bettor.from_json(state["bettors"][f"{question}|drop|{r}"]).log_wealth[0])
                for r in theta
                if f"{question}|drop|{r}" in state["bettors"]
            )
            out[ALL].append(_decide(state, f"{question}|drop|{ALL}", check, question, combined, share / 2, None))
    return out


def _bettor(state: dict, key: str, theta: float, thresholds, question: str, role: str) -> Bettor:
    if key in state["bettors"]:
        return Bettor.from_json(state["bettors"][key])
    prior = (thresholds or {}).get(role, {}).get("mean", theta + 0.1) if thresholds else theta + 0.1
    return Bettor.start(1, prior_mean=np.array([max(prior, theta)]))


def _decide(state, key, check, question, log_wealth, level, theta) -> dict:
    before = key in state["alarmed"]
    fired = not before and log_wealth >= math.log(1.0 / level)
    if fired:
        state["alarmed"][key] = True
    what = {
        "fail_under": f"evidence that {question}'s calibrated rate is below fail_under",
        "drop": f"evidence that {question}'s calibrated rate fell by more than drop= from the reference",
    }[check]
    return {
        "check": check,
        "question": question,
        "e_value": math.exp(min(log_wealth, 700.0)),
        "level": level,
        "threshold": theta,
        "fired": fired,
        "alarmed_before": before,
        "what": what,
    }


def label_advice(conversation, f, width: float, window: str, role: str) -> dict:
    """How many conversations of this window and role to label so that `estimate`'s interval of the reviewers'
    rate has about this half-width (planned from the calibrator's predictions, taken as calibrated: optimistic
    where it is off, which an alarm suggests; `estimate width=` then says if more are needed). conversation:
    each turn's conversation id; f: its calibrated adherence."""
    from calibration.release.planning import PPI_LAM_DF, labels_needed, spread_from_calibrator

    spread = spread_from_calibrator(conversation, f)
    # planned as estimate computes ppi: lambda's degree of freedom counted (calibration/release/planning.py)
    n = labels_needed(spread.ppi, spread.m_bar, spread.N, width, alpha=0.1, lam_df=PPI_LAM_DF)
    k = spread.N if n is None else n
    who = "" if role == ALL else f" of role {role!r}"
    return {
        "label": k,
        "of": spread.N,
        "conversations": sorted(set(map(str, conversation))),
        "next": f"label about {k} of the {spread.N} conversations{who} of window {window}, drawn at random from "
        f"this alarm's `conversations`, then run `role-rubric estimate` on them for the reviewers' rate "
        f"(half-width about {width:g})",
    }
