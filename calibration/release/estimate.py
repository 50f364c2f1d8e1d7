"""`role-rubric estimate`: a release's adherence rate and mean answer with intervals that hold however wrong
the calibrator is (prediction-powered inference, calibration/release/inference.py), a comparison with a
baseline release, and a gate for CI.

Three columns side by side for every quantity: `calibrator` (the calibrated mean over all turns, a point,
uncorrected), `humans` (the labelled sample alone) and `ppi` (the calibrator's mean corrected by its error
on the labelled sample). Overall, per chatbot role (where the release has conversations.jsonl) and per
rubric question (where that question is labelled).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from calibration.release.checks import check_adheres_at, check_baseline, check_target_answered
from calibration.release.gate import GateFailed
from calibration.release.inference import classical_mean, difference, effective_labels, ppi_mean
from calibration.release.plan import PLAN_FILE, read_plan, read_strata, release_fingerprint
from calibration.release.planning import width_plan
from calibration.release.roles import roles_of_release
from calibration.release.turns import ReviewerPredictions, judge_probabilities, reviewer_predictions
from rubric.errors import InputError
from rubric.jsonfile import jsonable

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

__all__ = ["GateFailed", "estimate_release", "strip_private"]

KINDS = ("rate", "mean")
STRATUM_LAMBDA_FROM = 8
"""A stratum's ppi weighs the calibrator (a cross-fitted lambda) from this many labelled conversations on;
below, lambda is 0 there (benchmarks/estimate_strata.py: with 3-5 per stratum the strata's ppi was 1.3-2x
the uniform sample's width, covering 0.96-0.99)."""
QUANTITY_NOTE = (
    "The quantity is what a reviewer of the panel, drawn as the labels' reviewers were, would answer on a turn "
    "of the release (rate: share of answers >= adheres_at; mean: the answer's value). Labelled pairs are compared "
    "with the calibrator's prediction for that same reviewer; unlabelled turns use the panel mixture, the "
    "reviewers' predictions weighted by their share of the labels. Conversations are the sampling unit: every "
    "interval treats the labels of one conversation as one draw (a ratio estimator with conversation-level "
    "variance, a Wilson score interval inside the quantity's range at Student's t on n - 1 degrees of freedom "
    "(n - 2 for ppi, whose lambda is estimated from the same labels), "
    "ppi's lambda cross-fitted over conversations and its noise in the variance; ppi is this interval whatever "
    "lambda is, never swapped for the humans-only one), and is valid only if the labelled "
    "conversations are a random sample the calibrator never trained on."
)
POPULATION_NOTE = {
    "finite": "Intervals are for this release's own turns (finite population: they narrow to a point as the "
    "whole release gets labelled).",
    "process": "Intervals are for the chatbot's behaviour that this release is a draw of (population=process): "
    "wider than for the release's own turns.",
}


def estimate_release(
    data,
    model,
    *,
    alpha: float = 0.1,
    adheres_at: float | None = None,
    baseline=None,
    plan=None,
    population: str = "finite",
    allow_judge_mismatch: bool = False,
    bias_margin: float = 0.05,
    on_shift: str = "warn",
    width: float | None = None,
    crossfit: int | None = None,
    adapted_out=None,
) -> dict:
    """The release estimate as a dict (the shape of estimate.json). data: a gathered release directory whose
    labels.csv labels a random sample of its conversations; model: a model directory or a loaded model;
    baseline: another release directory, for the difference; plan: its sampling plan (default
    DATA/sample_plan.csv where it exists, else a uniform sample is assumed); population: "finite" (this
    release's turns) or "process" (the behaviour the release is a draw of; calibration/release/inference.py);
    bias_margin: the transport audit's margin on the rate (calibration/release/audit.py); on_shift: the shift
    check's warn | refuse | ignore (calibration/model/shift.py);
    width: the rate's half-width wanted (how many more conversations would reach it: result["width_plan"]);
    crossfit: K folds to adapt the calibrator on the labels and estimate from the same ones
    (calibration/release/crossfit.py; model must be a folder), the adapted model written to adapted_out."""
    from calibration.model.files import load_model
    from calibration.schema.commands_release import Estimate
    from rubric.config.settings import check_values

    # the command's own declarations (types and ranges), so Python and the command line refuse the same values
    given = {"alpha": alpha, "population": population, "bias_margin": bias_margin, "width": width}
    check_values(Estimate, {**given, "adheres_at": adheres_at, "on_shift": on_shift, "crossfit": crossfit})
    if crossfit is not None and not isinstance(model, str | Path):
        raise InputError("crossfit= retrains from the model's folder.", fix="pass model= a model folder.")
    model_path = model
    model = load_model(model) if isinstance(model, str | Path) else model
    check_adheres_at(model.rubric.question(model.rubric.target), adheres_at)
    if baseline is not None:
        check_baseline(Path(data), Path(baseline), allow_judge_mismatch=allow_judge_mismatch)
    options = {"alpha": alpha, "population": population}
    trust = {"bias_margin": float(bias_margin), "on_shift": on_shift}
    fit = None if crossfit is None else {"k": crossfit, "model_path": model_path, "adapted": adapted_out}
    named = model_path if isinstance(model_path, str | Path) else None  # the folder an error names
    result = _release(
        data,
        model,
        options,
        adheres_at,
        plan,
        allow_judge_mismatch,
        what="the release",
        trust=trust,
        crossfit=fit,
        model_dir=named,
    )
    if width is not None:
        result["width_plan"] = width_plan(result["rate"], width, alpha)
    if baseline is not None:
        base = _release(
            baseline, model, options, adheres_at, None, allow_judge_mismatch, what="the baseline", model_dir=named
        )
        result["baseline"] = {k: base[k] for k in ("data", "rate", "mean")}
        result["difference"] = {k: _difference(result[k], base[k], alpha) for k in KINDS}
    return result


def _release(
    data, model, options, adheres_at, plan, allow_mismatch, *, what, trust=None, crossfit=None, model_dir=None
) -> dict:
    root = Path(data)
    ds, rubric, checked = _checked_release(root, model, allow_mismatch, what=what, model_dir=model_dir)
    release = set(ds.items["conversation_id"])
    labelled = set(ds.items["conversation_id"].to_numpy()[ds.label_item])  # >= 2: checked with the target
    plan_path = Path(plan) if plan else (root / PLAN_FILE if (root / PLAN_FILE).exists() else None)
    pi_of = read_plan(plan_path, release, labelled, fingerprint=release_fingerprint(root)) if plan_path else None
    strata = read_strata(plan_path)
    t = ds.target_index
    cut = _cuts(rubric, adheres_at)
    shift = None
    if trust is not None:  # before any work, crossfit's trainings included: on_shift=refuse leaves nothing behind
        from calibration.model.shift import handle_shift, roles_of

        shift = handle_shift(model.record.shift_summary(), ds, roles_of([root]), trust["on_shift"], "estimate")
    predict, folds = _predictor(model, ds, root, labelled, cut, crossfit)
    turns = {kind: predict(t, kind) for kind in KINDS}
    overall = {kind: _block(turns[kind], options | {"bounds": _bounds(ds, t, kind)}, pi_of) for kind in KINDS}
    if strata:
        for kind in KINDS:
            overall[kind] |= _stratified(turns[kind], options | {"bounds": _bounds(ds, t, kind)}, strata)
    roles = roles_of_release(root)
    result = {
        "data": str(root),
        "alpha": options["alpha"],
        "population": options["population"],
        "target": rubric.target,
        "adheres_at": cut[rubric.target],
        **overall,
        "by_role": {
            role: {
                kind: _block(turns[kind], options | {"bounds": _bounds(ds, t, kind)}, pi_of, convs) for kind in KINDS
            }
            for role, convs in sorted(roles.items())
            if release & convs
        },
        "by_question": _by_question(ds, rubric, predict, cut, options, pi_of),
        "sampling": "inclusion probabilities from " + str(plan_path)
        if pi_of
        else (
            "uniform ("
            + (
                str(plan_path)
                if plan_path
                else "no sampling plan given; a simple random sample of conversations is assumed"
            )
            + ")"
        ),
        "note": QUANTITY_NOTE + " " + POPULATION_NOTE[options["population"]],
        "training_overlap_checked": bool(checked),
    }
    if trust is not None:  # the release (not the baseline): calibration/release/audit.py, calibration/model/shift.py
        from calibration.release.audit import transport_audit

        result["transport_audit"] = transport_audit(turns["rate"], trust["bias_margin"], options["alpha"], roles)
        result["shift"] = shift
    if folds is not None:
        result["crossfit"] = {
            "k": len(folds.models),
            "adapted_model": str(folds.adapted),
            "note": (
                "cross-prediction-powered: each labelled conversation compared with a calibrator trained on the model's "
                "training directories plus the other folds' labels; the other turns get the average of the "
                f"{len(folds.models)}; the adapted model (trained on every label) is {folds.adapted}."
            ),
        }
    if not roles:
        result["by_role_note"] = "no conversations.jsonl in the release, so no per-role breakdown."
    return result


def _checked_release(root: Path, model, allow_mismatch: bool, *, what: str, model_dir=None):
    """The release's dataset, read against the model's rubric once its judge, target and overlap with the
    model's training data are checked; returns (dataset, rubric, how many conversations were checked)."""
    from calibration.data.dataset import load_dataset
    from calibration.model.provenance import refuse_overlap

    rubric = model.check_data(root, command="estimate", model_dir=model_dir, allow_judge_mismatch=allow_mismatch)
    ds = load_dataset(root, rubric=rubric)
    check_target_answered(ds, root / "labels.csv", minimum=2)  # an interval needs 2 conversations
    # crossfit too: its calibrators train on the model's training directories as well as the other folds, so a
    # labelled conversation the model trained on would be predicted by calibrators that all saw it (and the
    # check names the user's labels.csv before any training)
    checked = refuse_overlap(model, ds, what=what, path=root / "labels.csv", folder=root)
    return ds, rubric, checked


def _cuts(rubric, adheres_at: float | None) -> dict[str, float]:
    """Each question's adherence threshold: its default, the target's overridden by adheres_at."""
    from calibration.release.decide import default_adheres_at

    cut = {q.id: default_adheres_at(q) for q in rubric.questions}
    if adheres_at is not None:
        cut[rubric.target] = float(adheres_at)
    return cut


def _predictor(model, ds, root: Path, labelled: set[str], cut: dict[str, float], crossfit):
    """predict(question, kind) -> ReviewerPredictions: the model's, or with crossfit= the K fold calibrators'
    (trained here; calibration/release/crossfit.py). Returns (predict, the fold models or None)."""
    X = torch.from_numpy(ds.features(model.spec))
    proba = judge_probabilities(model, X)
    folds = None
    if crossfit is not None:
        import tempfile

        from calibration.release.crossfit import check_folds, train_folds

        k = check_folds(crossfit["k"], len(labelled), path=root / "labels.csv")
        with tempfile.TemporaryDirectory(prefix="crossfit-") as work:
            folds = train_folds(
                model, crossfit["model_path"], root, sorted(labelled), k, Path(work), Path(crossfit["adapted"])
            )

    def predict(q: int, kind: str):
        at = cut[model.rubric.questions[q].id]
        if folds is not None:
            return folds.predictions(ds, q, kind=kind, adheres_at=at)
        return reviewer_predictions(model, ds, X, q, kind=kind, adheres_at=at, proba=proba)

    return predict, folds


def _by_question(ds, rubric, predict, cut, options, pi_of) -> dict:
    """The other answered questions' blocks (the target is the release's own block)."""
    return {
        question.id: {
            "adheres_at": cut[question.id],
            **{kind: _block(predict(q, kind), options | {"bounds": _bounds(ds, q, kind)}, pi_of) for kind in KINDS},
        }
        for q, question in enumerate(rubric.questions)
        if q != ds.target_index and (ds.answers[:, q] >= 0).any()
    }


def _stratified(preds: ReviewerPredictions, options: dict, strata: dict[str, str]) -> dict:
    """The overall humans and ppi intervals combined over the plan's strata (stratified PPI; each stratum a
    uniform sample of its conversations); {} with a note where a stratum has fewer than 2 labels. A stratum
    with fewer than STRATUM_LAMBDA_FROM labelled conversations weighs the calibrator 0 in ppi (its
    humans-only interval): decided by the plan's allocation, not by the labels, so it selects nothing."""
    from calibration.release.inference import stratified

    groups: dict[str, set[str]] = {}
    for conv in np.unique(preds.conversation):
        groups.setdefault(strata.get(str(conv), "(not in the plan)"), set()).add(conv)
    parts: dict[str, list] = {"humans": [], "ppi": []}
    counts, lams = {}, []
    for name, convs in sorted(groups.items()):
        n_h = len(preds.labelled_conversations(conversations=convs))
        counts[name] = n_h
        if n_h < 2:
            return {
                "stratified": {
                    "labelled": counts,
                    "note": f"stratum {name!r} has {n_h} labelled conversation(s): "
                    "the strata are not combined; the intervals above treat the sample as one.",
                }
            }
        share = float(preds.scope(convs).sum() / len(preds.conversation))
        sample = preds.sample(conversations=convs)
        turns = float(sample.m_lab.sum())
        parts["humans"].append((share, classical_mean(sample, **options), n_h, turns))
        ppi = ppi_mean(sample, **options) if n_h >= STRATUM_LAMBDA_FROM else ppi_mean(sample, **options, lam=0.0)
        assert ppi.lam is not None  # ppi_mean always has one (classical_mean's is None)
        lams.append(share * ppi.lam)
        parts["ppi"].append((share, ppi, n_h, turns))
    alpha, bounds = options["alpha"], options["bounds"]
    humans, ppi = (stratified(parts[k], alpha=alpha, bounds=bounds) for k in ("humans", "ppi"))
    n = sum(counts.values())
    return {
        "humans": {"estimate": humans.estimate, "low": humans.low, "high": humans.high},
        "ppi": {"estimate": ppi.estimate, "low": ppi.low, "high": ppi.high, "lambda": float(sum(lams))},
        "effective_labels": effective_labels(n, humans, ppi),
        "stratified": {
            "labelled": counts,
            "note": "strata of the sampling plan combined (stratified PPI, Fisch "
            "et al. 2024): each stratum's interval, weighted by its share of the turns.",
            "humans_only_strata": sorted(k for k, v in counts.items() if v < STRATUM_LAMBDA_FROM),
            "humans_only_why": f"under {STRATUM_LAMBDA_FROM} labelled conversations each, so their ppi is "
            "their humans-only interval (lambda 0): estimating lambda from so few costs more width than the "
            "calibrator saves (benchmarks/estimate_strata.py); decided by the plan's allocation, not the labels.",
        },
    }


def _bounds(ds, question: int, kind: str) -> tuple[float, float]:
    """The range of the quantity: a rate's [0, 1], or the answer scale's lowest and highest value (the
    intervals are Wilson score intervals inside it)."""
    if kind == "rate":
        return (0.0, 1.0)
    values = ds.option_values()[question, : int(ds.n_options[question])]
    return (float(values.min()), float(values.max()))


def _block(preds: ReviewerPredictions, options: dict, pi_of, conversations=None) -> dict:
    """calibrator / humans / ppi for one quantity over all turns (or the conversations named)."""
    keep = preds.scope(conversations)
    labelled = preds.labelled_conversations(conversations=conversations)
    block: dict[str, Any] = {
        "calibrator": float(preds.calibrator[keep].mean()),
        "calibrator_note": "uncorrected: the mean calibrated prediction over all turns",
        "judge": float(preds.raw[keep].mean()),
        "n_labelled_conversations": len(labelled),
        "n_conversations": len(np.unique(preds.conversation[keep])),
        "n_labelled_turns": len(np.unique(preds.row_item[preds.labelled_rows(conversations=conversations)])),
        "n_turns": int(keep.sum()),
        "humans": None,
        "ppi": None,
    }
    if len(labelled) < 2:
        block["note"] = "fewer than 2 labelled conversations: no interval."
        return block
    sample = preds.sample(conversations=conversations, pi_of=pi_of)
    humans, ppi = classical_mean(sample, **options), ppi_mean(sample, **options)
    block["humans"] = {"estimate": humans.estimate, "low": humans.low, "high": humans.high}
    block["ppi"] = {"estimate": ppi.estimate, "low": ppi.low, "high": ppi.high, "lambda": ppi.lam}
    if ppi.lam_parts is not None:  # crossfit=K: the cross-fitted calibrators' lam and the unadapted model's
        block["ppi"]["lambda_crossfit"], block["ppi"]["lambda_unadapted"] = ppi.lam_parts
    block["effective_labels"] = effective_labels(len(labelled), humans, ppi)
    block["_sample"] = sample  # for a comparison with a baseline; dropped before writing
    pi = np.full(sample.n, sample.n / sample.N) if sample.pi is None else sample.pi
    fpc = float(np.clip(1 - pi, 0, 1).mean()) if options["population"] == "finite" else 1.0
    block["_se_process"] = ppi.se / math.sqrt(fpc) if fpc > 0 else math.inf  # sequential=true
    return block


def _difference(a: dict, b: dict, alpha: float) -> dict:
    # Two releases are compared as draws of their chatbots' behaviour (process level), whatever `population`.
    a_process, b_process = (ppi_mean(x["_sample"], alpha=alpha, population="process") for x in (a, b))
    d = difference(a_process, b_process, alpha=alpha)
    return {k: d[k] for k in ("estimate", "low", "high", "p")} | {
        "method": "ppi, each release a draw of its chatbot's behaviour (population=process)"
    }


def strip_private(value):
    """Drop the `_sample` helpers and turn inf/NaN into None (strict JSON)."""
    return jsonable(value, private=False)
