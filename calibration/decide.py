"""`role-rubric decide`: per-turn decisions (adheres / violates / escalate) at a guaranteed risk.

What is promised, and how the threshold is chosen: calibration/evaluation/risk_control.py. Here: the
adherence probability of a model's turns, the reviewers' votes, the calibration turns stored beside the
model (for `RoleAdherence(risk=...)`), and the command.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from calibration.evaluation.risk_control import RISK_LEVELS, Threshold, calibrate, decide
from calibration.model.provenance import refuse_overlap
from rubric.errors import InputError
from rubric.files import atomic_to_csv
from rubric.identity import check_same_judge, dataset_judge_identity, identity_differences
from rubric.jsonfile import jsonable, write_json  # noqa: F401  (jsonable: importable here as before)
from rubric.notices import warn_data

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

CALIBRATION_FILE = "decide_calibration.csv"


def turn_votes(ds, adheres_at: float) -> pd.DataFrame:
    """Per labelled item of `ds`: n_reviewers with a target answer and n_adheres among them."""
    t = ds.target_index
    rows = np.flatnonzero(ds.answers[:, t] >= 0)
    value = ds.option_values()[t][ds.answers[rows, t]]
    frame = pd.DataFrame({"item": ds.label_item[rows], "adheres": (value >= adheres_at).astype(int)})
    votes = (
        frame.groupby("item")["adheres"]
        .agg(["sum", "count"])
        .rename(columns={"sum": "n_adheres", "count": "n_reviewers"})
    )
    return votes.reset_index()


def default_adheres_at(question) -> float:
    """The lowest value of the upper half of the options (3 on 1-4): `Question.default_adheres_at`."""
    return question.default_adheres_at


def adherence_probability(model, ds, adheres_at: float) -> np.ndarray:
    """(N,) P(target >= adheres_at) per item of `ds`, the model's distribution averaged over every training
    judge (the population model where it has none or is not personalised)."""
    import torch

    X = torch.from_numpy(ds.features(model.spec))
    items = np.arange(len(ds.items))
    judges = range(len(model.judges)) if model.judges and model.settings.personalised else [-1]
    probs = sum(model.proba(X, items, np.full(len(items), j, dtype=np.int64)) for j in judges) / len(judges)
    t = ds.target_index
    k = int(ds.n_options[t])
    above = ds.option_values()[t, :k] >= adheres_at
    if not above.any():
        raise InputError(
            f"adheres_at={adheres_at:g} is above every option of {ds.rubric.target!r}.",
            fix="pass a value among the target's options.",
        )
    return probs[:, t, :k][:, above].sum(1)


def calibration_table(model, ds, adheres_at: float) -> pd.DataFrame:
    """The calibration turns: ids, p_adheres and the reviewers' votes (turns without a target answer out)."""
    votes = turn_votes(ds, adheres_at)
    p = adherence_probability(model, ds, adheres_at)
    keys = ds.items.iloc[votes["item"]].reset_index(drop=True)
    return keys.assign(
        p_adheres=p[votes["item"]],
        n_adheres=votes["n_adheres"].to_numpy(),
        n_reviewers=votes["n_reviewers"].to_numpy(),
        adheres_at=adheres_at,
    )


def load_calibration(model_dir: str | Path) -> pd.DataFrame:
    """The calibration turns `role-rubric decide` stored beside a model."""
    path = Path(model_dir) / CALIBRATION_FILE
    if not path.exists():
        raise InputError(
            "the model has no decision calibration.",
            path=path,
            fix="run `role-rubric decide model=DIR calibration=LABELLED_DIR` first.",
        )
    return pd.read_csv(path, dtype={"conversation_id": str, "turn": str}, keep_default_na=False)


def threshold_from(table: pd.DataFrame, *, risk: float, delta: float, against: str = "majority") -> Threshold:
    return calibrate(
        table["p_adheres"].to_numpy(float),
        table["n_adheres"].to_numpy(int),
        table["n_reviewers"].to_numpy(int),
        risk=risk,
        delta=delta,
        against=against,
    )


def run_decide(cfg) -> Path:
    """CLI: `role-rubric decide model=MODEL_DIR calibration=LABELLED_DIR [data=DIR] risk=0.1 delta=0.1
    [against=majority|reviewers] out=DIR`. Stores the calibration turns beside the model (for
    `RoleAdherence(risk=...)`), writes threshold.json (with the risk-coverage curve on the calibration
    turns; threshold null where no threshold passes and every turn is escalated) and, given data=DIR,
    decisions.csv (one row per turn)."""
    from calibration import load_dataset, load_model
    from calibration.release.checks import check_adheres_at, check_target_answered

    model = load_model(cfg.model)
    rubric = model.check_rubric(Path(cfg.calibration) / "rubric.yaml")
    allow = bool(cfg["allow_judge_mismatch"])
    # A threshold calibrated on another judge's distributions promises nothing about this model's turns.
    for key in ("calibration", "data") if cfg.get("data") else ("calibration",):
        check_same_judge(
            model.judge_identity, dataset_judge_identity(cfg[key]), allow=allow, command="decide", where=cfg[key]
        )
    if cfg.get("data") and not model.judge_identity and not allow:  # then the calibration set's judge is the reference
        cal_judge, data_judge = (dataset_judge_identity(cfg[k]) for k in ("calibration", "data"))
        diffs = identity_differences(cal_judge, data_judge) if cal_judge and data_judge else []
        if diffs or bool(cal_judge) != bool(data_judge):
            raise InputError(
                f"the turns to decide come from another judge than the calibration set's "
                f"({'; '.join(diffs) or 'one of them has no judge record'}): the risk bound would not hold.",
                path=cfg.data,
                fix="decide turns gathered by the calibration set's judge, or pass allow_judge_mismatch=true.",
            )
    cal = load_dataset(cfg.calibration, rubric=rubric)
    check_target_answered(cal, Path(cfg.calibration) / "labels.csv")  # else no calibration turn, every turn escalated
    # The risk bound holds only on turns the model never trained on (calibration/model/provenance.py).
    if not refuse_overlap(model, cal, what="the calibration set", path=cfg.calibration, folder=cfg.calibration):
        warn_data(
            "decide",
            [
                "the model does not record its training conversations (trained before they were "
                "recorded), so it cannot be checked that the calibration set is held out"
            ],
        )
    check_adheres_at(rubric.question(rubric.target), None if cfg.get("adheres_at") is None else float(cfg.adheres_at))
    adheres_at = (
        default_adheres_at(rubric.question(rubric.target)) if cfg.get("adheres_at") is None else float(cfg.adheres_at)
    )
    table = calibration_table(model, cal, adheres_at)
    atomic_to_csv(table, Path(cfg.model) / CALIBRATION_FILE)
    risk, delta, against = float(cfg.risk), float(cfg.delta), str(cfg.against)
    chosen = threshold_from(table, risk=risk, delta=delta, against=against)
    curve = [asdict(threshold_from(table, risk=r, delta=delta, against=against)) for r in RISK_LEVELS]
    out = Path(cfg.out)
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
    if cfg.get("data"):
        ds = load_dataset(cfg.data, rubric=model.check_rubric(Path(cfg.data) / "rubric.yaml"), require_labels=False)
        p = adherence_probability(model, ds, adheres_at)
        frame = ds.items.assign(p_adheres=p, decision=decide(p, chosen.threshold))
        atomic_to_csv(frame, out / "decisions.csv")
        counts = frame["decision"].value_counts().to_dict()
        log.info(
            "decide: "
            + ", ".join(f"{counts.get(k, 0)} {k}" for k in ("adheres", "violates", "escalate"))
            + f" of {len(frame)} turns"
        )
    log.info(
        f"decide: wrote {out / 'threshold.json'}{' and decisions.csv' if cfg.get('data') else ''}; "
        f"calibration turns stored in {Path(cfg.model) / CALIBRATION_FILE}"
    )
    return out
