"""`monitor`'s alarms, and the false-alarm guarantee over the whole horizon.

The guarantee: while the chatbot, its users and the judge stay as they were (every window's conversations a
draw of the same behaviour, the training data's for the shift check), the chance that ANY alarm is raised in
the first `horizon` windows, for any role and any check, is at most `alpha`.

How (alpha spending by a union bound, Bonferroni): alpha is split equally between the checks switched on
(fail_under=, drop=, the shift check), each check's share equally over the `horizon` windows, and a window's
share equally over the rows that check tests in it (its roles, and "all" for the two rate checks). Each test
runs at its row's level; the levels of all the tests that can ever run sum to at most alpha, so the chance that
any of them fires falsely is at most alpha whatever the dependence between them (the windows share a reference
period, the roles share the window). Why this and not a confidence sequence or a CUSUM: it needs nothing
about how windows depend on each other, a new window is tested from its own totals and the reference alone
(the state stays a few numbers per window), and the level each test ran at is written beside it, so an
alarm can be checked by hand. Its price: past the horizon no alarm can be raised (start a new out=), and a
small drop needs a few windows' worth of evidence in one window to show (benchmarks/monitor.py measures the
delay).

The tests: fail_under=X, p-value of "the window's rate >= X"; drop=D, of "the window's rate >= the reference
rate - D" (the reference: the first `reference` windows pooled, its own sampling error counted); the shift
check, its permutation p-value (calibration/monitor/statistics.py). Each alarm says what to do next: label
about K conversations of the window (the planner of calibration/release/planning.py, for a half-width of
`width`), then run `estimate` on them.
"""

from __future__ import annotations

from calibration.monitor.statistics import Totals, below_p, drop_p
from calibration.release.gate import GateFailed

__all__ = ["MonitorAlarm", "checks_on", "label_advice", "level", "rate_alarms", "rate_checks"]


class MonitorAlarm(GateFailed):
    """A new alarm: the command line exits 1 with this line (like a failed gate), so cron or CI can page
    someone; everything is written first."""

    label = "alarm"


def checks_on(*, fail_under: float | None, drop: float | None, shift: bool) -> list[str]:
    """The checks that share alpha."""
    return [
        name
        for name, on in (("fail_under", fail_under is not None), ("drop", drop is not None), ("shift", shift))
        if on
    ]


def level(alpha: float, checks: list[str], horizon: int, rows: int) -> float:
    """One test's level: alpha / checks / horizon / rows tested by that check in the window."""
    return alpha / max(len(checks), 1) / horizon / max(rows, 1)


def rate_checks(rows: dict[str, Totals], *, reference: dict[str, Totals], position: int, settings: dict) -> dict:
    """The rate checks of one window: row ("all" or a role) -> its checks, each with its p-value, level and
    whether it fired. position: the window's place from the first monitored (0-based); reference: the
    reference period's totals per row (used from position `settings["reference"]` on); settings: the
    command's alpha, horizon, reference, fail_under, drop and shift. The command and benchmarks/monitor.py
    both decide by this."""
    checks = checks_on(fail_under=settings["fail_under"], drop=settings["drop"], shift=settings["shift"])
    tested = [g for g, t in rows.items() if t.n >= 2]
    if position >= settings["horizon"] or not tested:
        return {g: [] for g in rows}
    at = level(settings["alpha"], checks, settings["horizon"], len(tested))
    after = position >= settings["reference"]
    return {
        g: rate_alarms(
            rows[g],
            reference=reference.get(g) if after else None,
            fail_under=settings["fail_under"],
            drop=settings["drop"],
            at=at,
        )
        if g in tested
        else []
        for g in rows
    }


def rate_alarms(
    totals: Totals,
    *,
    reference: Totals | None,
    fail_under: float | None,
    drop: float | None,
    at: float,
) -> list[dict]:
    """The rate checks of one row at level `at`: each with its p-value and whether it fired."""
    out = []
    if fail_under is not None:
        p = below_p(totals, fail_under)
        out.append(
            {
                "check": "fail_under",
                "p_value": p,
                "level": at,
                "fired": p < at,
                "what": f"the calibrated rate {totals.rate:.3f} is below fail_under={fail_under:g}",
            }
        )
    if drop is not None and reference is not None:
        p = drop_p(totals, reference, drop)
        out.append(
            {
                "check": "drop",
                "p_value": p,
                "level": at,
                "fired": p < at,
                "what": f"the calibrated rate {totals.rate:.3f} fell by more than drop={drop:g} from the "
                f"reference's {reference.rate:.3f}",
            }
        )
    return out


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
    who = "" if role == "all" else f" of role {role!r}"
    return {
        "label": k,
        "of": spread.N,
        "conversations": sorted(set(map(str, conversation))),
        "next": f"label about {k} of the {spread.N} conversations{who} of window {window}, drawn at random from "
        f"this alarm's `conversations`, then run `role-rubric estimate` on them for the reviewers' rate "
        f"(half-width about {width:g})",
    }
