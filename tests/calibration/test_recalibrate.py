"""Pooling ensemble members and recalibrating the target on held-out rows (calibration/model/recalibrate.py)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from calibration.data.dataset import load_dataset
from calibration.evaluation.crossval import cross_validate
from calibration.model.recalibrate import (
    Recalibration,
    fit_recalibration,
    fit_vector_scaling,
    out_of_bag,
    pool,
)
from calibration.model.settings import Settings
from tests.calibration.conftest import train_quick

FAST = Settings(
    hidden1=10,
    hidden2=10,
    pretrain_steps=60,
    finetune_steps=80,
    ensemble=3,
    eval_every=10,
    val_fraction=0.3,
    recalibrate_min_members=1,  # recalibrate even these 3-member ensembles, to test it
)


def test_pooling_geometric_and_arithmetic():
    a, b = np.array([0.5, 0.5, 0.0]), np.array([0.9, 0.1, 0.0])
    with np.errstate(divide="ignore"):
        logp = np.log(np.stack([a, b]))[:, None]  # (E=2, B=1, K=3); option 3 is padding (-inf)
    assert np.allclose(pool(logp, "arithmetic")[0], [0.7, 0.3, 0.0])
    g = np.sqrt(a[:2] * b[:2])
    assert np.allclose(pool(logp, "geometric")[0], np.r_[g / g.sum(), 0.0])
    assert pool(logp, "geometric")[0, 2] == 0.0
    assert np.allclose(pool(logp[:1], "geometric"), pool(logp[:1], "arithmetic"))  # one member: itself
    with pytest.raises(ValueError, match="unknown pooling"):
        pool(logp, "median")


def test_vector_scaling_recovers_a_known_miscalibration():
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=20_000)
    a, b = np.array([1.0, 0.5, 0.2, 1.5]), np.array([0.0, 0.3, -0.2, 0.1])
    z = np.log(probs) * a + b
    truth = np.exp(z - z.max(1, keepdims=True))
    truth /= truth.sum(1, keepdims=True)
    answers = (truth.cumsum(1) < rng.uniform(size=(len(probs), 1))).sum(1)
    scale, bias = fit_vector_scaling(probs, answers, prior=0.25)
    assert np.allclose(scale, a, atol=0.05) and np.allclose(bias, b, atol=0.1)
    # a strong prior pulls to the identity; no rows gives the identity
    strong, _ = fit_vector_scaling(probs[:50], answers[:50], prior=1e6)
    assert np.allclose(strong, 1.0, atol=1e-3)
    none_scale, none_bias = fit_vector_scaling(probs[:0], answers[:0], prior=0.25)
    assert np.array_equal(none_scale, np.ones(4)) and np.array_equal(none_bias, np.zeros(4))


def test_recalibration_changes_only_its_question_and_round_trips_through_json():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(4), size=(5, 3))  # (B, Q, K)
    probs[:, 1, 3] = 0.0  # question 1 has 3 options
    probs[:, 1] /= probs[:, 1].sum(-1, keepdims=True)
    recal = Recalibration(1, np.array([0.5, 2.0, 1.0]), np.array([0.0, 0.1, -0.3]))
    out = recal.apply(probs)
    assert np.array_equal(out[:, [0, 2]], probs[:, [0, 2]])
    assert not np.allclose(out[:, 1], probs[:, 1])
    assert np.allclose(out[:, 1].sum(-1), 1) and (out[:, 1, 3] == 0).all()
    back = Recalibration.from_dict(json.loads(json.dumps(recal.to_dict())))
    assert np.array_equal(back.apply(probs), out)


def test_out_of_bag_pools_only_the_members_that_validated_on_a_row():
    val_rows = [np.array([2, 5]), np.array([5, 7])]
    lp = [np.log(np.array([[0.2, 0.8], [0.6, 0.4]])), np.log(np.array([[0.2, 0.8], [0.5, 0.5]]))]
    rows, probs = out_of_bag(val_rows, lp, "arithmetic")
    assert rows.tolist() == [2, 5, 7]
    assert np.allclose(probs, [[0.2, 0.8], [0.4, 0.6], [0.5, 0.5]])
    recal = fit_recalibration(
        val_rows,
        lp,
        np.array([-1, -1, 1, -1, -1, 0, -1, 0]),
        question=0,
        n_options=2,
        how="geometric",
        prior=0.25,
    )
    assert recal.scale.shape == (2,) and recal.bias[0] == 0.0


def test_cv_recalibration_never_sees_the_test_fold(synthetic_dir):
    """Changing the answers of one fold's test rows leaves that fold's out-of-fold predictions unchanged, bit
    for bit: its models and its recalibration are fitted on the other folds only."""
    ds = load_dataset(synthetic_dir)
    first = cross_validate(ds, FAST, folds=3, seed=0, baselines=False).predictions
    fold0 = first["fold"].to_numpy() == 0
    t = ds.target_index
    answers = ds.answers.copy()
    from calibration.data.splits import group_folds

    test0 = (group_folds(ds.groups, 3, 0)[ds.label_item] == 0) & (answers[:, t] >= 0)
    answers[test0, t] = 3 - answers[test0, t]  # flip every answer of fold 0
    second = cross_validate(dataclasses.replace(ds, answers=answers), FAST, folds=3, seed=0, baselines=False)
    second = second.predictions
    p = [c for c in first.columns if c.startswith("p_")]
    assert np.array_equal(first.loc[fold0, p].to_numpy(), second.loc[fold0, p].to_numpy())
    assert not np.array_equal(first.loc[~fold0, p].to_numpy(), second.loc[~fold0, p].to_numpy())


def test_cv_pooling_and_recalibration_settings(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    p = ["p_1", "p_2", "p_3", "p_4"]

    def probs(**kw):
        # without the base: members that share it and barely leave it in these few steps would pool
        # to the same distribution either way, and this test is about the pooling
        pred = cross_validate(
            ds, dataclasses.replace(FAST, base="none", **kw), folds=3, seed=0, baselines=False
        ).predictions
        return pred[p].to_numpy()

    plain = probs(pool="arithmetic", recalibrate="none")
    geometric = probs(pool="geometric", recalibrate="none")
    recalibrated = probs(pool="geometric", recalibrate="vector")
    # the members (and so the expected answers' ranking) are the same; only pooling/recalibration differ
    assert np.allclose(plain.sum(1), 1) and np.allclose(recalibrated.sum(1), 1)
    assert not np.allclose(plain, geometric) and not np.allclose(geometric, recalibrated)
    assert np.abs(plain - geometric).max() < 0.2
    # an overwhelming prior is the identity map
    assert np.allclose(probs(pool="geometric", recalibrate="vector", recalibrate_prior=1e9), geometric, atol=1e-6)


def test_bad_pool_or_recalibration_setting_is_one_clear_error(synthetic_dir, tmp_path, capsys):
    from calibration.cli import main

    assert main(["cv", f"data={synthetic_dir}", f"out={tmp_path}", "train.pool=median"]) != 0
    assert "train.pool='median' is not one of the choices" in capsys.readouterr().err
    assert main(["cv", f"data={synthetic_dir}", f"out={tmp_path}", "train.recalibrate=isotonic"]) != 0
    assert "train.recalibrate='isotonic'" in capsys.readouterr().err


def test_a_model_saved_before_recalibration_loads_with_arithmetic_pooling(synthetic_dir, tmp_path):
    from calibration.model.files import load_model

    model = tmp_path / "m"
    assert train_quick(synthetic_dir, model, steps=20, ensemble=2, extra=("train.recalibrate_min_members=2",)) == 0
    meta = json.loads((model / "model.json").read_text())
    assert meta["settings"]["pool"] == "geometric" and len(meta["recalibration"]["scale"]) == 4
    for key in ("pool", "recalibrate", "recalibrate_prior", "recalibrate_min_members"):
        del meta["settings"][key]
    del meta["recalibration"]
    del meta["integrity"]  # models of that time carried no checksums either, nor the fields written since them
    meta.pop("shift_reference", None)
    if meta.get("model") == "network":
        del meta["model"]
    (model / "model.json").write_text(json.dumps(meta))
    old = load_model(model)
    assert old.settings.pool == "arithmetic" and old.recalibration is None


def test_small_ensembles_are_not_recalibrated(synthetic_dir):
    """Below recalibrate_min_members too few rows are out of bag: the pooled members are used as they are."""
    ds = load_dataset(synthetic_dir)
    p = ["p_1", "p_2", "p_3", "p_4"]
    assert not Settings(ensemble=5).recalibrates(5) and Settings().recalibrates(16)
    assert not Settings(recalibrate="none").recalibrates(16)

    def probs(**kw):
        settings = dataclasses.replace(FAST, **kw)
        return cross_validate(ds, settings, folds=3, seed=0, baselines=False).predictions[p].to_numpy()

    too_few = probs(recalibrate_min_members=4)  # 3 members per fold
    assert np.array_equal(too_few, probs(recalibrate="none"))
    assert not np.array_equal(too_few, probs(recalibrate_min_members=3))
