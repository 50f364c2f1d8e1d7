"""Stratified vs uniform release samples (`suggest purpose=estimate strata=role`), where the truth is known.
Prints JSON.

The bundled role-adherence benchmark (offline embedding judge): half of every role's conversations (seeded)
train the calibrator (the defaults), the other half is a release of 4 roles whose every label is known.
Each draw labels n conversations: uniformly at random (estimate's default), or stratified by role with
proportional allocation (what suggest ships) or Neyman allocation (n_h proportional to N_h S_h, S_h the
ppi residual spread of the role measured on the whole release: an oracle, the best Neyman could do).
Coverage at nominal 90% and mean width of the ppi rate interval, and of humans-only. A stratum's ppi weighs
the calibrator from STRATUM_LAMBDA_FROM labelled conversations on (calibration/release/estimate.py), and the
strata combine with each stratum's own degrees of freedom, as `estimate` does.

    python benchmarks/estimate_strata.py [--draws 2000] [--n 12 20 40] [--work DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _results import add_results_argument, emit
from estimate import train, write_subset
from scipy import stats
from shift import bundled_dir

from calibration.data.dataset import load_dataset
from calibration.model.files import load_model
from calibration.release.estimate import STRATUM_LAMBDA_FROM
from calibration.release.intervals import _wilson, ratio_interval
from calibration.release.turns import judge_probabilities, reviewer_predictions


def _allocation(sizes: np.ndarray, n: int, weights: np.ndarray) -> np.ndarray:
    share = n * weights / weights.sum()
    alloc = np.minimum(np.maximum(np.floor(share).astype(int), 2), sizes)
    while alloc.sum() < n:
        alloc[int(np.argmax(np.where(alloc < sizes, share - alloc, -np.inf)))] += 1
    while alloc.sum() > n:
        alloc[int(np.argmax(np.where(alloc > 2, alloc - share, -np.inf)))] -= 1
    return alloc


def _interval(Y, G, m, N, lam, alpha):
    n = Y.shape[1]
    d, fpc = np.full(Y.shape, N / n), np.full(Y.shape, 1 - n / N)
    r = ratio_interval(Y, G, m, d, fpc, alpha=alpha, lam=lam, bounds=(0.0, 1.0), n_turns=m.sum(-1))
    return r


def _ppi(Y, G, m, N, alpha, lam_from=0):
    """humans-only and ppi; ppi is humans-only below lam_from conversations (a stratum, as estimate does)."""
    humans = _interval(Y, G, m, N, 0.0, alpha)
    return humans, (_interval(Y, G, m, N, None, alpha) if Y.shape[1] >= lam_from else humans)


def _summary(low, high, truth) -> dict:
    return {"coverage": float(((low <= truth) & (truth <= high)).mean()), "mean_width": float((high - low).mean())}


def draws_of(Y, G, m, role, truth, n, draws, alpha, rng) -> dict:
    N = len(Y)
    out = {}
    idx = np.argsort(rng.uniform(size=(draws, N)), axis=1)[:, :n]
    humans, ppi = _ppi(Y[idx], G[idx], m[idx], N, alpha)
    out["uniform"] = {
        "ppi": _summary(ppi["low"], ppi["high"], truth),
        "humans": _summary(humans["low"], humans["high"], truth),
    }
    names = np.unique(role)
    sizes = np.array([(role == r).sum() for r in names])
    share = np.array([m[role == r].sum() for r in names]) / m.sum()
    spread = []
    for r in names:
        k = role == r
        a = Y[k] - Y[k].sum() / m[k].sum() * m[k]
        spread.append(np.std(a, ddof=1))
    for plan, weights in (("proportional", sizes.astype(float)), ("neyman_oracle", sizes * np.array(spread) + 1e-9)):
        alloc = _allocation(sizes, n, weights)
        turns = 0.0
        est_h = {"humans": 0.0, "ppi": 0.0}
        var_h = {"humans": 0.0, "ppi": 0.0}
        dens_h = {"humans": 0.0, "ppi": 0.0}
        for r, n_h, w in zip(names, alloc, share, strict=True):
            members = np.flatnonzero(role == r)
            pick = members[np.argsort(rng.uniform(size=(draws, len(members))), axis=1)[:, :n_h]]
            h, p = _ppi(Y[pick], G[pick], m[pick], len(members), alpha, STRATUM_LAMBDA_FROM)
            for key, iv in (("humans", h), ("ppi", p)):
                est_h[key] = est_h[key] + w * iv["estimate"]
                term = (w * iv["se"]) ** 2
                var_h[key] = var_h[key] + term
                dens_h[key] = dens_h[key] + term**2 / np.maximum(iv["df"], 1)  # the stratum's own
            turns = turns + m[pick].sum(-1)
        out[plan] = {"allocation": {str(r): int(a) for r, a in zip(names, alloc, strict=True)}}
        for key in ("ppi", "humans"):
            with np.errstate(divide="ignore", invalid="ignore"):
                df = np.where(dens_h[key] > 0, var_h[key] ** 2 / dens_h[key], n - 1)
            q = stats.t.ppf(1 - alpha / 2, df)
            low, high = _wilson(est_h[key], var_h[key], q, turns, 1.0)
            out[plan][key] = _summary(low, high, truth)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--n", type=int, nargs="+", default=[12, 20, 40])
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--work", type=Path, default=None)
    add_results_argument(parser, "estimate_strata")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="estimate-strata-"))
    start = time.perf_counter()
    src = bundled_dir(work)
    convs = np.array(sorted(set(load_dataset(src).items["conversation_id"])), dtype=object)
    role_of = pd.Series(convs).str.rsplit("-", n=1).str[0].to_numpy()
    rng = np.random.default_rng(0)
    train_set, release = set(), set()
    for r in sorted(set(role_of)):
        members = rng.permutation(convs[role_of == r])
        train_set |= set(members[: len(members) // 2])
        release |= set(members[len(members) // 2 :])
    model_dir = train(write_subset(src, work / "strata-train", train_set), work / "strata-model")
    release_dir = write_subset(src, work / "strata-release", release)
    model = load_model(model_dir)
    ds = load_dataset(release_dir, rubric=model.rubric)
    X = torch.from_numpy(ds.features(model.spec))
    preds = reviewer_predictions(
        model, ds, X, ds.target_index, kind="rate", adheres_at=3.0, proba=judge_probabilities(model, X)
    )
    full = preds.sample()
    ids = np.unique(preds.conversation)
    role = pd.Series(ids).str.rsplit("-", n=1).str[0].to_numpy()
    truth = preds.human_mean()
    result = {
        "alpha": args.alpha,
        "draws": args.draws,
        "truth": truth,
        "n_release_conversations": len(ids),
        "roles": {str(r): int((role == r).sum()) for r in np.unique(role)},
        "by_n": {},
    }
    for n in args.n:
        result["by_n"][str(n)] = draws_of(
            full.Y, full.F - full.V, full.m_lab, role, truth, n, args.draws, args.alpha, np.random.default_rng(n)
        )
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(f"estimate_strata: done ({result['seconds']}s)", file=sys.stderr)
    emit(args.results_name, result)


if __name__ == "__main__":
    main()
