"""Realistic monitoring streams: pools of real conversations with per-conversation rates under several judges,
and 52 weekly windows drawn from them by resampling WHOLE conversations (never by rescaling rates).

Pools (`load_pools`, built once with the project's own cv machinery, then cached under --cache):
- anchors: LLM-Rubric's synthetic data (../shared/anchors/llm_rubric_synth: real GPT-3.5 answer distributions,
  real reviewers); one item per dialogue; role = the dialogue system (the id's prefix V1..V5, see
  benchmarks/shift.py NEW_SYSTEMS); target Q0, adheres at >= 3. Judge "gpt35": GPT-3.5 calibrated.
- bundled: data/role_adherence (112 conversations of 4 chatbot roles, several turns each) with the offline
  embedding judge's distributions (gathered once, benchmarks/shift.py `bundled_dir`); target `overall`,
  adheres at >= 3. Judge "embedding": the embedding judge calibrated.
Per conversation: `oracle`, the reviewers' rate (the mean over its labelled turns of the reviewers' mean of
1[answer >= adheres_at]); per judge its calibrated rate, OUT OF FOLD: 5 folds grouped by conversation
(`group_folds`, fold seed 0), each fold's ENSEMBLE members trained by `oof_members`, pooled and recalibrated
on their own validation rows as cv does (`oof_network`), and every test turn predicted for every reviewer
with training labels in that fold, averaged: P(target >= adheres_at) averaged over reviewers, then over the
conversation's turns.

A judge change with no chatbot change (`changed`): the SAME fold models (never retrained) read another judge's
distributions of the same turns. anchors: `shifted_down` (a seeded share, uniform in SHIFT_SHARE per turn, of
every option's mass moved one option down on every question, then tempered by SHIFT_TEMPERATURE: a harsher,
flatter judge); bundled: far_shift's `restyled` at RESTYLE_TEMPERATURE / RESTYLE_TILT (flatter and
harsher, as another prompt style). Both move the calibrated rate down, as a chatbot drop would. The canary (`Canary`): CANARY conversations per pool (seeded) held out of
every stream, with their rates under both judges, paired, for a paired test.

Scenarios (`SCENARIOS`, `draw_stream`): 52 windows, each a dict role -> rates in arrival order. A drop is made
by sampling every role's conversations with weights exp(-theta * oracle), theta solved on the pool so that
the role's expected oracle rate falls by exactly the target (every role, so the pooled rate falls by it too
under any mix); `achieved_drops` measures it on drawn streams.

    python benchmarks/monitor_streams.py [--cache benchmarks/.cache] [--streams 500]   # pools' summary, JSON
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from monitor_pools import (  # noqa: E402  (benchmarks/monitor_pools.py)
    ANCHORS,
    CACHE,
    ENSEMBLE,
    FAIL_BELOW,
    FAIL_RATE,
    FAIL_SHARE,
    FOLDS,
    WINDOWS,
    Pool,
    load_pools,
)


@dataclass(frozen=True)
class Scenario:
    name: str
    sizes: tuple[int, int] = (20, 60)
    """Conversations a window (uniform, both ends included), or a role's a window where `per_role`."""
    per_role: bool = False
    mix: str = "fixed"
    """"fixed": the pool's role shares every window; "moving": a Dirichlet draw per window."""
    concentration: float = 0.5
    """Moving mix: the Dirichlet's concentration per role (low: strong week-to-week moves)."""
    failing_role: bool = False
    change: str = "none"
    """"none" | "drop" (from a random window on) | "drift" (linear from DRIFT_START to the last) | "judge"."""
    size: float = 0.0
    """The oracle rate's drop (drop: from the start on; drift: reached at the last window)."""
    start: tuple[int, int] = (13, 40)
    """The window the change starts at: uniform in [start[0], start[1])."""
    drop_role: str | None = None
    """The role whose rate drops (None: every role, so the pooled rate drops by `size` under any mix)."""


DRIFT_START = 13
SCENARIOS = {
    s.name: s
    for s in (
        Scenario("null_fixed_mix"),
        Scenario("null_mix_moving", mix="moving", concentration=0.5),
        # the bundled roles all adhere at ~0.73: with a failing role in the moving mix, roles differ on both pools
        Scenario("null_mix_moving_failing", mix="moving", concentration=0.5, failing_role=True),
        Scenario("null_failing_role", failing_role=True),
        Scenario("null_small_roles", sizes=(5, 20), per_role=True),
        Scenario("null_large_windows", sizes=(250, 250)),
        Scenario("drop_10", change="drop", size=0.10),
        Scenario("drop_05", change="drop", size=0.05),
        Scenario("drift_10", change="drift", size=0.10),
        Scenario("judge_change", change="judge"),
    )
}


@dataclass
class Stream:
    scenario: str
    judge: str
    windows: list[dict[str, np.ndarray]]
    """Per window: role -> the judge's rates of its conversations in arrival order (every role a key)."""
    picked: list[dict[str, np.ndarray]]
    """Per window: role -> the pool indices of those conversations (pool.oracle[picked] is the truth)."""
    change_start: int | None
    """The window a chatbot change (drop or drift) begins; None for null scenarios and the judge change."""
    judge_from: int | None = None
    """The first window whose rates come from the changed judge (judge_change only)."""
    judge_changed: bool = False
    target_drop: np.ndarray = field(default_factory=lambda: np.zeros(WINDOWS))
    """(WINDOWS,) the drop of every role's expected oracle rate the window was drawn with."""

    def oracle_windows(self, pool: Pool) -> list[dict[str, np.ndarray]]:
        return [{r: pool.oracle[i] for r, i in w.items()} for w in self.picked]


# ---------------------------------------------------------------- streams


def tilt(oracle: np.ndarray, drop: float) -> np.ndarray:
    """(n,) sampling weights exp(-theta * oracle), normalised, with theta >= 0 solved (bisection) so that the
    weighted mean of `oracle` is its plain mean minus `drop`. Raises ValueError if no tilt reaches it."""
    o = np.asarray(oracle, float)
    goal = o.mean() - drop
    if drop <= 0:
        return np.full(len(o), 1 / len(o))
    if goal <= o.min() + 1e-9:
        raise ValueError(f"a drop of {drop} from a mean of {o.mean():.3f} is below the lowest conversation's rate")

    def weights(theta: float) -> np.ndarray:
        z = -theta * (o - o.min())
        w = np.exp(z - z.max())
        return w / w.sum()

    lo, hi = 0.0, 1.0
    while weights(hi) @ o > goal:  # the weighted mean falls with theta: widen until the goal is bracketed
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if weights(mid) @ o > goal else (lo, mid)
    return weights((lo + hi) / 2)


def stream_roles(pool: Pool, scenario: Scenario) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(role -> pool indices its conversations are drawn from (canary excluded), the fixed mix's shares)."""
    eligible = ~pool.canary
    names = np.unique(pool.role[eligible])
    members = {str(r): np.flatnonzero(eligible & (pool.role == r)) for r in names}
    shares = np.array([len(i) for i in members.values()], float)
    shares /= shares.sum()
    if scenario.failing_role:
        means = {r: pool.oracle[i].mean() for r, i in members.items()}
        worst = min(means, key=means.get)
        if means[worst] >= FAIL_RATE:  # no role fails: one made of the pool's failing conversations (real ones)
            members["failing"] = np.flatnonzero(eligible & (pool.oracle < FAIL_BELOW))
            shares = np.append(shares * (1 - FAIL_SHARE), FAIL_SHARE)
        else:
            keys = list(members)
            shares = shares * (1 - FAIL_SHARE) / (1 - shares[keys.index(worst)])
            shares[keys.index(worst)] = FAIL_SHARE
    return members, shares


def drop_schedule(scenario: Scenario, rng) -> tuple[int | None, np.ndarray]:
    """(the window the chatbot change begins or None, (WINDOWS,) the oracle drop of every window)."""
    drops = np.zeros(WINDOWS)
    if scenario.change == "drop":
        start = int(rng.integers(*scenario.start))
        drops[start:] = scenario.size
        return start, drops
    if scenario.change == "drift":
        w = np.arange(DRIFT_START, WINDOWS)
        drops[DRIFT_START:] = scenario.size * (w - DRIFT_START + 1) / (WINDOWS - DRIFT_START)
        return DRIFT_START, drops
    return None, drops


def _weights(pool: Pool, members: dict[str, np.ndarray], drop: float, memo: dict, role: str | None):
    """role -> sampling weights of its conversations, tilted for `drop` (only `role`'s, if named)."""
    if role is not None and role not in members:
        raise KeyError(f"drop_role {role!r} is not a role of pool {pool.source}: {sorted(members)}")
    key = (round(drop, 12), role)
    if key not in memo:
        memo[key] = {r: tilt(pool.oracle[i], drop if role in (None, r) else 0.0) for r, i in members.items()}
    return memo[key]


def draw_stream(pool: Pool, scenario: Scenario, rng, judge: str) -> Stream:
    """One stream of WINDOWS windows of `scenario` from `pool`, the rates of `judge` ("oracle" or a judge of
    the pool): whole conversations drawn with replacement, every role's by its (tilted) weights."""
    members, shares = stream_roles(pool, scenario)
    roles = list(members)
    change_start, drops = drop_schedule(scenario, rng)
    judge_from = int(rng.integers(*scenario.start)) if scenario.change == "judge" else None
    memo = pool.__dict__.setdefault("_tilts", {}).setdefault((scenario.failing_role,), {})
    windows, picked = [], []
    for w in range(WINDOWS):
        if scenario.per_role:
            counts = rng.integers(scenario.sizes[0], scenario.sizes[1] + 1, size=len(roles))
        else:
            n = int(rng.integers(scenario.sizes[0], scenario.sizes[1] + 1))
            mix = rng.dirichlet(np.full(len(roles), scenario.concentration)) if scenario.mix == "moving" else shares
            counts = rng.multinomial(n, mix)
        weights = _weights(pool, members, drops[w], memo, scenario.drop_role)
        changed = judge_from is not None and w >= judge_from
        rates = pool.rates(judge, changed)
        idx = {r: rng.choice(members[r], size=int(c), p=weights[r]) for r, c in zip(roles, counts, strict=True)}
        picked.append(idx)
        windows.append({r: rates[i] for r, i in idx.items()})
    return Stream(
        scenario.name,
        judge,
        windows,
        picked,
        change_start,
        judge_from=judge_from,
        judge_changed=judge_from is not None,
        target_drop=drops,
    )


def achieved_drops(pool: Pool, scenario: Scenario, streams: int, seed: int = 0) -> dict:
    """The oracle rate (pooled over roles, per window) after the change minus before it, over `streams`
    streams: mean and Monte Carlo standard error, against the target (for drift: the last window's drop,
    measured on the last window alone); and the same for every judge's calibrated rate of the very
    conversations drawn (`judges`: how much of the reviewers' drop each judge sees)."""
    rng = np.random.default_rng(seed)
    rates = {"oracle": pool.oracle, **pool.judges}
    diffs = {j: [] for j in rates}
    for _ in range(streams):
        s = draw_stream(pool, scenario, rng, "oracle")
        picked = [np.concatenate(list(w.values())) for w in s.picked]
        start = s.change_start if s.change_start is not None else WINDOWS // 2
        for j, r in rates.items():
            rate = np.array([r[i].mean() for i in picked])
            after = rate[-1:] if scenario.change == "drift" else rate[start:]
            diffs[j].append(after.mean() - rate[:start].mean())
    d = np.array(diffs.pop("oracle"))
    return {
        "target": -float(scenario.size),
        "achieved": round(float(d.mean()), 4),
        "monte_carlo_se": round(float(d.std(ddof=1) / np.sqrt(len(d))), 4),
        "streams": streams,
        "judges": {j: round(float(np.mean(v)), 4) for j, v in diffs.items()},
    }


# ---------------------------------------------------------------- summary


def summary(pool: Pool) -> dict:
    """Sizes, per-role oracle and calibrated mean rates (original and changed judge), and the std of the
    per-conversation rates per judge."""
    out = {
        "conversations": len(pool.oracle),
        "canary": int(pool.canary.sum()),
        "build_seconds": pool.seconds,
        "std_per_conversation": {"oracle": round(float(pool.oracle.std()), 4)}
        | {j: round(float(r.std()), 4) for j, r in pool.judges.items()}
        | {f"{j}_changed": round(float(r.std()), 4) for j, r in pool.changed.items()},
        "roles": {},
    }
    for r in np.unique(pool.role):
        mine = pool.role == r
        out["roles"][str(r)] = {
            "conversations": int(mine.sum()),
            "oracle": round(float(pool.oracle[mine].mean()), 4),
            **{j: round(float(v[mine].mean()), 4) for j, v in pool.judges.items()},
            **{f"{j}_changed": round(float(v[mine].mean()), 4) for j, v in pool.changed.items()},
        }
    c = pool.canary_turns
    out["canary_paired_mean_difference"] = {
        j: round(float((c.changed[j] - c.original[j]).mean()), 4) for j in c.original
    }
    for j, r in pool.judges.items():
        out[f"pearson_oracle_{j}"] = round(float(np.corrcoef(pool.oracle, r)[0, 1]), 4)
    return out


def main() -> None:
    from _results import add_results_argument, emit  # benchmarks/_results.py

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--anchors", type=Path, default=ANCHORS)
    parser.add_argument("--streams", type=int, default=500)
    add_results_argument(parser, "monitor_streams")
    args = parser.parse_args()
    start = time.perf_counter()
    pools = load_pools(args.cache, args.anchors)
    out = {
        "load_pools_seconds": round(time.perf_counter() - start, 1),
        "settings": {"folds": FOLDS, "ensemble": ENSEMBLE},
    }
    for pool in pools:
        out[pool.source] = summary(pool)
        out[pool.source]["oracle_drops"] = {
            name: achieved_drops(pool, s, args.streams)
            for name, s in SCENARIOS.items()
            if s.change in ("drop", "drift") or s.mix == "moving"
        }
    emit(args.results_name, out, indent=1)


if __name__ == "__main__":
    main()
