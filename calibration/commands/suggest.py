"""`role-rubric suggest`: which labels to ask for next.

purpose=learn ranks unlabelled (turn, reviewer) pairs by what a label would teach the calibrator
(calibration/labelling/suggest.py); purpose=estimate draws a random sample of conversations for `role-rubric estimate`,
as many as a width or a gate needs when asked (calibration/release/sampling.py, planning.py), with
sample_plan.csv beside the sheet (calibration/release/plan.py). Its keys: calibration.schema.commands_release
`Suggest` (`role-rubric suggest --help`).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from calibration.schema.commands_release import Suggest as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric suggest data=DIR model=MODEL_DIR budget=N out=to_label.csv [judges=[ids]]
    [strategy=bald] [diversity=0.5] [questions=all|target]`, or `purpose=estimate [width=W | decide_at=X]`.
    Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.release.checks import check_suggest_out
    from calibration.release.plan import PLAN_FILE

    estimate = cfg.purpose == "estimate"
    check_suggest_out(cfg.out, plan=cfg.out.parent / PLAN_FILE if estimate else None, overwrite=cfg.overwrite)
    return _sample_for_estimate(cfg) if estimate else _rank_for_learning(cfg)


def _rank_for_learning(cfg: Schema) -> Path:
    """purpose=learn: the sheet of the `budget` pairs a label would teach most, best first."""
    import numpy as np
    import torch

    from calibration.labelling.suggest import (
        conversations_by_id,
        judges_to_ask,
        model_and_data,
        rank_pairs,
        suggestions_frame,
        unlabelled_pairs,
    )
    from rubric.errors import InputError

    start = time.perf_counter()
    assert cfg.model is not None  # purpose=learn needs model= (Suggest's rules, checked before run)
    model, ds = model_and_data(cfg.data, cfg.model, allow_judge_mismatch=cfg.allow_judge_mismatch)
    budget = cfg.budget
    item, judge_names = unlabelled_pairs(ds, judges_to_ask(cfg.judges, model))
    if len(item) == 0:
        raise InputError(
            "every (turn, judge) pair is already labelled.",
            path=cfg.data,
            fix="add turns to llm.csv or name other judges with judges=[...].",
        )
    judge = np.array([model.judge_index(j) for j in judge_names], dtype=np.int64)
    picked, scores = rank_pairs(
        model.net,
        torch.from_numpy(ds.features(model.spec)),
        ds,
        item,
        judge,
        budget,
        strategy=cfg.strategy,
        diversity=cfg.diversity,
        recalibration=model.recalibration,
        pool=model.settings.pool,
        seed=cfg.seed,
        labelled_items=np.unique(ds.label_item),
    )
    frame = suggestions_frame(
        ds,
        item[picked],
        [judge_names[i] for i in picked],
        scores,
        cfg.strategy,
        questions=cfg.questions,
        conversations=conversations_by_id(cfg.data),
    )
    return _write_ranked(cfg, frame, len(picked), len(item), budget, time.perf_counter() - start)


def _write_ranked(cfg: Schema, frame: Any, picked: int, candidates: int, budget: int, seconds: float) -> Path:
    from rubric.config.command_line import override
    from rubric.files import atomic_to_csv

    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_to_csv(frame, out)
    log.info(
        f"suggest: {picked} of {candidates} unlabelled (turn, judge) pairs by {cfg.strategy} "
        f"(diversity {cfg.diversity:g}) in {seconds:.1f}s"
    )
    log.info(
        f"suggest: wrote {out} ({len(frame)} rows): budget={budget} counts (turn, reviewer) pairs, and each pair "
        f"is one row per question asked; fill `answer`, then `role-rubric import source=sheet {override('sheet', out)} "
        f"{override('data', cfg.data)} out=NEW_DIR`"
    )
    return out


def _sample_for_estimate(cfg: Schema) -> Path:
    """purpose=estimate: a seeded random sample of conversations (stratified with strata=; as many as width= or
    decide_at= needs, at most budget), written as a sheet of every turn of those conversations and
    sample_plan.csv beside it."""
    from calibration import load_dataset
    from calibration.labelling.items import dataset_conversations
    from calibration.release.plan import stamp_plan, stratified_plan, uniform_plan
    from calibration.release.sampling import planned_budget, strata_of

    start = time.perf_counter()
    ds = load_dataset(cfg.data, require_labels=False)
    budget = cfg.budget
    if cfg.width is not None or cfg.decide_at is not None:
        assert cfg.model is not None  # width= and decide_at= need model= (Suggest's rules, checked before run)
        budget = planned_budget(
            ds,
            budget,
            data=Path(cfg.data),
            model=cfg.model,
            width=cfg.width,
            decide_at=cfg.decide_at,
            alpha=cfg.alpha,
            cv=cfg.cv,
        )
    conversations = dataset_conversations(cfg.data)
    if cfg.strata:
        stratum_of = strata_of(conversations, cfg.strata, set(ds.items["conversation_id"]), Path(cfg.data))
        plan = stratified_plan(ds.items["conversation_id"], stratum_of, budget, seed=cfg.seed)
        sizes = plan.groupby("stratum")["sampled"].agg(["sum", "size"])
        log.info(
            "suggest: stratified by "
            + cfg.strata
            + " (proportional): "
            + ", ".join(f"{name} {int(r['sum'])}/{int(r['size'])}" for name, r in sizes.iterrows())
        )
    else:
        plan = uniform_plan(ds.items["conversation_id"], budget, seed=cfg.seed)
    plan = stamp_plan(plan, seed=cfg.seed, data=cfg.data)  # estimate/import refuse it for another release
    return _write_sample(cfg, ds, plan, conversations, time.perf_counter() - start)


def _write_sample(cfg: Schema, ds: Any, plan: Any, conversations: dict, seconds: float) -> Path:
    from calibration.labelling.sheet import sheet_frame
    from calibration.release.plan import PLAN_FILE
    from rubric.files import atomic_write_text

    chosen = set(plan.loc[plan["sampled"] == 1, "conversation_id"])
    keys = [(str(c), str(t)) for c, t in ds.items.itertuples(index=False) if c in chosen]
    frame = sheet_frame(keys, [""] * len(keys), ds.rubric, conversations, questions=cfg.questions, scores=None)
    out = cfg.out
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, frame.to_csv(index=False))
    plan_path = out.parent / PLAN_FILE
    atomic_write_text(plan_path, plan.to_csv(index=False))
    log.info(f"suggest: {len(chosen)} of {plan.shape[0]} conversations {_how_drawn(cfg, plan)} in {seconds:.1f}s")
    log.info(
        f"suggest: wrote {out} ({len(frame)} rows: every assistant turn of those conversations x question; "
        f"fill in judge_id and answer) and {plan_path}"
    )
    log.info(
        f"suggest: `role-rubric import source=sheet` carries {PLAN_FILE} into the labelled folder, where "
        "`role-rubric estimate` reads it (from Label Studio: import ... plan=PATH)"
    )
    return out


def _how_drawn(cfg: Schema, plan: Any) -> str:
    """How the sample was drawn, as the plan says: one inclusion probability, or one per stratum."""
    common = f"seed {cfg.seed}; budget counts conversations"
    if "stratum" not in plan.columns:
        pi = float(plan["inclusion_probability"].iloc[0])
        return f"drawn uniformly at random ({common}; each has inclusion probability {pi:.4g})"
    per = plan.groupby("stratum")["inclusion_probability"].first()
    shown = ", ".join(f"{name} {p:.4g}" for name, p in per.items())
    return (
        f"drawn at random within each {cfg.strata} stratum ({common}; inclusion probability by stratum: {shown}; "
        "estimate weighs each stratum by its share of the release's turns)"
    )
