"""The pools behind benchmarks/monitor_streams.py: real conversations with their reviewers' rate and each
judge's out-of-fold calibrated rate, before and after a judge change, built once with the project's own cv
machinery and cached (the module docstring of monitor_streams.py says how and why)."""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from dataclasses import dataclass
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
    from calibration.evaluation.out_of_fold import oof_members
    from calibration.model.ensemble import member_logproba, target_recalibration
    from calibration.model.recalibrate import pool
    from calibration.model.settings import Settings
    from calibration.model.train import model_inputs
    from calibration.release.decide import default_adheres_at

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


def oracle_rates(ds) -> tuple[np.ndarray, np.ndarray]:
    """(conversation ids, reviewers' rate): per labelled turn the reviewers' mean of 1[answer >= adheres_at],
    averaged over the conversation's labelled turns."""
    from calibration.release.decide import default_adheres_at

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
    oracle_ids, oracle = oracle_rates(ds)
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
