"""Release estimates where the truth is known: coverage and width of the humans-only and the
prediction-powered (PPI++) intervals of `role-rubric estimate`, and the calibrator's and the raw judge's bias.
Prints JSON.

Each benchmark trains a calibrator (the defaults) on one part of a labelled dataset and treats the rest
as a release whose every label is known, so its true adherence rate and mean target answer are known.
Each draw labels n conversations of the release picked uniformly at random (their labels only; the others
hidden) and computes both intervals at nominal 90%; coverage is the share of draws whose interval holds
the truth. n is skipped where the release has fewer than n + 1 conversations.
- llm_rubric_in_distribution: LLM-Rubric's synthetic dialogues, a random half trained on, the other half
  the release;
- llm_rubric_shift_down / _up: the covariate-shift splits of benchmarks/shift.py (train on the dialogues
  whose judge-expected Q0 is in the top 70% / bottom 70%, the release is the other 30%);
- new_chatbot: the bundled role-adherence benchmark (offline embedding judge), leave one role out: the
  release is a role (chatbot) the calibrator never saw, for each of the 4 roles, pooled;
- far_shift / far_shift_harder: the bundled benchmark split in two halves within each role
  (benchmarks/far_shift.py); the calibrator trains on the old half, and on the new half (the release, whole
  and per role) the judge answers in another style (`FAR_SHIFT`): far from the training data.
Where a release has no more possible samples of n conversations than --coverage-draws (a far-shift role:
14 conversations, 1,001 samples of 10), the coverage cells take every sample once, an exact coverage
(`exact_every_sample`; the Monte-Carlo sds then describe the spread over samples, not an error). Every cell
holds the paired difference of the ppi and the humans-only coverage on the same draws with its
Monte-Carlo sd, and `before_issue_51`: the ppi interval as `estimate` reported it before (the narrower of
it and humans-only kept where the cross-fitted lambda averaged >= 0.5, the jackknife's delete-one estimates
with one lambda tuned on each), on the same draws.
`same_truth_difference_covers_0`: the release split at random into two halves, two releases of the same
chatbot, n conversations labelled in each and compared as `baseline=` does; the share of draws whose
difference interval covers 0 (n is skipped where a half has n conversations or fewer).

`--coverage-draws` (default: --draws) draws the coverage and width cells alone more often: they are
vectorised and cheap, and at the 0.885 bar a cell of 4,000 draws (Monte-Carlo sd 0.005) can fall a point
short by luck; the planner and the peeking simulations keep --draws.

    python benchmarks/estimate.py [--draws 2000] [--coverage-draws 20000] [--n 10 20 40 80]
        [--only llm_rubric_in_distribution,...] [--work DIR] [--results-name estimate]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _results import add_results_argument, emit  # benchmarks/_results.py: the JSON and its provenance
from far_shift import TEMPERATURE, TILT, new_release_conversations, restyled
from scipy import stats
from shift import bundled_dir, llm_rubric_dir  # the same data as benchmarks/shift.py

from calibration.data.dataset import load_dataset
from calibration.model.files import load_model
from calibration.release.cv_spread import read_cv_agreement, spread_from_cv
from calibration.release.inference import difference, ppi_mean
from calibration.release.intervals import confidence_sequence, ratio_interval
from calibration.release.planning import (
    PPI_LAM_DF,
    half_width,
    labels_needed,
    predicted_rate,
    spread_from_calibrator,
    spread_from_sample,
)
from calibration.release.sequential import T_STAR
from calibration.release.turns import judge_probabilities, reviewer_predictions

ROOT = Path(__file__).resolve().parents[1]
DIFFERENCE_DRAWS = 500  # the same-truth difference re-reads the labels per draw: fewer draws
BENCHMARKS = ("llm_rubric_in_distribution", "llm_rubric_shift_down", "llm_rubric_shift_up", "new_chatbot")
FAR_SHIFT = {  # name -> (temperature, tilt, mirror) of the new release's judge (benchmarks/far_shift.py `restyled`)
    "far_shift": (TEMPERATURE, TILT, 0.0),
    "far_shift_harder": (0.6, 0.9, 0.35),
}
"""far_shift_harder: sharper (T < 1, so the distributions' shape changes the other way), tilted further
towards the higher options, and on a share `mirror` of the probability mass answering the scale reversed
(bimodal where the judge was sure: a shape the calibrator never saw)."""


def write_subset(src: Path, dst: Path, conversations: set[str]) -> Path:
    """A dataset directory with the conversations named (items without labels dropped)."""
    dst.mkdir(parents=True, exist_ok=True)
    read = {"dtype": {"conversation_id": str, "turn": str, "judge_id": str}, "keep_default_na": False}
    llm, labels = pd.read_csv(src / "llm.csv", **read), pd.read_csv(src / "labels.csv", **read)
    labels = labels[labels.conversation_id.isin(conversations)]
    labelled = set(zip(labels.conversation_id, labels.turn, strict=True))
    keep = [(c, t) in labelled for c, t in zip(llm.conversation_id, llm.turn, strict=True)]
    llm[keep].to_csv(dst / "llm.csv", index=False)
    labels.to_csv(dst / "labels.csv", index=False)
    (dst / "rubric.yaml").write_bytes((src / "rubric.yaml").read_bytes())
    return dst


def train(data: Path, out: Path, seed: int = 0) -> Path:
    if (out / "model.json").exists():  # --work is a cache: a model trained on the same split is reused
        return out
    subprocess.run(
        [sys.executable, "-m", "calibration.cli", "train", f"data={data}", f"out={out}", f"seed={seed}"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out


def cross_validated(data: Path, out: Path, seed: int = 0) -> Path:
    """`role-rubric cv` of the training part (the defaults, 5 folds, no baselines: the planner reads the
    calibrated rows only), as the folder `suggest cv=` reads; cached in --work like the model."""
    if (out / "predictions.csv").exists():
        return out
    from calibration.data.union import load_training_data
    from calibration.evaluation.crossval import cross_validate, write_cv_folder
    from calibration.model.settings import Settings

    training = load_training_data(data)
    result = cross_validate(training.ds, Settings(), folds=5, seed=seed, baselines=False)
    out.mkdir(parents=True, exist_ok=True)
    write_cv_folder(out, training.ds, Settings(), result, folds=5, seed=seed, extra={"judge": training.judge})
    return out


def splits(name: str, src: Path) -> list[tuple[str, set[str], set[str]]]:
    """(label, training conversations, release conversations) of a benchmark."""
    ds = load_dataset(src)
    convs = np.array(sorted(set(ds.items["conversation_id"])), dtype=object)
    if name == "llm_rubric_in_distribution":
        perm = np.random.default_rng(0).permutation(len(convs))
        half = len(convs) // 2
        return [("half", set(convs[perm[:half]]), set(convs[perm[half:]]))]
    if name.startswith("llm_rubric_shift"):
        t = ds.target_index
        expected = (ds.probs[:, t] * ds.option_values()[t]).sum(-1)
        per_conv = pd.Series(expected).groupby(ds.items["conversation_id"].to_numpy()).mean().sort_values(kind="stable")
        n_test = int(round(0.3 * len(per_conv)))
        order = list(per_conv.index)
        test = set(order[:n_test] if name.endswith("down") else order[-n_test:])
        return [("30%", set(convs) - test, test)]
    if name in FAR_SHIFT:  # the old half trained on; the new half, each role's and all, is the release
        first_item = np.unique(ds.groups, return_index=True)[1]
        ids = ds.items["conversation_id"].to_numpy()[first_item]
        new = new_release_conversations(ds)
        trained, release = set(ids[~new]), set(ids[new])
        role = np.array([c.rsplit("-", 1)[0] for c in ids])
        return [("all", trained, release)] + [(r, trained, set(ids[new & (role == r)])) for r in sorted(set(role))]
    if name == "new_chatbot":
        role = pd.Series(convs).str.rsplit("-", n=1).str[0].to_numpy()
        return [(r, set(convs[role != r]), set(convs[role == r])) for r in sorted(set(role))]
    raise ValueError(name)


def draws_of(
    release_dir: Path,
    model_dir: Path,
    n_values,
    draws: int,
    alpha: float,
    seed: int,
    cv_dir: Path | None = None,
    coverage_draws: int | None = None,
    restyle: tuple[float, float, float] | None = None,
) -> dict:
    """Coverage, width and effective labels over `draws` samples of n conversations, per quantity, all draws
    of one n at once (calibration/release/intervals.py is vectorised over samples); the intervals before
    issue 36 (lam tuned on the same sample, the narrower of ppi and humans kept, Student-t) beside them."""
    model = load_model(model_dir)
    ds = load_dataset(release_dir, rubric=model.rubric)
    if restyle is not None:
        ds = far_release(ds, *restyle)
    X = torch.from_numpy(ds.features(model.spec))
    proba = judge_probabilities(model, X)
    out: dict = {}
    for kind in ("rate", "mean"):
        preds = reviewer_predictions(model, ds, X, ds.target_index, kind=kind, adheres_at=3.0, proba=proba)
        truth = preds.human_mean()
        labelled_items = np.unique(preds.row_item)
        convs = np.unique(preds.conversation)
        row_conv = preds.conversation[preds.row_item]
        full = preds.sample()  # every conversation labelled: a draw's totals are these, indexed
        bounds = target_bounds(ds, kind)
        rng = np.random.default_rng(seed)
        per_n: dict = {}
        for n in n_values:
            if n + 1 > len(convs):
                per_n[str(n)] = None
                continue
            idx = np.argsort(rng.uniform(size=(coverage_draws or draws, len(convs))), axis=1)[:, :n]
            exact = math.comb(len(convs), n) <= len(idx)  # few possible samples: each once, no Monte-Carlo noise
            if exact:
                idx = np.array(list(itertools.combinations(range(len(convs)), n)))
            per_n[str(n)] = _coverage(full, idx, truth, alpha, bounds) | {"exact_every_sample": exact}
            diff = [
                _same_truth_difference(preds, convs, row_conv, n, alpha, rng)
                for _ in range(min(draws, DIFFERENCE_DRAWS))
                if 2 * (n + 1) <= len(convs)
            ]
            per_n[str(n)]["same_truth_difference_covers_0"] = float(np.mean(diff)) if diff else None
        extra = {}
        if kind == "rate":
            extra["peeking"] = _peeking(full, truth, alpha, bounds, draws, seed)
            extra["peeking"]["fail_if_worse"] = _peeking_worse(full, alpha, bounds, draws, seed)
            sources = _plan_sources(preds, model, cv_dir)
            extra["planner"] = _planner(full, alpha, bounds, draws, seed, sources) if len(convs) > 45 else None
        out[kind] = {
            **extra,
            "truth": truth,
            "calibrator_bias": float(preds.calibrator[labelled_items].mean() - truth),
            "raw_judge_bias": float(preds.raw[labelled_items].mean() - truth),
            "n_release_conversations": int(len(convs)),
            "n_release_turns": int(len(labelled_items)),
            "bounds": list(bounds),
            "by_n": per_n,
        }
    return out


def far_release(ds, temperature: float, tilt: float, mirror: float):
    """The release as the restyled judge reads it (every item: the release is the far half)."""
    probs = restyled(ds.probs, ds.present, ds.n_options, temperature, tilt)
    if mirror:
        k = np.arange(probs.shape[-1])
        rev = np.clip(ds.n_options[:, None] - 1 - k[None, :], 0, probs.shape[-1] - 1)  # (Q, K) reversed option
        flipped = np.take_along_axis(probs, np.broadcast_to(rev, probs.shape), axis=-1)
        probs = ((1 - mirror) * probs + mirror * flipped).astype(probs.dtype)
    return dataclasses.replace(ds, probs=probs)


def _arrays(full, idx):
    N, n = len(full.Y), idx.shape[1]
    return (
        full.Y[idx],
        (full.F - full.V)[idx],
        full.m_lab[idx],
        np.full(idx.shape, N / n),
        np.full(idx.shape, 1 - n / N),
    )


def target_bounds(ds, kind: str) -> tuple[float, float]:
    """The quantity's range: [0, 1] for the rate, the target's option values for the mean answer."""
    if kind == "rate":
        return (0.0, 1.0)
    values = ds.option_values()[ds.target_index, : int(ds.n_options[ds.target_index])]
    return (float(np.min(values)), float(np.max(values)))


def humans_and_ppi(full, idx, alpha, bounds) -> tuple[dict, dict]:
    """The humans-only and `estimate`'s ppi interval for every row of idx."""
    arrays = _arrays(full, idx)
    n_turns = arrays[2].sum(-1)
    humans = ratio_interval(*arrays, alpha=alpha, lam=0.0, bounds=bounds, n_turns=n_turns)
    return humans, ratio_interval(*arrays, alpha=alpha, lam=None, bounds=bounds, n_turns=n_turns)


def _ppi(full, idx, alpha, bounds, process=False) -> dict:
    """`estimate`'s ppi interval for every row of idx (ppi_mean: cross-fitted lam, whatever it is); process:
    without the finite-population factor (population=process)."""
    arrays = _arrays(full, idx)
    if process:
        arrays = (*arrays[:4], np.ones(idx.shape))
    ppi = ratio_interval(*arrays, alpha=alpha, lam=None, bounds=bounds, n_turns=arrays[2].sum(-1))
    fpc = np.full(len(idx), 1.0 if process else 1 - idx.shape[1] / len(full.Y))  # as _arrays sets it
    return {k: ppi[k] for k in ("estimate", "low", "high", "se")} | {
        "se_process": ppi["se"] / np.sqrt(np.where(fpc > 0, fpc, 1))
    }


def _peeking(full, truth, alpha, bounds, draws, seed) -> dict:
    """A team labels 5 conversations at a time (from 10) up to 80 (or the release less one) and re-runs
    `estimate` after each batch, stopping when the gate decides. The gate's threshold is the true rate, so
    every decision is a false one: the share of teams that ever decide is the false-decision rate, <= alpha
    for a valid procedure."""
    N = len(full.Y)
    looks = list(range(10, min(80, N - 1) + 1, 5))
    perm = np.argsort(np.random.default_rng(seed + 7).uniform(size=(draws, N)), axis=1)
    decided = {"fixed_n": np.zeros(draws, bool), "sequential": np.zeros(draws, bool)}
    running = [np.full(draws, -np.inf), np.full(draws, np.inf)]
    widths = {}
    for n in looks:
        r = _ppi(full, perm[:, :n], alpha, bounds)
        decided["fixed_n"] |= (r["low"] > truth) | (r["high"] < truth)
        low, high = confidence_sequence(r["estimate"], r["se_process"], n, alpha=alpha, t_star=T_STAR, bounds=bounds)
        running = [np.maximum(running[0], low), np.minimum(running[1], high)]
        decided["sequential"] |= (running[0] > truth) | (running[1] < truth)
        if n in (20, 40):
            widths[str(n)] = {"fixed_n": float((r["high"] - r["low"]).mean()), "sequential": float((high - low).mean())}
    return {
        "looks": looks,
        "threshold": "the true rate",
        "false_decisions": {k: float(v.mean()) for k, v in decided.items()},
        "mean_width": widths,
    }


def _peeking_worse(full, alpha, bounds, draws, seed) -> dict:
    """`fail_if_worse` looked at after every batch: a baseline of 30 conversations is labelled once; the
    release's labels grow by 5 (from 10) and the gate fails when the difference's upper bound is below 0. Both
    are samples of the same release (no true difference; process level), so every "worse" is false."""
    N = len(full.Y)
    base_n = 30
    looks = list(range(10, min(80, N - base_n) + 1, 5))
    if not looks:  # a release too small for a baseline beside 10 labelled conversations
        return None
    perm = np.argsort(np.random.default_rng(seed + 13).uniform(size=(draws, N)), axis=1)
    base = _ppi(full, perm[:, :base_n], alpha, bounds, process=True)
    half_base = _ppi(full, perm[:, :base_n], alpha / 2, bounds, process=True)
    decided = {"fixed_n": np.zeros(draws, bool), "sequential": np.zeros(draws, bool)}
    running_high = np.full(draws, np.inf)
    q = float(stats.norm.ppf(1 - alpha / 2))
    for n in looks:
        r = _ppi(full, perm[:, base_n : base_n + n], alpha, bounds, process=True)
        diff = r["estimate"] - base["estimate"]
        decided["fixed_n"] |= diff + q * np.hypot(r["se"], base["se"]) < 0
        _, high = confidence_sequence(r["estimate"], r["se"], n, alpha=alpha / 2, t_star=T_STAR, bounds=bounds)
        running_high = np.minimum(running_high, high - half_base["low"])
        decided["sequential"] |= running_high < 0
    return {
        "looks": looks,
        "baseline_conversations": base_n,
        "threshold": "no true difference",
        "false_worse_decisions": {k: float(v.mean()) for k, v in decided.items()},
    }


def _plan_sources(preds, model, cv_dir: Path | None) -> dict:
    """The release's spread without its labels: the calibrator alone (taken as calibrated), and corrected by
    the out-of-fold agreement of a cv of the training part (calibration/release/cv_spread.py)."""
    out = {"calibrator_alone": (spread_from_calibrator(preds.conversation, preds.calibrator), None)}
    if cv_dir is not None:
        found = read_cv_agreement(cv_dir, model, 3.0)
        out["cv"] = (spread_from_cv(preds.conversation, preds.calibrator, found, "cv"), found)
    return out


def _planner(full, alpha, bounds, draws, seed, sources=None) -> dict:
    """`suggest purpose=estimate width=W` planned from a pilot of 10 labelled conversations; the team then labels
    up to the planned n (the pilot included). W: the expected ppi half-width at 30 conversations from the whole
    release's spread. hit: the interval at the planned n is <= W. Two yardsticks for "the n that would have
    sufficed": the oracle n (the fewest conversations at which >= 80% of samples reach W: what a planner that
    knew the release's spread would ask for at the planner's assurance) and, per draw, the fewest of the same
    draw's conversations (in the order labelled) whose interval is <= W. The pilot's spread is scaled for the
    rate it saw against the calibrator's predicted rate of the release, as `suggest` does (planning.py
    `rate_inflation`). `chi2_plan`: the plan that treats the pilot's variance as known (before the F-based
    predictive assurance), for comparison. `sources`: plans made without the release's labels (name ->
    (Spread, cv agreement or None)), one n for every draw, hit rate over the same draws; every plan is floored
    at 10 (the half-widths are tabled from 10)."""
    N = len(full.Y)
    G = full.F - full.V
    whole = spread_from_sample(full.Y, G, full.m_lab, full.m_lab, "the release")
    width = half_width(whole.ppi, whole.m_bar, N, 30, alpha, PPI_LAM_DF)
    prior = predicted_rate(full)  # the calibrator's rate of the release, as `suggest` and `estimate` pass it
    perm = np.argsort(np.random.default_rng(seed + 11).uniform(size=(draws, N)), axis=1)
    planned, chi2_plan = np.empty(draws, int), np.empty(draws, int)
    for i in range(draws):
        pilot = perm[i, :10]
        sp = spread_from_sample(full.Y[pilot], G[pilot], full.m_lab[pilot], full.m_lab, "pilot", prior)
        planned[i] = max(labels_needed(sp.ppi, sp.m_bar, N, width, alpha, df=sp.df, lam_df=PPI_LAM_DF) or N, 10)
        chi2_plan[i] = max(labels_needed(sp.ppi, sp.m_bar, N, width, alpha, lam_df=PPI_LAM_DF) or N, 10)
    half = np.full((draws, N + 1), np.inf)
    for n in range(10, N + 1):
        r = _ppi(full, perm[:, :n], alpha, bounds)
        half[:, n] = (r["high"] - r["low"]) / 2
    rows = np.arange(draws)
    reached = half <= width + 1e-12
    sufficed = np.argmax(reached, axis=1)
    oracle = int(np.argmax(reached.mean(0) >= 0.8)) or N
    # Then `estimate width=W` on the planned sample says how many more where it falls short: label them.
    final = planned.copy()
    for i in np.flatnonzero(~reached[rows, planned]):
        first = perm[i, : planned[i]]
        sp = spread_from_sample(full.Y[first], G[first], full.m_lab[first], full.m_lab, "first stage", prior)
        final[i] = max(
            labels_needed(sp.ppi, sp.m_bar, N, width, alpha, df=sp.df, lam_df=PPI_LAM_DF) or N, planned[i] + 1
        )
    final = np.minimum(final, N)

    def summary(n):
        per_draw = n / np.maximum(sufficed, 1)
        return {
            "n_median": float(np.median(n)),
            "hit_rate": float(reached[rows, n].mean()),
            "over_oracle": {
                "median": float(np.median(n / oracle)),
                "share_above_1_3": float((n > 1.3 * oracle).mean()),
            },
            "over_sufficed": {"median": float(np.median(per_draw)), "share_above_1_3": float((per_draw > 1.3).mean())},
        }

    without_labels = {}
    for name, (sp, found) in (sources or {}).items():
        n = max(labels_needed(sp.ppi, sp.m_bar, N, width, alpha, df=sp.df, lam_df=PPI_LAM_DF) or N, 10)
        without_labels[name] = {
            "n": int(n),
            "n_over_oracle": n / oracle,
            "hit_rate": float(reached[:, n].mean()),
            "s2_ppi_over_release": sp.ppi / whole.ppi,
            "s2_humans_over_release": sp.humans / whole.humans,
        } | ({} if found is None else {"cv_agreement": dataclasses.asdict(found)})
    return {
        "width": width,
        "pilot": 10,
        "without_labels": without_labels,
        "oracle_n": oracle,
        "sufficed_n_median": float(np.median(sufficed)),
        "planned": summary(planned),
        "chi2_plan": summary(chi2_plan),
        "planned_then_estimate_says_more": summary(final),
    }


def _coverage(full, idx, truth, alpha, bounds) -> dict:
    N, n = len(full.Y), idx.shape[1]
    arrays = (
        full.Y[idx],
        (full.F - full.V)[idx],
        full.m_lab[idx],
        np.full(idx.shape, N / n),
        np.full(idx.shape, 1 - n / N),
    )
    n_turns = arrays[2].sum(-1)
    humans = ratio_interval(*arrays, alpha=alpha, lam=0.0, bounds=bounds, n_turns=n_turns)
    ppi = ratio_interval(*arrays, alpha=alpha, lam=None, bounds=bounds, n_turns=n_turns)  # ppi_mean's
    # before issue 51: the jackknife not refitted, and the narrower of ppi and humans-only kept where the
    # cross-fitted lam averaged >= 0.5
    was = ratio_interval(*arrays, alpha=alpha, lam=None, bounds=bounds, n_turns=n_turns, refit=False)
    kept = (was["lam"] >= 0.5) & (was["high"] - was["low"] <= humans["high"] - humans["low"])
    was = {k: np.where(kept, was[k], humans[k]) for k in ("low", "high")}
    old_h = ratio_interval(*arrays, alpha=alpha, lam=0.0)
    old_p = ratio_interval(*arrays, alpha=alpha, lam="tuned")
    narrower = old_h["se"] < old_p["se"]
    old_p = {k: np.where(narrower, old_h[k], old_p[k]) for k in ("low", "high")}

    def cover(x):
        return float(((x["low"] <= truth) & (truth <= x["high"])).mean())

    def width(x):
        return float((x["high"] - x["low"]).mean())

    def paired_se(a, b):  # Monte-Carlo standard error of the paired coverage difference
        hit = [((x["low"] <= truth) & (truth <= x["high"])).astype(float) for x in (a, b)]
        return float((hit[0] - hit[1]).std() / np.sqrt(len(idx)))

    hw, pw = humans["high"] - humans["low"], ppi["high"] - ppi["low"]
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = np.where(pw > 0, n * (hw / pw) ** 2, np.inf)
    return {
        "humans_coverage": cover(humans),
        "ppi_coverage": cover(ppi),
        "humans_mean_width": width(humans),
        "ppi_mean_width": width(ppi),
        "ppi_width_ratio": width(ppi) / width(humans),
        "effective_labels_median": float(np.median(eff)),
        "lambda_median": float(np.median(ppi["lam"])),
        "inside_bounds": bool(all(((x["low"] >= bounds[0]) & (x["high"] <= bounds[1])).all() for x in (humans, ppi))),
        "before_issue_36": {
            "humans_coverage": cover(old_h),
            "ppi_coverage": cover(old_p),
            "humans_mean_width": width(old_h),
            "ppi_mean_width": width(old_p),
        },
        "width_vs_before": {"humans": width(humans) / width(old_h), "ppi": width(ppi) / width(old_p)},
        "before_issue_51": {
            "ppi_coverage": cover(was),
            "ppi_minus_humans_coverage": cover(was) - cover(humans),
            "ppi_width_ratio": width(was) / width(humans),
        },
        "ppi_wider_share": float((pw > hw + 1e-12).mean()),
        "ppi_minus_humans_coverage": cover(ppi) - cover(humans),
        "ppi_minus_humans_mc_se": paired_se(ppi, humans),
        "humans_coverage_mc_se": float(np.sqrt(cover(humans) * (1 - cover(humans)) / len(idx))),
        "ppi_coverage_mc_se": float(np.sqrt(cover(ppi) * (1 - cover(ppi)) / len(idx))),
    }


def _same_truth_difference(preds, convs, row_conv, n, alpha, rng) -> bool:
    """Two releases of the same chatbot: the release's conversations split at random in two halves, n labelled
    in each; does the difference's interval (each release a draw of the behaviour) cover 0?"""
    halves = np.array_split(rng.permutation(convs), 2)
    estimates = []
    for half in halves:
        picked = rng.choice(half, size=n, replace=False)
        sample = preds.sample(np.isin(row_conv, picked), conversations=half)
        estimates.append(ppi_mean(sample, alpha=alpha, population="process"))
    d = difference(*estimates, alpha=alpha)
    return bool(d["low"] <= 0 <= d["high"])


def _average(found: list[dict]) -> dict:
    """Numbers averaged, flags all-of, nested blocks likewise; None where any role has None."""
    out = {}
    for k, v in found[0].items():
        values = [f[k] for f in found]
        if any(x is None for x in values):
            out[k] = None
        elif isinstance(v, dict):
            out[k] = _average(values)
        elif isinstance(v, bool):
            out[k] = all(values)
        else:
            out[k] = float(np.mean(values))
    return out


def pooled(parts: list[dict]) -> dict:
    """The per-role results of new_chatbot averaged (coverage and widths over all draws of all roles)."""
    result: dict = {"roles": {}}
    for kind in ("rate", "mean"):
        block = {k: float(np.mean([p[kind][k] for p in parts])) for k in ("calibrator_bias", "raw_judge_bias")}
        block["calibrator_abs_bias"] = float(np.mean([abs(p[kind]["calibrator_bias"]) for p in parts]))
        block["raw_judge_abs_bias"] = float(np.mean([abs(p[kind]["raw_judge_bias"]) for p in parts]))
        by_n = {}
        for n in parts[0][kind]["by_n"]:
            found = [p[kind]["by_n"][n] for p in parts if p[kind]["by_n"][n] is not None]
            by_n[n] = None if not found else _average(found)
            if found:
                by_n[n]["worst_role_coverage"] = {
                    k: min(f[k] for f in found) for k in ("humans_coverage", "ppi_coverage")
                }
        block["by_n"] = by_n
        if kind == "rate":  # each role's own looks (a role has about 30 conversations: looks up to ~25)
            block["peeking"] = {"false_decisions": _average([p["rate"]["peeking"]["false_decisions"] for p in parts])}
        result[kind] = block
    return result


def run(
    name: str, work: Path, anchors: Path, n_values, draws: int, alpha: float, coverage_draws: int | None = None
) -> dict:
    src = llm_rubric_dir(anchors, work) if name.startswith("llm_rubric") else bundled_dir(work)
    parts = {}
    for label, trained, release in splits(name, src):
        tag = f"{name}-{label}".replace("%", "pct").replace(" ", "_")
        # far shift: every part's model is the one trained on the old half (the judge's old style)
        model_tag = "far_shift" if name in FAR_SHIFT else tag
        train_dir = write_subset(src, work / f"{model_tag}-train", trained)
        model = train(train_dir, work / f"{model_tag}-model")
        cv_dir = cross_validated(train_dir, work / f"{tag}-cv") if name.startswith("llm_rubric") else None
        parts[label] = draws_of(
            write_subset(src, work / f"{tag}-release", release),
            model,
            n_values,
            draws,
            alpha,
            seed=0,
            cv_dir=cv_dir,
            coverage_draws=coverage_draws,
            restyle=FAR_SHIFT.get(name),
        )
    if name in FAR_SHIFT:  # the whole new half, and each role's quarter of it
        return parts.pop("all") | {"roles": parts}
    if len(parts) == 1:
        return next(iter(parts.values()))
    result = pooled(list(parts.values()))
    result["roles"] = parts
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--anchors", type=Path, default=ROOT.parent / "shared" / "anchors" / "llm_rubric_synth")
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument(
        "--coverage-draws", type=int, default=None, help="draws of the coverage cells (default --draws)"
    )
    parser.add_argument("--n", type=int, nargs="+", default=[10, 20, 40, 80])
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--only", default=",".join(BENCHMARKS))
    parser.add_argument("--work", type=Path, default=None, help="cache folder (imported / gathered data, models)")
    add_results_argument(parser, "estimate")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="estimate-bench-"))
    start = time.perf_counter()
    coverage_draws = args.coverage_draws or args.draws
    result = {"alpha": args.alpha, "draws": args.draws, "coverage_draws": coverage_draws, "n": args.n, "benchmarks": {}}
    for name in args.only.split(","):
        result["benchmarks"][name] = run(name, work, args.anchors, args.n, args.draws, args.alpha, coverage_draws)
        print(f"estimate benchmark: {name} done ({time.perf_counter() - start:.0f}s)", file=sys.stderr)
    result["seconds"] = round(time.perf_counter() - start, 1)
    emit(args.results_name, result)


if __name__ == "__main__":
    main()
