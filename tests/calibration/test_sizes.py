"""Too little data for what was asked: one clear error for unfillable folds, warnings for noisy estimates."""

from __future__ import annotations

import pytest

from calibration.cli import main
from calibration.data.dataset import load_dataset
from calibration.evaluation.sizes import check_folds, reliability_warnings, size_warnings
from rubric.errors import InputError

from .conftest import make_native_dataset


def test_small_data_warnings_and_unfillable_folds(tmp_path, capsys):
    data = make_native_dataset(tmp_path / "d", n_conversations=3, n_judges=6)
    ds = load_dataset(data)
    with pytest.raises(InputError, match=r"3 labelled conversation\(s\) cannot fill 5 folds.*folds=3 or fewer"):
        check_folds(ds, 5)
    check_folds(ds, 3)
    warnings = " ".join(size_warnings(ds, 3))
    assert "only 6 labelled items for 3 folds" in warnings and "fewer than 5 labels" in warnings
    assert main(["cv", f"data={data}", f"out={tmp_path / 'cv'}", "folds=5"]) == 2
    assert "cannot fill 5 folds" in capsys.readouterr().err
    big = load_dataset(make_native_dataset(tmp_path / "big", n_conversations=80, n_judges=3))
    assert size_warnings(big, 2) == []


def test_reliability_panels_with_few_positives_are_named():
    curves = [{"name": "answer = 1", "positives": 3}, {"name": "answer = 2", "positives": 40}]
    (line,) = reliability_warnings(curves)
    assert "answer = 1 (3)" in line and "answer = 2" not in line
    assert reliability_warnings(curves[1:]) == []
