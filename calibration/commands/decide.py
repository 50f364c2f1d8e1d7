"""`role-rubric decide`: per-turn decisions (adheres / violates / escalate) at a guaranteed risk.

Its keys: calibration.schema.commands_release `Decide` (`role-rubric decide --help`); the library it calls:
calibration.release.decide (the calibration turns, the adherence probability), calibration.evaluation.risk_control
(the threshold and the decisions).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from calibration.schema.commands_release import Decide as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> Path:
    """CLI: `role-rubric decide model=MODEL_DIR calibration=LABELLED_DIR [data=DIR] risk=0.1 delta=0.1
    [against=majority|reviewers] out=DIR`. Stores the calibration turns beside the model (for
    `RoleAdherence(risk=...)`), writes threshold.json (with the risk-coverage curve on the calibration
    turns; threshold null where no threshold passes and every turn is escalated) and, given data=DIR,
    decisions.csv (one row per turn). Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration import load_model
    from calibration.release.checks import check_adheres_at
    from calibration.release.decide import CALIBRATION_FILE, calibration_table, default_adheres_at
    from rubric.files import atomic_to_csv

    model = load_model(cfg.model)
    rubric = model.check_rubric(cfg.calibration / "rubric.yaml")
    _check_judges(cfg, model)
    cal = _calibration_set(cfg, model, rubric)
    check_adheres_at(rubric.question(rubric.target), cfg.adheres_at)
    adheres_at = default_adheres_at(rubric.question(rubric.target)) if cfg.adheres_at is None else cfg.adheres_at
    table = calibration_table(model, cal, adheres_at)
    atomic_to_csv(table, cfg.model / CALIBRATION_FILE)
    out = cfg.out
    chosen = _write_threshold(cfg, table, adheres_at, out)
    if cfg.data:
        _decide_turns(cfg.data, model, adheres_at, chosen.threshold, out)
    log.info(
        f"decide: wrote {out / 'threshold.json'}{' and decisions.csv' if cfg.data else ''}; "
        f"calibration turns stored in {cfg.model / CALIBRATION_FILE}"
    )
    return out


def _check_judges(cfg: Schema, model: Any) -> None:
    """Refuse a calibration set (or turns to decide) from another judge than the model's: a threshold
    calibrated on another judge's distributions promises nothing about this model's turns."""
    from rubric.errors import InputError
    from rubric.judge.identity import check_same_judge, dataset_judge_identity, identity_differences
    from rubric.notices import warn_data

    allow = cfg.allow_judge_mismatch
    for folder in (cfg.calibration, cfg.data) if cfg.data else (cfg.calibration,):
        check_same_judge(
            model.judge_identity,
            dataset_judge_identity(folder),
            allow=allow,
            command="decide",
            where=folder,
            model=cfg.model,
        )
    # a model without a judge record (used with allow_judge_mismatch=true, or beside two folders without
    # one): the calibration set's judge is the reference, and the turns to decide must come from it too
    if cfg.data and not model.judge_identity:
        cal_judge, data_judge = (dataset_judge_identity(folder) for folder in (cfg.calibration, cfg.data))
        diffs = identity_differences(cal_judge, data_judge) if cal_judge and data_judge else []
        if not (diffs or bool(cal_judge) != bool(data_judge)):
            return
        what = f"another judge than the calibration set's ({'; '.join(diffs) or 'one of them has no judge record'})"
        if allow:
            warn_data("decide", [f"the turns to decide come from {what}; used anyway (allow_judge_mismatch=true)."])
            return
        raise InputError(
            f"the turns to decide come from {what}: the risk bound would not hold.",
            path=cfg.data,
            fix="decide turns gathered by the calibration set's judge, or pass allow_judge_mismatch=true.",
        )


def _calibration_set(cfg: Schema, model: Any, rubric: Any) -> Any:
    """The calibration dataset, checked: its target answered, and held out of the model's training."""
    from calibration import load_dataset
    from calibration.model.provenance import refuse_overlap
    from calibration.release.checks import check_target_answered
    from rubric.notices import warn_data

    cal = load_dataset(cfg.calibration, rubric=rubric)
    check_target_answered(cal, cfg.calibration / "labels.csv")  # else no calibration turn, every turn escalated
    # The risk bound holds only on turns the model never trained on (calibration/model/provenance.py).
    if not refuse_overlap(model, cal, what="the calibration set", path=cfg.calibration, folder=cfg.calibration):
        warn_data(
            "decide",
            [
                "the model does not record its training conversations (trained before they were "
                "recorded), so it cannot be checked that the calibration set is held out"
            ],
        )
    return cal


def _write_threshold(cfg: Schema, table: Any, adheres_at: float, out: Path) -> Any:
    """Choose the threshold at risk=, delta=, against=, write OUT/threshold.json with its risk-coverage
    curve, and log what it decides: the chosen `Threshold`."""
    from dataclasses import asdict

    from calibration.evaluation.risk_control import RISK_LEVELS
    from calibration.release.decide import threshold_from
    from rubric.jsonfile import write_json

    risk, delta, against = cfg.risk, cfg.delta, cfg.against
    chosen = threshold_from(table, risk=risk, delta=delta, against=against)
    curve = [asdict(threshold_from(table, risk=r, delta=delta, against=against)) for r in RISK_LEVELS]
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "threshold.json", {**asdict(chosen), "adheres_at": adheres_at, "risk_coverage": curve})
    where = f"decide: {len(table)} calibration turns; at risk {risk:g}, delta {delta:g} ({against}): "
    if math.isinf(chosen.threshold):
        log.info(
            where + "no threshold passes, so every turn is escalated (threshold null in threshold.json); "
            "a looser risk or more calibration turns may decide some"
        )
    else:
        log.info(
            where + f"threshold {chosen.threshold:.4g}, decides {chosen.coverage:.1%} of them "
            f"(disagreement there {chosen.disagreement:.3f})"
        )
    return chosen


def _decide_turns(data: str, model: Any, adheres_at: float, threshold: float, out: Path) -> None:
    """Decide every turn of data=DIR at the threshold: OUT/decisions.csv, one row per turn."""
    from calibration import load_dataset
    from calibration.evaluation.risk_control import decide
    from calibration.release.decide import adherence_probability
    from rubric.files import atomic_to_csv

    ds = load_dataset(data, rubric=model.check_rubric(Path(data) / "rubric.yaml"), require_labels=False)
    p = adherence_probability(model, ds, adheres_at)
    frame = ds.items.assign(p_adheres=p, decision=decide(p, threshold))
    atomic_to_csv(frame, out / "decisions.csv")
    counts = frame["decision"].value_counts().to_dict()
    log.info(
        "decide: "
        + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("adheres", "violates", "escalate"))
        + f" of {len(frame)} turns"
    )
