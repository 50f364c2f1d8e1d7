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
import dataclasses
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"
CACHE = ROOT / "benchmarks" / ".cache"
WINDOWS = 52
FOLDS = 5
ENSEMBLE = 8
"""Members per fold: the fewest with which the ensemble is recalibrated (Settings.recalibrate_min_members)."""
CANARY = 40
"""Conversations per pool frozen as the canary (at most a fifth of the pool), never drawn into a stream."""
SHIFT_SHARE = (0.15, 0.45)
SHIFT_TEMPERATURE = 1.3
RESTYLE_TEMPERATURE = 1.5
RESTYLE_TILT = -0.3
FAIL_RATE = 0.3
"""null_failing_role: the worst role fails if its oracle rate is under this; else the failing role is made of
the pool's conversations with oracle under FAIL_BELOW."""
FAIL_BELOW = 0.5
FAIL_SHARE = 0.2
"""The failing role's share of a window."""
CACHE_VERSION = 2


@dataclass
class Canary:
    """The frozen canary conversations of a pool: indices into the pool, their oracle rates and each judge's
    calibrated rates under the original and the changed judge (same conversations, paired)."""

    index: np.ndarray
    oracle: np.ndarray
    original: dict[str, np.ndarray]
    changed: dict[str, np.ndarray]


@dataclass
class Pool:
    source: str
    conversation: np.ndarray
    role: np.ndarray
    oracle: np.ndarray
    judges: dict[str, np.ndarray]
    changed: dict[str, np.ndarray]
    canary: np.ndarray
    """(N,) bool: the conversation is in the canary set (never drawn into a stream)."""
    turns: np.ndarray | None = None
    """(N,) the conversation's judged turns (its rates are means over them; a monitor's totals are rate x turns)."""
    seconds: float = 0.0
    """How long building the pool took (cv, and gathering the bundled judge when it was not gathered yet)."""

    @property
    def canary_turns(self) -> Canary:
        index = np.flatnonzero(self.canary)
        return Canary(
            index,
            self.oracle[index],
            {j: r[index] for j, r in self.judges.items()},
            {j: r[index] for j, r in self.changed.items()},
        )

    def rates(self, judge: str, changed: bool = False) -> np.ndarray:
        """(N,) per-conversation rates of `judge` ("oracle": the reviewers', unchanged by a judge change)."""
        if judge == "oracle":
            return self.oracle
        if judge not in self.judges:
            raise KeyError(f"pool {self.source} has no judge {judge!r}; it has {sorted(self.judges)} and 'oracle'")
        return (self.changed if changed else self.judges)[judge]


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


# ---------------------------------------------------------------- judge changes (the same turns, another judge)


def _valid(probs: np.ndarray, present: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    k = probs.shape[-1]
    return (np.arange(k)[None, :] < n_options[:, None])[None] & present[..., None]


def _tempered(probs: np.ndarray, valid: np.ndarray, temperature: float) -> np.ndarray:
    logp = np.where(valid, np.log(np.clip(probs, 1e-12, None)) / temperature, -np.inf)
    logp -= logp.max(-1, keepdims=True).clip(-1e30)
    out = np.where(valid, np.exp(logp), 0.0)
    total = out.sum(-1, keepdims=True)
    return np.where(total > 0, out / np.where(total > 0, total, 1), 0.0)


def shifted_down(probs, present, n_options, seed: int = 0) -> np.ndarray:
    """(n, Q, K) a harsher, flatter judge: per turn a share s ~ U(SHIFT_SHARE) of every option's mass moves
    one option down (the lowest keeps its own), on every question, then tempered by SHIFT_TEMPERATURE."""
    s = np.random.default_rng(seed).uniform(*SHIFT_SHARE, size=(len(probs), 1, 1))
    p = probs.astype(np.float64)
    out = (1 - s) * p
    out[..., :-1] += s * p[..., 1:]  # padding beyond a question's options is zero, so nothing comes from it
    out[..., 0] += s[..., 0] * p[..., 0]
    return _tempered(out, _valid(probs, present, n_options), SHIFT_TEMPERATURE).astype(probs.dtype)


# ---------------------------------------------------------------- pools


def oof_rates(ds, probs_by_judge: dict[str, np.ndarray], seed: int = 0) -> dict[str, np.ndarray]:
    """(N_items,) out-of-fold calibrated P(target >= adheres_at) of every item, averaged over the reviewers
    with training labels in its fold, for each set of distributions in `probs_by_judge` (the same turns): the
    fold models are trained once on ds (its own distributions), then read every set."""
    import torch

    from calibration.data.splits import group_folds
    from calibration.decide import default_adheres_at
    from calibration.evaluation.out_of_fold import oof_members
    from calibration.model.ensemble import member_logproba, target_recalibration
    from calibration.model.recalibrate import pool
    from calibration.model.settings import Settings
    from calibration.model.train import model_inputs

    settings = dataclasses.replace(Settings(), ensemble=ENSEMBLE).checked()
    t = ds.target_index
    k = int(ds.n_options[t])
    adheres = ds.option_values()[t, :k] >= default_adheres_at(ds.rubric.questions[t])
    fold_of_item = group_folds(ds.groups, FOLDS, 0)
    fold_of_row = fold_of_item[ds.label_item]
    members = oof_members(ds, settings, fold_of_row, FOLDS, seed)
    spec = model_inputs(ds, settings)[0]  # the training data's spec: a changed judge is placed on its scale
    tests, recal = {}, {}
    for f in range(FOLDS):
        mine = [m for m, g in enumerate(members.fold) if g == f]
        items = np.flatnonzero(fold_of_item == f)
        judges = np.unique(ds.label_judge[fold_of_row != f])
        tests[f] = (mine, items, judges)
        recal[f] = target_recalibration(
            ds, settings, [members.val_rows[m] for m in mine], [members.val_logp[m] for m in mine]
        )
    out = {}
    for name, probs in probs_by_judge.items():
        X = torch.from_numpy(dataclasses.replace(ds, probs=probs).features(spec))
        rate = np.zeros(len(ds.items))
        for f, (mine, items, judges) in tests.items():
            pairs_item, pairs_judge = np.repeat(items, len(judges)), np.tile(judges, len(items))
            logp = member_logproba(
                members.net, X, [pairs_item] * members.net.n_models, [pairs_judge] * members.net.n_models
            )
            p = pool(np.stack([logp[m][:, t] for m in mine]), settings.pool)
            if recal[f] is not None:
                p = recal[f].apply_target(p)
            rate[items] = p[:, :k][:, adheres].sum(-1).reshape(len(items), len(judges)).mean(1)
        out[name] = rate
    return out


def _per_conversation(ds, item_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(conversation ids, the mean of `item_values` over each conversation's turns)."""
    keys = ds.conversation_keys()
    ids, inv = np.unique(keys, return_inverse=True)
    return ids, np.bincount(inv, item_values) / np.bincount(inv)


def _oracle(ds) -> tuple[np.ndarray, np.ndarray]:
    """(conversation ids, reviewers' rate): per labelled turn the reviewers' mean of 1[answer >= adheres_at],
    averaged over the conversation's labelled turns."""
    from calibration.decide import default_adheres_at

    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    value = ds.option_values()[t][ds.answers[rows, t]] >= default_adheres_at(ds.rubric.questions[t])
    item = ds.label_item[rows]
    n = np.bincount(item, minlength=len(ds.items))
    per_turn = np.bincount(item, value.astype(float), minlength=len(ds.items)) / np.maximum(n, 1)
    keys = ds.conversation_keys()
    labelled = n > 0
    ids, inv = np.unique(keys[labelled], return_inverse=True)
    return ids, np.bincount(inv, per_turn[labelled]) / np.bincount(inv)


def build_pool(source: str, ds, roles: dict[str, str], judge: str, changed_probs: np.ndarray, seconds0: float) -> Pool:
    """A pool from a dataset: `roles` maps a conversation id to its role."""
    start = time.perf_counter()
    rates = oof_rates(ds, {"original": ds.probs, "changed": changed_probs})
    ids, original = _per_conversation(ds, rates["original"])
    _, changed = _per_conversation(ds, rates["changed"])
    oracle_ids, oracle = _oracle(ds)
    keep = np.isin(ids, oracle_ids)  # conversations without a label have no truth: left out of the pool
    ids, original, changed = ids[keep], original[keep], changed[keep]
    assert (oracle_ids == ids).all()
    keys = ds.conversation_keys()
    turns = np.array([np.sum(keys == c) for c in ids])
    n_canary = min(CANARY, len(ids) // 5)
    canary = np.zeros(len(ids), bool)
    canary[np.random.default_rng(0).choice(len(ids), n_canary, replace=False)] = True
    return Pool(
        source,
        ids.astype(str),
        np.array([roles[c] for c in ids]).astype(str),
        oracle,
        {judge: original},
        {judge: changed},
        canary,
        turns,
        seconds=round(seconds0 + time.perf_counter() - start, 1),
    )


def anchors_pool(anchors: Path = ANCHORS) -> Pool:
    from calibration.data.dataset import load_dataset
    from calibration.data.importers import import_llm_rubric

    with tempfile.TemporaryDirectory() as tmp:
        import_llm_rubric(anchors / "llm_evaluations.tsv", anchors / "human_judgments.tsv", tmp)
        ds = load_dataset(tmp)
    ids = np.unique(ds.conversation_keys())
    roles = {c: c.split("_")[0] for c in ids}
    return build_pool("anchors", ds, roles, "gpt35", shifted_down(ds.probs, ds.present, ds.n_options), 0.0)


def bundled_pool(work: Path) -> Pool:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from far_shift import restyled
    from shift import bundled_dir

    from calibration.data.dataset import load_dataset
    from calibration.release.roles import roles_of_release

    start = time.perf_counter()
    ds = load_dataset(bundled_dir(work))  # gathers the embedding judge once into work/role_adherence
    gathered = time.perf_counter() - start
    roles = {c: r for r, convs in roles_of_release(ROOT / "data" / "role_adherence").items() for c in convs}
    changed = restyled(ds.probs, ds.present, ds.n_options, RESTYLE_TEMPERATURE, RESTYLE_TILT)
    return build_pool("bundled", ds, roles, "embedding", changed, gathered)


def _save(pool: Pool, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"judge__{j}": r for j, r in pool.judges.items()} | {f"changed__{j}": r for j, r in pool.changed.items()}
    tmp = path.with_suffix(".tmp.npz")
    np.savez(
        tmp,
        conversation=pool.conversation,
        role=pool.role,
        oracle=pool.oracle,
        canary=pool.canary,
        turns=pool.turns,
        seconds=pool.seconds,
        version=CACHE_VERSION,
        **arrays,
    )
    tmp.replace(path)  # whole or absent: an interrupted build is rebuilt, never half-read


def _load(source: str, path: Path) -> Pool | None:
    if not path.exists():
        return None
    with np.load(path) as z:
        if int(z["version"]) != CACHE_VERSION:
            return None
        judges = {k.split("__", 1)[1]: z[k] for k in z.files if k.startswith("judge__")}
        changed = {k.split("__", 1)[1]: z[k] for k in z.files if k.startswith("changed__")}
        return Pool(
            source,
            z["conversation"],
            z["role"],
            z["oracle"],
            judges,
            changed,
            z["canary"],
            z["turns"],
            float(z["seconds"]),
        )


def load_pools(cache: Path = CACHE, anchors: Path = ANCHORS, sources=("anchors", "bundled")) -> list[Pool]:
    """The pools of `sources`, built once (cv, and the bundled embedding judge gathered into cache/work) and
    read from cache/monitor_streams_SOURCE.npz after."""
    builders = {"anchors": lambda: anchors_pool(anchors), "bundled": lambda: bundled_pool(cache / "work")}
    pools = []
    for source in sources:
        build = builders[source]
        path = cache / f"monitor_streams_{source}.npz"
        pool = _load(source, path)
        if pool is None:
            pool = build()
            _save(pool, path)
        pools.append(pool)
    return pools


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
