"""The monitor on realistic streams: false alarms, detection delays and the judge canary, per scenario and judge.

Streams come from benchmarks/monitor_streams.py: 52 weekly windows of WHOLE real conversations resampled from two
pools (LLM-Rubric's dialogues with real GPT-3.5 distributions and real reviewers; the bundled benchmark with the
offline embedding judge), roles at their own rates, mixes fixed or moving, drops and a drift made by sampling
worse real conversations, and a judge change with no chatbot change. Three judges read each stream: "oracle"
(the reviewers' own rate of each conversation: a calibrator as sharp as the reviewers), the calibrated real
judge ("gpt35", anchors) and the calibrated embedding judge ("embedding", bundled), both out of fold.

The decisions are the command's: `monitor`'s drop check as calibration/monitor/alarms.py runs it (the same
alpha split, the reference's betting lower bound per role, the betting e-processes of calibration/monitor/
evidence.py, "all" as the product of the roles' evidence), vectorised over streams; tests/test_benchmark_monitor.py
checks that this runner and the command decide alike. Settings: alpha 0.05, drop=0 (any drop the evidence shows),
reference 8 windows, the shift check and the canary on (their shares of alpha spent elsewhere), one question
(the target).

The canary: the pool's frozen canary conversations, read by the original and by the changed judge, compared
by a paired sign-flip permutation test at the canary's share of alpha (calibration/monitor/canary.py).

    python benchmarks/monitor.py [--streams 500] [--cache benchmarks/.cache]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _results import add_results_argument, emit  # noqa: E402
from monitor_streams import CACHE, SCENARIOS, WINDOWS, Scenario, draw_stream, load_pools  # noqa: E402

from calibration.monitor.alarms import budget  # noqa: E402
from calibration.monitor.canary import canary_test  # noqa: E402
from calibration.monitor.evidence import Bettor, Standardised, lower_bound, role_shares, weighted_lower_bound  # noqa: E402

ALPHA, DROP, REFERENCE = 0.05, 0.0, 8
JUDGES = {"anchors": ("oracle", "gpt35"), "bundled": ("oracle", "embedding")}
LARGE = {
    s.name: s
    for s in (
        Scenario("drop_10_large", sizes=(250, 250), change="drop", size=0.10),
        Scenario("drop_05_large", sizes=(250, 250), change="drop", size=0.05),
        Scenario("drop_05_1000", sizes=(1000, 1000), change="drop", size=0.05),
    )
}
"""What a team with 250 or 1000 conversations a week can expect (the docs' advice is read from these)."""
ALL_SCENARIOS = {**SCENARIOS, **LARGE}


def shares() -> dict:
    """Alpha as the command splits it for this run (one question, the shift check on, no fail_under, a canary)."""
    return budget(ALPHA, fail_under=None, drop=DROP, questions=0, shift=True, canary=True)


def first_alarms(streams: list, roles: list[str]) -> np.ndarray:
    """(S,) the first window any row alarms in (-1: none), for streams whose windows map role -> rates: the
    command's drop check (calibration/monitor/alarms.py), vectorised over streams."""
    S = len(streams)
    share = shares()["drop"] / 2  # as evidence_checks gets it: half to the e-processes, half to the bounds
    reference = {r: [np.concatenate([s.windows[w][r] for w in range(REFERENCE)]) for s in streams] for r in roles}
    usable = {r: np.array([len(x) >= 2 for x in reference[r]]) for r in roles}
    n_roles = np.sum([usable[r] for r in roles], axis=0)
    theta = {r: np.full(S, -1.0) for r in roles}
    for r in roles:
        for i, x in enumerate(reference[r]):
            if usable[r][i]:
                theta[r][i] = lower_bound(x, share / 2 / n_roles[i]) - DROP
    mix = np.array([[len(reference[r][i]) if usable[r][i] else 0 for r in roles] for i in range(S)], float)
    mix /= np.maximum(mix.sum(axis=1, keepdims=True), 1)
    theta_all = np.array(
        [
            weighted_lower_bound([reference[r][i] for r in roles if usable[r][i]], mix[i][mix[i] > 0], share / 2) - DROP
            for i in range(S)
        ]
    )
    prior = np.array([[reference[r][i].mean() if usable[r][i] else 0.5 for r in roles] for i in range(S)])
    bettors = {r: Bettor.start(S, prior_mean=prior[:, g]) for g, r in enumerate(roles)}
    whole = Standardised.start(prior)
    order = {r: np.array([_order(s, r) for s in streams]) for r in roles}
    first = np.full(S, -1)
    for w in range(REFERENCE, WINDOWS):
        fired = np.zeros(S, bool)
        xs, masks = [], []
        for r in roles:
            x, mask = _padded([s.windows[w][r] for s in streams])
            mask &= usable[r][:, None]
            bettors[r] = bettors[r].update(x, theta=theta[r], mask=mask)
            level = share / 2 * np.array([role_shares(k) for k in order[r]])
            fired |= usable[r] & mask.any(axis=1) & (bettors[r].log_wealth >= np.log(1 / level))
            xs.append(x)
            masks.append(mask)
        width = max(x.shape[1] for x in xs)
        X = np.stack([np.pad(x, ((0, 0), (0, width - x.shape[1]))) for x in xs], axis=1)
        M = np.stack([np.pad(m, ((0, 0), (0, width - m.shape[1]))) for m in masks], axis=1)
        whole = whole.update(X, M, mix, theta_all)
        fired |= whole.log_wealth >= np.log(1 / (share / 2))
        first = np.where((first < 0) & fired, w, first)
    return first


def _order(stream, role: str) -> int:
    """The role's rank (1-based) by first appearance in the stream, ties by name, as the command counts it."""
    seen: list[str] = []
    for window in stream.windows:
        seen += sorted(r for r, x in window.items() if len(x) and r not in seen)
    return seen.index(role) + 1 if role in seen else len(seen) + 1


def _padded(rows: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    width = max((len(x) for x in rows), default=0) or 1
    x = np.zeros((len(rows), width))
    mask = np.zeros((len(rows), width), bool)
    for i, r in enumerate(rows):
        x[i, : len(r)], mask[i, : len(r)] = r, True
    return x, mask


def run_scenario(pool, name: str, judge: str, streams: int, seed: int) -> dict:
    scenario = ALL_SCENARIOS[name]
    rng = np.random.default_rng(seed)
    drawn = [draw_stream(pool, scenario, rng, judge) for _ in range(streams)]
    roles = sorted(pool_roles(drawn))
    first = first_alarms(drawn, roles)
    out = {"streams": streams, "any_alarm": round(float((first >= 0).mean()), 4)}
    start = np.array([s.change_start if s.change_start is not None else (s.judge_from or -1) for s in drawn])
    if scenario.change in ("drop", "drift"):
        early = (first >= 0) & (first < start)
        caught = (first >= start) & ~early
        delay = (first - start)[caught]
        out.update(
            alarm_before_the_change=round(float(early.mean()), 4),
            caught_within_horizon=round(float(caught.mean()), 4),
            median_delay_windows=float(np.median(delay)) if len(delay) else None,
            p90_delay_windows=float(np.percentile(delay, 90)) if len(delay) else None,
        )
    if scenario.change == "judge":
        after = (first >= start) & (start >= 0)
        out["rate_alarm_after_the_judge_change_if_not_held"] = round(float(after.mean()), 4)
        out["rate_alarm_before_it"] = round(float(((first >= 0) & (first < start)).mean()), 4)
    return out


def pool_roles(drawn) -> set[str]:
    return {r for s in drawn for w in s.windows for r in w}


def canary_block(pool, judge: str, level: float) -> dict:
    canary = pool.canary_turns
    if judge == "oracle":
        return {"note": "the reviewers' rate does not change with the judge: no canary"}
    got = canary_test(canary.original[judge], canary.changed[judge], level=level, seed=0)
    same = canary_test(canary.original[judge], canary.original[judge], level=level, seed=0)
    return {"judge_changed": got, "judge_unchanged": same}


def main() -> None:
    global REFERENCE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--cache", default=str(CACHE))
    parser.add_argument("--scenarios", nargs="*", default=list(ALL_SCENARIOS))
    parser.add_argument("--reference", type=int, default=8)
    add_results_argument(parser, "monitor")
    args = parser.parse_args()
    REFERENCE = args.reference
    started = time.perf_counter()
    pools = load_pools(Path(args.cache))
    level = shares()["canary"]
    results = {}
    for pool in pools:
        for judge in JUDGES[pool.source]:
            key = f"{pool.source}/{judge}"
            results[key] = {"canary": canary_block(pool, judge, level)}
            for i, name in enumerate(args.scenarios):
                results[key][name] = run_scenario(pool, name, judge, args.streams, seed=1000 * i)
                print(f"monitor benchmark: {key} {name}: {results[key][name]}", file=sys.stderr, flush=True)
    nulls = [s for s in args.scenarios if s.startswith("null_")]
    emit(
        args.results_name,
        {
            "benchmark": "monitor",
            "settings": {
                "alpha": ALPHA,
                "drop": DROP,
                "reference_windows": args.reference,
                "windows": WINDOWS,
                "streams_per_scenario": args.streams,
                "drop_check_alpha": shares()["drop"],
                "canary_alpha": level,
            },
            "worst_false_alarm_share": max(results[k][s]["any_alarm"] for k in results for s in nulls),
            "results": results,
            "seconds": round(time.perf_counter() - started, 1),
        },
    )


if __name__ == "__main__":
    main()
