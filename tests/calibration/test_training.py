"""Training, cross-validation, model files and prediction on small seeded data."""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.data.dataset import load_dataset
from calibration.evaluation.crossval import cross_validate
from calibration.model.files import load_model
from calibration.model.settings import Settings
from tests.calibration.conftest import train_quick

FAST = Settings(
    hidden1=10, hidden2=10, pretrain_steps=60, finetune_steps=80, ensemble=2, eval_every=10, recalibrate_min_members=2
)


def test_same_seed_gives_bitwise_identical_predictions(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    a = cross_validate(ds, FAST, folds=3, seed=4, baselines=False).predictions
    b = cross_validate(ds, FAST, folds=3, seed=4, baselines=False).predictions
    c = cross_validate(ds, FAST, folds=3, seed=5, baselines=False).predictions
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert not np.array_equal(a["expected"].to_numpy(), c["expected"].to_numpy())


def test_calibration_beats_the_raw_judge_and_constant(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    metrics = cross_validate(ds, FAST, folds=4, seed=0).metrics
    assert metrics["calibrated"]["rmse"] < metrics["expected_llm"]["rmse"]
    assert metrics["calibrated"]["rmse"] < metrics["constant"]["rmse"]
    assert metrics["calibrated"]["nll"] < metrics["constant"]["nll"]
    assert metrics["calibrated"]["pearson"] > 0.5


def test_out_of_fold_predictions_cover_every_labelled_row_once(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    pred = cross_validate(ds, FAST, folds=3, seed=0).predictions
    calibrated = pred[pred["method"] == "calibrated"]
    assert len(calibrated) == int((ds.answers[:, ds.target_index] >= 0).sum())
    assert not calibrated.duplicated(["conversation_id", "turn", "judge_id"]).any()
    probs = calibrated[["p_1", "p_2", "p_3", "p_4"]].to_numpy()
    assert np.allclose(probs.sum(1), 1) and (probs > 0).all()
    # no conversation is in two folds
    assert calibrated.groupby("conversation_id")["fold"].nunique().max() == 1


def test_train_predict_evaluate_from_the_command_line(synthetic_dir, tmp_path, capsys):
    model, pred, metrics = tmp_path / "model", tmp_path / "pred.csv", tmp_path / "metrics.json"
    fast = ["train.pretrain_steps=40", "train.finetune_steps=40", "train.ensemble=2", "network.hidden1=8"]
    assert main(["train", f"data={synthetic_dir}", f"out={model}", *fast]) == 0
    assert f"wrote model to {model}" in capsys.readouterr().out
    assert (model / "weights.safetensors").exists() and json.loads((model / "model.json").read_text())["judges"]
    assert main(["predict", f"model={model}", f"data={synthetic_dir}", f"out={pred}"]) == 0
    frame = pd.read_csv(pred, dtype={"judge_id": str})
    assert set(frame["question_id"]) == {"scope", "tone", "overall"}
    assert frame.loc[frame["question_id"] == "tone", "p_4"].isna().all()  # tone has 3 options
    # the shift check (calibration/model/shift.py): model.json keeps a small training sample; its own data passes
    assert len(json.loads((model / "model.json").read_text())["shift_reference"]["conversations"]) == 40
    assert (model / "model.json").stat().st_size < 1_000_000
    shift = json.loads((tmp_path / "pred_shift.json").read_text())["shift"]
    assert shift["checked"] and not shift["fired"] and shift["n_conversations"] == 40
    assert main(["evaluate", f"predictions={pred}", f"data={synthetic_dir}", f"out={metrics}"]) == 0
    assert set(json.loads(metrics.read_text())) == {"rmse", "pearson", "spearman", "kendall", "n"}
    assert (
        main(["predict", f"model={model}", f"data={synthetic_dir}", f"out={tmp_path / 'pop.csv'}", "judges=population"])
        == 0
    )
    pop = pd.read_csv(tmp_path / "pop.csv", keep_default_na=False)
    assert (pop["judge_id"] == "").all()


def test_saved_model_predicts_exactly_what_it_predicted_in_memory(synthetic_dir, tmp_path):
    from calibration.model.ensemble import ensemble_proba, train_ensemble
    from calibration.model.files import save_model

    ds = load_dataset(synthetic_dir)
    net, spec, plan = train_ensemble(ds, FAST, seed=1)
    assert plan.recalibration is not None and plan.recalibration.question == ds.target_index
    save_model(tmp_path / "m", net, ds, spec, FAST, history=plan.history, recalibration=plan.recalibration)
    loaded = load_model(tmp_path / "m")
    import torch

    X = torch.from_numpy(ds.features(spec))
    items, judges = ds.label_item[:20], ds.label_judge[:20]
    in_memory = ensemble_proba(net, X, items, judges, recalibration=plan.recalibration)
    assert np.array_equal(in_memory, loaded.proba(X, items, judges))
    assert not np.array_equal(in_memory, ensemble_proba(net, X, items, judges))  # the recalibration is used


def test_unseen_judge_at_predict_time_gets_the_population_model(synthetic_dir, tmp_path, capsys):
    model = tmp_path / "model"
    assert train_quick(synthetic_dir, model, steps=20) == 0
    assert (
        main(["predict", f"model={model}", f"data={synthetic_dir}", f"out={tmp_path / 'new.csv'}", "judges=[newcomer]"])
        == 0
    )
    assert "not seen in training, predicted by the population model: ['newcomer']" in capsys.readouterr().out
    assert (
        main(["predict", f"model={model}", f"data={synthetic_dir}", f"out={tmp_path / 'pop.csv'}", "judges=population"])
        == 0
    )
    new = pd.read_csv(tmp_path / "new.csv")
    pop = pd.read_csv(tmp_path / "pop.csv")
    assert np.array_equal(new["expected"].to_numpy(), pop["expected"].to_numpy())


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda m: (m / "model.json").write_text("{"), "model.json is not valid JSON"),
        (lambda m: (m / "model.json").write_text('{"format": "pickle"}'), "unknown model format 'pickle'"),
        (lambda m: (m / "weights.safetensors").write_bytes(b"not a tensor file"), "weights do not match model.json"),
        (lambda m: (m / "weights.safetensors").unlink(), "not a model directory"),
    ],
    ids=["json", "format", "weights", "missing"],
)
def test_wrong_model_file_fails_clearly(corrupt, message, synthetic_dir, tmp_path, capsys):
    model = tmp_path / "model"
    assert train_quick(synthetic_dir, model, steps=5) == 0
    corrupt(model)
    assert main(["predict", f"model={model}", f"data={synthetic_dir}", f"out={tmp_path / 'p.csv'}"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_model_refuses_data_with_another_rubric(synthetic_dir, llm_rubric_dir, tmp_path, capsys):
    model = tmp_path / "model"
    assert train_quick(synthetic_dir, model, steps=5) == 0
    assert main(["predict", f"model={model}", f"data={llm_rubric_dir}", f"out={tmp_path / 'p.csv'}"]) == 2
    assert "differs from the one the model was trained on" in capsys.readouterr().err


def test_folds_follow_fold_seed_not_training_seed(synthetic_dir):
    ds = load_dataset(synthetic_dir)
    a = cross_validate(ds, FAST, folds=3, seed=1, fold_seed=0, baselines=False).predictions
    b = cross_validate(ds, FAST, folds=3, seed=2, fold_seed=0, baselines=False).predictions
    c = cross_validate(ds, FAST, folds=3, seed=1, fold_seed=9, baselines=False).predictions
    assert a["fold"].tolist() == b["fold"].tolist()
    assert a["fold"].tolist() != c["fold"].tolist()


def test_nested_cv_adds_a_nested_estimate(synthetic_dir, tmp_path, capsys):
    out = tmp_path / "cv"
    assert (
        main(
            [
                "cv",
                f"data={synthetic_dir}",
                f"out={out}",
                "folds=3",
                "nested=true",
                "search.trials=2",
                "search.inner_folds=2",
                "train.ensemble=1",
                "train.pretrain_steps=20",
                "train.finetune_steps=20",
                "search.space.ensemble={low: 1, high: 1}",
                "search.space.hidden1=[4]",
                "search.space.hidden2=[4]",
                "search.space.pretrain_steps={low: 0, high: 20, step: 20}",
                "search.space.finetune_steps={low: 20, high: 40, step: 20}",
            ]
        )
        == 0
    )
    summary = json.loads((out / "metrics.json").read_text())
    assert "calibrated_nested" in summary["metrics"] and len(summary["nested_choices"]) == 3
    reviewers = json.loads((out / "reviewers.json").read_text())["questions"]  # calibration/evaluation/reviewers.py
    assert reviewers["overall"]["calibrated"]["n"] > 0 and reviewers["overall"]["alt_test"]["epsilon"] == 0.1
    assert f"wrote {out / 'predictions.csv'}" in capsys.readouterr().out


def test_in_memory_tables_accept_nullable_turns(synthetic_dir):
    from calibration.data.dataset import dataset_from_frames
    from rubric.schema import load_rubric

    llm = pd.read_csv(synthetic_dir / "llm.csv")
    llm = llm[llm["turn"] == 0].assign(turn=pd.array([pd.NA] * int((llm["turn"] == 0).sum()), dtype="Int64"))
    ds = dataset_from_frames(load_rubric(synthetic_dir), llm)
    assert (ds.items["turn"] == "").all() and len(ds.items) == llm["conversation_id"].nunique()


def test_parquet_dataset_trains_and_evaluates(synthetic_copy, tmp_path):
    for stem in ("llm", "labels"):
        pd.read_csv(synthetic_copy / f"{stem}.csv").to_parquet(synthetic_copy / f"{stem}.parquet")
        (synthetic_copy / f"{stem}.csv").unlink()
    model, pred = tmp_path / "m", tmp_path / "p.csv"
    assert train_quick(synthetic_copy, model, steps=10) == 0
    assert main(["predict", f"model={model}", f"data={synthetic_copy}", f"out={pred}"]) == 0
    assert main(["evaluate", f"predictions={pred}", f"data={synthetic_copy}", f"out={tmp_path / 'm.json'}"]) == 0
    assert json.loads((tmp_path / "m.json").read_text())["n"] == len(
        pd.read_parquet(synthetic_copy / "labels.parquet").query("question_id == 'overall'")
    )


def test_training_workers_setting(monkeypatch):
    from calibration.model.settings import default_training_workers, training_workers
    from rubric.errors import InputError

    monkeypatch.delenv("ROLE_RUBRIC_WORKERS", raising=False)
    assert training_workers(3) == 3 and training_workers(0) == 1
    with default_training_workers(1):
        assert training_workers(None) == 1  # e.g. inside search's worker processes
    assert "ROLE_RUBRIC_WORKERS" not in os.environ  # restored
    monkeypatch.setenv("ROLE_RUBRIC_WORKERS", "2")
    with default_training_workers(1):
        assert training_workers(None) == 2  # the user's setting wins
    monkeypatch.setenv("ROLE_RUBRIC_WORKERS", "two")
    with pytest.raises(InputError, match="ROLE_RUBRIC_WORKERS='two' is not a whole number"):
        training_workers(None)
