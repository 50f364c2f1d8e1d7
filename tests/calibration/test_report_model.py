"""`role-rubric report model=MODEL_DIR`: the verdict, reliability and per-turn table report the model to be
shipped, whatever its kind; a network's own settings are the ones cross-validated."""

from __future__ import annotations

import json

import pytest

from calibration.cli import main
from tests.calibration.test_report import FAST, _tiny_dataset

TRAIN = [k for k in FAST if k.startswith(("network.", "train."))]
QUICK = [*FAST, "report.ablations=false", "report.targets=false", "report.learning_curve.repeats=0"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("report_model")
    data = _tiny_dataset(root / "data")
    assert main(["cv", f"data={data}", f"out={root / 'cv'}", "folds=2", *TRAIN]) == 0
    assert main(["train", f"data={data}", f"out={root / 'linear'}", "model=linear"]) == 0
    assert main(["train", f"data={data}", f"out={root / 'net'}", *TRAIN, "network.hidden1=6"]) == 0
    return root, data


def _metric(results: dict, method: str) -> float:
    return next(r["value"] for r in results["metrics"] if r["method"] == method and r["metric"] == "rmse")


@pytest.mark.slow
def test_a_linear_model_is_the_one_reported(setup):
    """About a minute on 2 cores: a cv, two trainings and three reports."""
    root, data = setup
    assert main(["report", f"data={data}", f"cv={root / 'cv'}", f"out={root / 'plain'}", *QUICK]) == 0
    assert (
        main(["report", f"data={data}", f"cv={root / 'cv'}", f"model={root / 'linear'}", f"out={root / 'lin'}", *QUICK])
        == 0
    )
    plain = json.loads((root / "plain" / "metrics.json").read_text())
    shipped = json.loads((root / "lin" / "metrics.json").read_text())
    # the out-of-fold linear rows are the reported model; the network's stay beside it as `network`
    assert _metric(shipped, "calibrated") == _metric(plain, "linear")
    assert _metric(shipped, "network") == _metric(plain, "calibrated")
    assert shipped["verdict"]["shipped"] == {"dir": str(root / "linear"), "kind": "linear"}
    assert shipped["verdict"]["calibrated"]["rmse"]["value"] == _metric(plain, "linear")
    assert shipped["reliability"] != plain["reliability"]  # the diagrams are the linear model's
    page = (root / "lin" / "report.html").read_text()
    assert "Model shipped" in page and "a linear model" in page and 'id="turns"' in page
    # the model's own training data: the shift check runs and does not fire
    assert shipped["shift"]["fired"] is False and "shift" not in plain


@pytest.mark.slow
def test_a_network_is_cross_validated_with_its_own_settings(setup):
    root, data = setup
    assert main(["report", f"data={data}", f"model={root / 'net'}", f"out={root / 'netrep'}", *QUICK]) == 0
    results = json.loads((root / "netrep" / "metrics.json").read_text())
    assert results["settings"]["hidden1"] == 6 and results["verdict"]["shipped"]["kind"] == "network"


def test_not_a_model_directory_is_refused(tmp_path, capsys):
    root, data = tmp_path, _tiny_dataset(tmp_path / "data")
    (root / "cv").mkdir()
    assert main(["report", f"data={data}", f"model={root / 'cv'}", f"out={root / 'bad'}", *QUICK]) == 2
    assert "not a model directory" in capsys.readouterr().err
    assert not (root / "bad" / "report.html").exists()


def test_the_shipped_line_says_whether_the_data_is_like_the_models():
    from calibration.report.shipped import shipped_html

    shipped = {"dir": "m", "kind": "network"}
    assert "differ from the model's training data" in shipped_html(shipped, {"checked": True, "fired": True})
    assert "look like the model's training data" in shipped_html(shipped, {"checked": True, "fired": False})
    assert "shift check" not in shipped_html(shipped, {"checked": False, "fired": False})
    assert "shift check" not in shipped_html(shipped)
