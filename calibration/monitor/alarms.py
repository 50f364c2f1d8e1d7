"""`monitor`'s alarms, and the false-alarm guarantee over any number of windows.

The guarantee: while the chatbot, its users within each role and the judge stay as they were (every role's
conversations a draw of the same behaviour; the mix of roles may move freely), the chance that ANY alarm is
raised, for any role, rubric question or check, ever, is at most `alpha` (the shift check: within `horizon`).

How: alpha is split (a union bound) between the families switched on: the target's rate checks (half), the other
rubric questions' drop checks (a quarter), the shift check (the rest; FAMILY_WEIGHTS), renormalised over those on;
inside a family equally between checks (fail_under=, drop=) and questions. A drop check's share goes a quarter
each to: the roles' reference lower bounds (split over the roles), "all"'s reference lower bound, the roles'
e-processes (the k-th role in order of first appearance gets 6/(pi^2 k^2) of it, so a role that appears late
still has a fixed share) and "all"'s e-process. An e-process alarms when its wealth reaches 1 / its share: by
Ville's inequality that happens with chance at most its share over every window to come, whatever the shape of
the rates in [0, 1] (calibration/monitor/evidence.py). The shift check keeps its per-window permutation test,
its share split over `horizon` windows and the window's roles.

The checks, per rubric question q (the target, and with questions=true every other), after the reference period
of `reference` windows:
- drop=D, per role: "every conversation of the role is expected at >= L_r - D", L_r the reference's lower bound
  on the role's mean rate; "all": "the rate at the reference's mix of roles is >= L - D", L the reference's bound
  on that rate: standardised to the reference's mix, so a change of mix alone never raises it, and pooled over
  the roles, so it is the sharpest row. A window that lacks one of the reference's roles adds nothing to "all".
- fail_under=X (the target only): the same against X (per role from the first window, "all" after the reference).
An e-process that alarmed stays alarmed and raises no second alarm.
"""

from __future__ import annotations

import math

import numpy as np

from calibration.monitor.evidence import Bettor, Standardised, lower_bound, role_shares, weighted_lower_bound
from calibration.release.gate import GateFailed

__all__ = ["ALL", "FAMILY_WEIGHTS", "MonitorAlarm", "budget", "evidence_checks", "freeze_reference", "label_advice"]

ALL = "all"
FAMILY_WEIGHTS = {"rate": 0.5, "questions": 0.25, "shift": 0.15, "canary": 0.1}
"""Shares of alpha per family of checks, renormalised over the families switched on."""


class MonitorAlarm(GateFailed):
    """A new alarm: the command line exits 1 with this line (like a failed gate), so cron or CI can page
    someone; everything is written first."""

    label = "alarm"


def budget(
    alpha: float, *, fail_under: float | None, drop: float | None, questions: int, shift: bool, canary: bool = False
) -> dict:
    """Alpha per family and check: {"fail_under", "drop" (the target's), "question_drop" (each other question's),
    "shift" (before its split over windows and roles), "canary" (before its split over the canary's tests)}.
    questions: how many rubric questions other than the target are monitored."""
    on = {
        "rate": fail_under is not None or drop is not None,
        "questions": drop is not None and questions > 0,
        "shift": shift,
        "canary": canary,
    }
    total = sum(FAMILY_WEIGHTS[f] for f, yes in on.items() if yes) or 1.0
    share = {f: alpha * FAMILY_WEIGHTS[f] / total if yes else 0.0 for f, yes in on.items()}
    rate_checks = (fail_under is not None) + (drop is not None)
    return {
        "fail_under": share["rate"] / rate_checks if fail_under is not None else 0.0,
        "drop": share["rate"] / rate_checks if drop is not None else 0.0,
        "question_drop": share["questions"] / questions if on["questions"] else 0.0,
        "shift": share["shift"],
        "canary": share["canary"],
    }


def _role_level(share: float, role: str, order: list[str]) -> float:
    return share * role_shares(order.index(role) + 1)


def freeze_reference(rates: dict, *, drop: float, drop_share: dict) -> dict:
    """The drop checks' thresholds at the end of the reference period, per question: for each role, the
    reference's betting lower bound on its mean rate minus drop (a quarter of the question's drop share, split
    over the roles), and for "all" the empirical-Bernstein lower bound on the rate at the reference's mix of
    roles minus drop (another quarter). rates: question -> role -> the reference's per-conversation rates."""
    out: dict[str, dict[str, dict]] = {}
    for q, by_role in rates.items():
        roles = sorted(r for r, x in by_role.items() if len(x) >= 2)
        delta = drop_share[q] / 4 / max(len(roles), 1)
        out[q] = {}
        for role in roles:
            x = np.asarray(by_role[role], float)
            bound = lower_bound(x, delta)
            out[q][role] = {"theta": bound - drop, "lower_bound": bound, "mean": float(x.mean()), "n": len(x)}
            out[q][role]["delta"] = delta
        if roles:
            n = np.array([len(by_role[r]) for r in roles], float)
            mix = n / n.sum()
            bound = weighted_lower_bound([np.asarray(by_role[r], float) for r in roles], mix, drop_share[q] / 4)
            out[q][ALL] = {
                "theta": bound - drop,
                "lower_bound": bound,
                "mean": float(sum(w * np.mean(by_role[r]) for w, r in zip(mix, roles, strict=True))),
                "mix": dict(zip(roles, mix.tolist(), strict=True)),
                "delta": drop_share[q] / 4,
            }
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
    rates: role -> the window's per-conversation rates of this question in arrival order (every role the
    reference knows, absent ones empty). state: the monitor's ("bettors", "thresholds", "alarmed", "roles")."""
    out: dict[str, list[dict]] = {row: [] for row in [*rates, ALL]}
    order = state["roles"]
    thresholds = (state.get("thresholds") or {}).get(question)
    checks = []
    if target and settings["fail_under"] is not None:
        checks.append(("fail_under", {r: settings["fail_under"] for r in rates if r != ALL}, shares["fail_under"]))
    if settings["drop"] is not None and thresholds is not None:
        share = shares["drop"] if target else shares["question_drop"]
        checks.append(("drop", {r: v["theta"] for r, v in thresholds.items() if r != ALL and r in rates}, share / 2))
    for check, theta, share in checks:
        for role, x in rates.items():
            if role not in theta:
                continue  # a role without a reference (new since): fail_under= only
            key = f"{question}|{check}|{role}"
            bettor = _bettor(state, key, theta[role], (thresholds or {}).get(role, {}).get("mean"))
            bettor = bettor.update(np.asarray(x, float)[None, :], theta=np.array([theta[role]]))
            state["bettors"][key] = bettor.to_json()
            if len(x) == 0:
                continue  # absent from this window: its evidence only ages (the plug-ins' memories decay)
            level = _role_level(share / 2, role, order)
            out[role].append(_decide(state, key, check, question, float(bettor.log_wealth[0]), level, theta[role]))
        if thresholds is not None and ALL in thresholds and ALL not in rates:  # several roles: at the reference's mix
            bound = thresholds[ALL]["theta"] if check == "drop" else settings["fail_under"]
            log_wealth = _standardised(state, f"{question}|{check}|{ALL}", rates, thresholds, bound)
            out[ALL].append(_decide(state, f"{question}|{check}|{ALL}", check, question, log_wealth, share / 2, bound))
    return out


def _standardised(state: dict, key: str, rates: dict, thresholds: dict, theta: float) -> float:
    """The "all" row's e-process (evidence.Standardised) moved on by this window; its log wealth."""
    whole = thresholds[ALL]
    roles = sorted(whole["mix"])
    if key in state["bettors"]:
        process = Standardised.from_json(state["bettors"][key])
    else:
        prior = [thresholds.get(r, whole)["mean"] for r in roles]
        process = Standardised.start(np.array([prior], float))
    width = max((len(rates.get(r, ())) for r in roles), default=0) or 1
    x = np.zeros((1, len(roles), width))
    mask = np.zeros((1, len(roles), width), bool)
    for g, r in enumerate(roles):
        got = np.asarray(rates.get(r, np.zeros(0)), float)
        x[0, g, : len(got)], mask[0, g, : len(got)] = got, True
    shares = np.array([[whole["mix"][r] for r in roles]])
    process = process.update(x, mask, shares, np.array([theta]))
    state["bettors"][key] = process.to_json()
    return float(process.log_wealth[0])


def _bettor(state: dict, key: str, theta: float, reference_mean: float | None) -> Bettor:
    """The row's e-process as the state keeps it, or a new one whose plug-in starts at the role's reference mean
    (a little above theta where there is none: no bet before the data say so)."""
    if key in state["bettors"]:
        return Bettor.from_json(state["bettors"][key])
    prior = theta + 0.1 if reference_mean is None else max(reference_mean, theta)
    return Bettor.start(1, prior_mean=np.array([prior]))


def _decide(state: dict, key: str, check: str, question: str, log_wealth: float, level: float, theta: float) -> dict:
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


def label_advice(conversation: np.ndarray, f: np.ndarray, width: float, window: str, role: str) -> dict:
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
