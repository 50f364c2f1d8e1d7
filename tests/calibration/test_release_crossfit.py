"""`estimate crossfit=K`: adapt the calibrator and estimate from the same labels (calibration/release/crossfit.py)."""

from __future__ import annotations

import json

import pytest

from tests.calibration.test_estimate import _estimate, release  # noqa: F401  (the module's trained release)


def test_crossfit_estimates_and_writes_the_adapted_model(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "crossfit=2") == 0
    result = json.loads((out / "estimate.json").read_text())
    assert result["crossfit"]["k"] == 2 and result["training_overlap_checked"] is False
    rate = result["rate"]
    assert 0 <= rate["ppi"]["low"] <= rate["ppi"]["estimate"] <= rate["ppi"]["high"] <= 1
    assert rate["n_labelled_conversations"] == 16
    if rate["ppi"]["lambda"] > 0:  # ppi kept the calibrators: the two predictors' lams, as printed
        parts = rate["ppi"]["lambda_crossfit"], rate["ppi"]["lambda_unadapted"]
        assert min(parts) >= 0 and sum(parts) == pytest.approx(rate["ppi"]["lambda"])
    adapted = json.loads((out / "adapted_model" / "model.json").read_text())
    trained = [r["data"] for r in adapted["trained_on"]]
    assert str(release["train"]) in trained and any("all-labels" in t for t in trained)
    assert adapted["trained_on"][-1]["n_conversations"] == 16  # every labelled conversation of the release
    # The adapted model has seen these labels: a plain estimate from them with it is refused, as before.
    assert main_estimate_with(release, out / "adapted_model", tmp_path / "again") == 2
    assert "trained on" in capsys.readouterr().err


def main_estimate_with(release, model, out) -> int:  # noqa: F811
    from calibration.cli import main

    return main(["estimate", f"data={release['release']}", f"model={model}", f"out={out}"])


@pytest.mark.parametrize("k", ["17", "1", "0", "2.5"])
def test_bad_fold_counts_are_refused_and_nothing_written(release, tmp_path, capsys, k):  # noqa: F811
    assert _estimate(release, tmp_path / "out", f"crossfit={k}") == 2
    err = capsys.readouterr().err
    assert "crossfit" in err and err.count("\n") == 1
    assert not (tmp_path / "out" / "estimate.json").exists() and not (tmp_path / "out" / "adapted_model").exists()
