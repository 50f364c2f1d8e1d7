"""The `compare-judges` stage: several judges of the same labelled turns, each calibrated on the same folds,
compared question by question by their calibrated out-of-fold agreement with the reviewers.

    role-rubric compare-judges data=[DIR_A,DIR_B] out=DIR [model=network|linear|ordinal] [width=0.1]

Per question the reviewers answered: each judge's RMSE, log loss and kappa with 95% intervals over resampled
conversations; the pick and its paired difference with the runner-up (calibration/judges/choice.py); the
label multiplier of each judge against the pick; the alternative annotator test per judge
(calibration/evaluation/reviewers.py); chance-corrected agreement beside the reviewers' own
(calibration/judges/kappa.py); the turns where each calibrated judge and a reviewer disagree most.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.evaluation.reviewers import reviewer_agreement
from calibration.judges import choice, kappa
from calibration.judges.agreement import METRICS, conversation_weights, interval, metric_replicates
from calibration.judges.alpha import question_alpha
from calibration.judges.calibrate import answered_questions, calibrate_repeated, raw_expected
from calibration.judges.combine import combined_judge
from calibration.judges.data import Judge, cost_per_1000_turns, load_judges, shared_folds
from calibration.judges.disagreements import (
    judge_disagreements,
    reviewer_disagreements,
    roles_of,
    trace_ids,
    with_traces,
)
from calibration.judges.planner import plan_second_reviewer
from calibration.model.settings import Settings
from rubric.errors import InputError

WINNERS_CURSE = (
    "The pick is the judge that did best on these labels, so its figures flatter it (the winner's curse: "
    "selected on the same labels they are measured on, the best of several noisy scores is biased up). "
    "p_best is how often it is best over resampled conversations; the held-out confirmation, where there are "
    "enough conversations, picks on one half and checks the pick on the other. Confirm a close pick on "
    "conversations labelled after the choice."
)


def compare_judges(
    data: Sequence[str | Path],
    *,
    names: Sequence[str] | None = None,
    unmatched_labels: str = "error",
    **options: Any,
) -> dict[str, Any]:
    """The compare-judges.json content, plus the frames `_disagreements` and `_reviewer_disagreements`
    (written as CSV by the command, calibration/commands/compare_judges.py). options: `compare_loaded`'s
    keywords (questions, model, settings, folds, fold_seed, seed, n_boot, epsilon, width, release, combine)."""
    judges = load_judges(
        [Path(p) for p in data], None if names is None else list(names), unmatched_labels=unmatched_labels
    )
    return compare_loaded(judges, **options)


def compare_loaded(
    judges: list[Judge],
    *,
    questions: Sequence[str] | None = None,
    model: str = "network",
    settings: Settings | None = None,
    folds: int = 5,
    fold_seed: int = 0,
    repeats: int = 3,
    seed: int = 0,
    n_boot: int = 1000,
    epsilon: float = 0.1,
    width: float | None = None,
    release: int = 10_000,
    combine: bool = False,
    agreement_width: float | None = None,
    calibrated: dict[str, dict[str, np.ndarray]] | None = None,
) -> dict[str, Any]:
    """`compare_judges` of judges already loaded (calibration/judges/data.py `load_judges`; a benchmark's
    subsets of their labelled conversations: `Judge.subset`). agreement_width: plan the turns for a second
    reviewer (calibration/judges/planner.py), the frame `_second_reviewer`. repeats: splits into folds whose
    out-of-fold distributions are averaged (calibration/judges/calibrate.py `calibrate_repeated`). calibrated:
    judge name -> question -> (R, K) out-of-fold distributions already computed on these judges
    (`calibrate_repeated` with the same folds, fold_seed and repeats), so that a benchmark comparing several
    pairs of judges calibrates each judge once; None calibrates here."""
    started = time.perf_counter()
    if combine:  # one more candidate: every judge's distributions as one calibrator's inputs
        judges = [*judges, combined_judge(judges)]
    questions = _questions(judges[0], questions)
    _, conversation = shared_folds(judges, folds, fold_seed)
    if calibrated is None:
        probs = calibrate_repeated(judges, questions, folds=folds, fold_seed=fold_seed, repeats=repeats, model=model,
                                   settings=settings, seed=seed)  # fmt: skip
    else:
        probs = {j.name: {q: calibrated[j.name][q] for q in questions} for j in judges}
    calibrated_s = time.perf_counter() - started
    ref = judges[0].ds
    blocks, rows, rmse_reps = _questions_compared(
        judges, probs, questions, conversation, n_boot=n_boot, width=width, release=release, seed=seed
    )
    _add_alt_tests(blocks, judges, probs, questions, epsilon)
    traces = trace_ids(judges[0].path)
    options: dict[str, Any] = dict(folds=folds, fold_seed=fold_seed, repeats=repeats, seed=seed, n_boot=n_boot)
    options |= dict(epsilon=epsilon, width=width, release=release, combine=combine, agreement_width=agreement_width)
    result = {
        "settings": {
            "data": [str(j.path) for j in judges],
            "judges": [j.name for j in judges],
            "model": model,
            "settings": None if settings is None or model != "network" else settings.to_dict(),
        }
        | options,
        "data": {
            "label_rows": len(conversation),
            "conversations": int(conversation.max() + 1),
            "reviewers": len(ref.judges),
            "questions": questions,
            "skipped": {j.name: dict(j.ds.report) for j in judges if j.ds.report},
        },
        "judges": {
            j.name: {"path": str(j.path), "cost_per_1000_turns": cost_per_1000_turns(j.summary)} for j in judges
        },
        "questions": blocks,
        "overall": _overall(blocks, rmse_reps, [j.name for j in judges], judges[-1].name if combine else None),
        "winners_curse": WINNERS_CURSE,
        "timing_s": {"calibration": round(calibrated_s, 2), "total": round(time.perf_counter() - started, 2)},
        "_disagreements": judge_disagreements(pd.concat(rows, ignore_index=True), traces),
        "_reviewer_disagreements": _reviewer_frame(judges[0], questions, traces),
    }
    if agreement_width is not None:
        plan, result["second_reviewer"] = _plan(judges[0], questions, blocks, agreement_width, traces, seed)
        result["_second_reviewer"] = plan
    return result


def _questions_compared(
    judges: list[Judge],
    probs: dict,
    questions: list[str],
    conversation: np.ndarray,
    *,
    n_boot: int,
    width: float | None,
    release: int,
    seed: int,
) -> tuple[dict, list[pd.DataFrame], dict]:
    """Every question's block (`_question`) on the same conversation resamples, the pooled recommendation beside
    each where there are several questions, the disagreement rows, and each question's RMSE replicates."""
    counts = conversation_weights(np.arange(conversation.max() + 1), n_boot, seed)  # (1 + B, C)
    W = counts[:, conversation]  # (1 + B, R): the same resamples for every judge and question
    blocks, rows, rmse_reps = {}, [], {}
    for qid in questions:
        block, q_rows = _question(judges, probs, qid, W, counts, conversation, width=width, release=release, seed=seed)
        rmse_reps[qid] = block.pop("_rmse_replicates")
        blocks[qid] = block
        rows.append(q_rows)
    if len(questions) > 1:  # the evidence pooled across questions, on the same resamples (choice.pooled_picks)
        for qid, pooled in choice.pooled_picks(rmse_reps).items():
            blocks[qid]["recommendation_pooled"] = pooled
    return blocks, rows, rmse_reps


def _add_alt_tests(blocks: dict, judges: list[Judge], probs: dict, questions: list[str], epsilon: float) -> None:
    """Each question's alternative annotator test per judge, and the reviewers' ceiling, into its block."""
    ref = judges[0].ds
    expected = {
        j.name: {ref.rubric.ids.index(q): _full_expected(j, probs[j.name][q], q) for q in questions} for j in judges
    }
    alt = {j.name: reviewer_agreement(_shared_ds(judges[0]), expected[j.name], epsilon=epsilon) for j in judges}
    for qid in questions:
        blocks[qid]["alt_test"] = {
            n: {k: a["questions"][qid][k] for k in ("alt_test", "verdict", "calibrated")} for n, a in alt.items()
        }
        blocks[qid]["reviewer_ceiling"] = alt[judges[0].name]["questions"][qid]["reviewers"]


def _questions(judge: Judge, asked: Sequence[str] | None) -> list[str]:
    answered = answered_questions(judge)
    if asked is None:
        return answered
    unknown = [q for q in asked if q not in answered]
    if unknown:
        raise InputError(
            f"question(s) {unknown} have no reviewer answers in {judge.path}.",
            path=judge.path / "labels.csv",
            fix=f"choose among {answered}, or leave questions= out (every answered question).",
        )
    return list(asked)


def _shared_ds(judge: Judge):
    """The first judge's data with its label rows in the shared order (the reviewers' answers are the same in
    every directory), for the figures that read labels only."""
    return judge.ds.with_label_rows(judge.rows)


def _full_expected(judge: Judge, probs: np.ndarray, qid: str) -> np.ndarray:
    """(R,) expected answer of every shared label row (NaN where the reviewer did not answer qid)."""
    ds = judge.ds
    q = ds.rubric.ids.index(qid)
    values = ds.option_values()[q]
    answered = ds.answers[judge.rows, q] >= 0
    return np.where(answered, probs[:, : len(values)] @ values, np.nan)


def _question(
    judges: list[Judge],
    probs: dict[str, dict[str, np.ndarray]],
    qid: str,
    W: np.ndarray,
    counts: np.ndarray,
    conversation: np.ndarray,
    *,
    width: float | None,
    release: int,
    seed: int,
) -> tuple[dict, pd.DataFrame]:
    """One question's block of compare-judges.json, and its (judge, label row) disagreement rows."""
    ref = judges[0]
    ds = ref.ds
    q = ds.rubric.ids.index(qid)
    values = np.asarray(ds.rubric.question(qid).values, float)
    shared_answers = ds.answers[ref.rows, q]
    rows = np.flatnonzero(shared_answers >= 0)
    answer = shared_answers[rows]
    Wq, conv = W[:, rows], conversation[rows]
    used = np.unique(conv)  # the conversations with an answer to qid: their counts, in np.unique order
    reps, spreads, judge_block, frames = {}, {}, {}, []
    keys = ds.items.iloc[ds.label_item[ref.rows[rows]]][["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    reviewer = ds.label_judge[ref.rows[rows]]
    for j in judges:
        p = probs[j.name][qid][rows]
        reps[j.name] = metric_replicates(p, answer, values, Wq)
        expected = p[:, : len(values)] @ values
        spreads[j.name] = choice.label_spread(expected, values[answer], conv, counts[:, used])
        raw = raw_expected(j, qid)[rows]
        judge_block[j.name] = _metric_summary(reps[j.name]) | {
            "raw_rmse": float(np.sqrt(np.nanmean((raw - values[answer]) ** 2))) if np.isfinite(raw).any() else None,
            "r2": float(spreads[j.name]["r2"][0]),
            "kappa_detail": kappa.judge_kappa(expected, answer, values, Wq),
            "kappa_per_reviewer": kappa.per_reviewer_kappa(expected, answer, values, reviewer, ds.judges, Wq),
        }
        frames.append(
            keys.assign(
                llm_judge=j.name,
                question_id=qid,
                reviewer_id=[ds.judges[r] for r in reviewer],
                answer=values[answer],
                calibrated=np.round(expected, 6),
                scale=float(values.max() - values.min()) or 1.0,
            )
        )
    names = [j.name for j in judges]
    chosen = choice.pick({n: reps[n]["rmse"] for n in names})
    multiplier = choice.multipliers(spreads, best := chosen["pick"])
    for n in names:
        judge_block[n]["label_multiplier"] = multiplier[n]
        if width is not None:
            judge_block[n]["labels_for_width"] = choice.labels_for_width(spreads[n], width, release)
    paired = _paired(reps, best)
    squared = {n: (probs[n][qid][rows][:, : len(values)] @ values - values[answer]) ** 2 for n in names}

    def rmse_of(mask: np.ndarray) -> dict[str, float]:
        return {n: float(np.sqrt(squared[n][mask].mean())) for n in names}

    confirmation = choice.confirm_on_held_out(rmse_of, conv, names, seed)
    expected_of = {n: probs[n][qid][rows][:, : len(values)] @ values for n in names}
    item = ds.label_item[ref.rows[rows]]
    role = _roles(ref, keys["conversation_id"])
    per_role = None if role is None else kappa.per_role_kappa(item, expected_of, answer, values, role, Wq)
    block = {
        "options": values.tolist(),
        "label_rows": len(rows),
        "conversations": len(used),
        "base_rate": kappa.base_rate(answer, values),
        "reviewers_kappa": kappa.reviewer_kappa(item, answer, len(values), Wq),
        "judges": judge_block,
        "recommendation": chosen | {"line": _line(qid, chosen, multiplier, confirmation)},
        "paired_vs_pick": paired,
        "held_out_confirmation": confirmation,
        "kappa_per_role": per_role,
        "alpha": question_alpha(item, answer, values, Wq, expected_of, reviewer, ds.judges, role),
        "_rmse_replicates": {n: reps[n]["rmse"] for n in names},
    }
    return block, pd.concat(frames, ignore_index=True)


def _plan(judge: Judge, questions: list[str], blocks: dict, target: float, traces: pd.DataFrame, seed: int):
    """second_reviewer.csv's frame and the plan's summary per question (calibration/judges/planner.py)."""
    ds = judge.ds
    keys = ds.items.iloc[ds.label_item[judge.rows]][["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    keys["judge_id"] = [ds.judges[j] for j in ds.label_judge[judge.rows]]
    role = _roles(judge, keys["conversation_id"])
    keys["role"] = "" if role is None else role
    answered = ds.answers[judge.rows][:, [ds.rubric.ids.index(q) for q in questions]] >= 0
    current = {q: blocks[q]["alpha"]["reviewers"] for q in questions}
    plan, summary = plan_second_reviewer(keys, answered, questions, current, target, seed=seed)
    return with_traces(plan, traces), {"agreement_width": target, "questions": summary, "turns": len(plan)}


def _roles(ref: Judge, conversation: pd.Series) -> np.ndarray | None:
    """(R,) each label row's chatbot role, where the first directory's conversations.jsonl names them."""
    role_of = roles_of(ref.path)
    if not role_of:
        return None
    return conversation.map(role_of).fillna("(unknown)").to_numpy()


def _paired(reps: dict[str, dict[str, np.ndarray]], best: str) -> dict[str, dict]:
    """Every other judge's metrics minus the pick's, on the same resamples, with 95% intervals."""
    out = {}
    for n, mine in reps.items():
        if n != best:
            d = {m: mine[m] - reps[best][m] for m in METRICS}
            out[n] = {
                m: dict(zip(("low", "high"), interval(v[1:]), strict=True)) | {"difference": float(v[0])}
                for m, v in d.items()
            }
    return out


def _metric_summary(reps: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in METRICS:
        v = reps[m]
        out[m] = None if not np.isfinite(v[0]) else float(v[0])
        out[f"{m}_low"], out[f"{m}_high"] = interval(v[1:])
    return out


def _line(qid: str, chosen: dict, multiplier: dict, confirmation: dict | None) -> str:
    """The recommendation for one question in words."""
    best, runner = chosen["pick"], chosen["runner_up"]
    diff = f"RMSE {chosen['rmse_difference']:+.3f} [{chosen['rmse_difference_low']:+.3f}, {chosen['rmse_difference_high']:+.3f}]"
    m = multiplier[runner]
    labels = (
        f"{runner} needs {m['multiplier']:.2f}x [{m['low']:.2f}, {m['high']:.2f}] the labelled conversations of {best}"
    )
    held = ""
    if confirmation is not None:
        c = confirmation
        held = (
            f"; picked on half the conversations, {c['picked_on_half']} was also best on the other half"
            if c["confirmed"]
            else f"; picked on half the conversations, {c['picked_on_half']} lost to {c['best_on_other_half']} "
            "on the other half"
        )
    if chosen["within_noise"]:
        return (
            f"{qid}: {best} (within noise: {diff} against {runner}, p_best {chosen['p_best'][best]:.2f}; "
            f"label more conversations or choose on cost); {labels}{held}."
        )
    return f"{qid}: {best}, better than {runner} by {diff} (p_best {chosen['p_best'][best]:.2f}); {labels}{held}."


def _overall(blocks: dict[str, dict], rmse_reps: dict, names: list[str], combined: str | None) -> dict:
    """How many questions each judge is picked on, on how many of them the pick is clear of noise, and the
    verdict on each judge as a whole (choice.whole_judge: the mean RMSE over the questions)."""
    picks = {n: 0 for n in names}
    clear = {n: 0 for n in names}
    for block in blocks.values():
        r = block["recommendation"]
        picks[r["pick"]] += 1
        clear[r["pick"]] += int(not r["within_noise"])
    mean_rmse = {n: float(np.mean([b["judges"][n]["rmse"] for b in blocks.values()])) for n in names}
    whole = choice.whole_judge(rmse_reps)
    whole["line"] = choice.whole_judge_line(whole)
    out = {"picked_on": picks, "clear_on": clear, "mean_rmse": mean_rmse, "whole_judge": whole}
    if combined is not None:
        out["combination"] = (
            f"{combined} (every judge's distributions into one calibrator) is the pick on {picks[combined]} of "
            f"{len(blocks)} question(s), clear of noise on {clear[combined]}"
            + ("; elsewhere a judge alone does as well or better." if picks[combined] < len(blocks) else ".")
        )
    return out


def _reviewer_frame(judge: Judge, questions: list[str], traces: pd.DataFrame) -> pd.DataFrame:
    ds = judge.ds
    keys = ds.items.iloc[ds.label_item[judge.rows]][["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    keys["judge_id"] = [ds.judges[j] for j in ds.label_judge[judge.rows]]
    frames = []
    for qid in questions:
        q = ds.rubric.ids.index(qid)
        values = np.asarray(ds.rubric.question(qid).values, float)
        answers = ds.answers[judge.rows, q]
        ok = answers >= 0
        scale = float(values.max() - values.min()) or 1.0
        frames.append(reviewer_disagreements(keys[ok].reset_index(drop=True), values[answers[ok]], qid, scale, traces))
    frame = pd.concat(frames, ignore_index=True).sort_values(
        ["spread_share", "conversation_id", "turn", "question_id"], ascending=[False, True, True, True], kind="stable"
    )
    frame.insert(0, "rank", np.arange(1, len(frame) + 1))
    return frame.reset_index(drop=True)
