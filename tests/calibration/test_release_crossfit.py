"""`estimate crossfit=K`: adapt the calibrator and estimate from the same labels (calibration/release/crossfit.py)."""

from __future__ import annotations

import json

import pytest

from calibration.cli import main
from tests.calibration.test_estimate import _estimate, release  # noqa: F401  (the module's trained release)


def test_crossfit_estimates_and_writes_the_adapted_model(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "crossfit=2") == 0
    result = json.loads((out / "estimate.json").read_text())
    assert result["crossfit"]["k"] == 2 and result["training_overlap_checked"] is True
    rate = result["rate"]
    assert 0 <= rate["ppi"]["low"] <= rate["ppi"]["estimate"] <= rate["ppi"]["high"] <= 1
    assert rate["n_labelled_conversations"] == 16
    if rate["ppi"]["lambda"] > 0:  # ppi kept the calibrators: the two predictors' lams, as printed
        parts = rate["ppi"]["lambda_crossfit"], rate["ppi"]["lambda_unadapted"]
        assert min(parts) >= 0 and sum(parts) == pytest.approx(rate["ppi"]["lambda"])
    adapted = json.loads((out / "adapted_model" / "model.json").read_text())
    trained = [r["data"] for r in adapted["trained_on"]]
    # only what lasts: the training directory and the release itself (by content), no temporary folder
    assert trained == [str(release["train"]), str(release["release"])]
    assert adapted["trained_on"][-1]["n_conversations"] == 16  # every labelled conversation of the release
    assert all(text and text.startswith("text:") for text, _ in adapted["trained_on"][-1]["conversations"])
    # The adapted model has seen these labels: a plain estimate from them with it is refused, as before.
    assert main_estimate_with(release, out / "adapted_model", tmp_path / "again") == 2
    assert "trained on" in capsys.readouterr().err
    # ... and it adapts again on the next release (its training directories are all still there).
    again = tmp_path / "next"
    code = main(
        ["estimate", f"data={release['baseline']}", f"model={out / 'adapted_model'}", f"out={again}", "crossfit=2"]
    )
    assert code == 0, capsys.readouterr().err
    readapted = json.loads((again / "adapted_model" / "model.json").read_text())
    assert [r["data"] for r in readapted["trained_on"]] == [*trained, str(release["baseline"])]


def test_the_models_own_labels_are_refused_naming_the_users_folders(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    code = main(["estimate", f"data={release['train']}", f"model={release['model']}", f"out={out}", "crossfit=2"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert f"{release['train'] / 'labels.csv'}: 30 of the 30 labelled conversations" in err, err
    assert "crossfit-" not in err and "model was trained on" in err, err
    assert not out.exists() or not any(out.iterdir())


def test_on_shift_refuse_trains_nothing(release, tmp_path, capsys):  # noqa: F811
    import shutil

    import pandas as pd

    shifted = tmp_path / "shifted"
    shutil.copytree(release["release"], shifted)
    llm = pd.read_csv(shifted / "llm.csv", dtype={"conversation_id": str, "turn": str})
    llm["prob"] = (llm["option"] == llm.groupby("question_id")["option"].transform("min")).astype(float)
    llm.to_csv(shifted / "llm.csv", index=False)
    out = tmp_path / "out"
    args = [f"data={shifted}", f"model={release['model']}", f"out={out}", "crossfit=2", "on_shift=refuse"]
    assert main(["estimate", *args]) == 2
    assert "refused" in capsys.readouterr().err
    assert not (out / "adapted_model").exists() and not (out / "estimate.json").exists()


def main_estimate_with(release, model, out) -> int:  # noqa: F811
    from calibration.cli import main

    return main(["estimate", f"data={release['release']}", f"model={model}", f"out={out}"])


@pytest.mark.parametrize("k", ["17", "1", "0", "2.5"])
def test_bad_fold_counts_are_refused_and_nothing_written(release, tmp_path, capsys, k):  # noqa: F811
    assert _estimate(release, tmp_path / "out", f"crossfit={k}") == 2
    err = capsys.readouterr().err
    assert "crossfit" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "estimate.json").exists() and not (tmp_path / "out" / "adapted_model").exists()
