"""Reliability diagrams: known calibration errors, repeatability, no global side effects, drawing."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pytest

from calibration.report.reliability import plot_reliability, prepare_reliability
from tests.calibration.conftest import png_bytes

VALUES = [1, 2, 3, 4]
FAST = {"n_boot": 20, "band_bootstrap": 20}


def _calibrated(seed: int, n: int = 1500) -> tuple[np.ndarray, np.ndarray]:
    """Distributions and answers drawn from them: calibrated by construction."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1.5, size=(n, 4))
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = 1 + (rng.random((n, 1)) > probs.cumsum(axis=1)).sum(axis=1)
    return probs, labels


def test_known_calibration_error_of_constant_predictions() -> None:
    probs = np.tile([0.1, 0.2, 0.3, 0.4], (400, 1))
    labels = np.repeat(VALUES, 100)
    data = prepare_reliability(probs, labels, values=VALUES, threshold=3, **FAST)
    expected = {
        "answer = 1": 0.15,
        "answer = 2": 0.05,
        "answer = 3": 0.05,
        "answer = 4": 0.15,
        "answer >= 3": 0.2,
    }
    assert {c["name"]: round(c["smece"], 4) for c in data["curves"]} == expected
    assert [c["positives"] for c in data["curves"]] == [100, 100, 100, 100, 200]


def test_calibrated_predictions_have_small_smece_inside_its_interval() -> None:
    probs, labels = _calibrated(0)
    data = prepare_reliability(probs, labels, values=VALUES, threshold=3, groups=np.arange(1500) // 3, **FAST)
    for curve in data["curves"]:
        assert curve["smece"] < 0.04
        assert curve["low"] <= curve["smece"] <= curve["high"]


def test_overconfident_predictions_are_detected() -> None:
    probs, labels = _calibrated(1)
    sharpened = probs**3 / (probs**3).sum(axis=1, keepdims=True)
    calibrated = prepare_reliability(probs, labels, values=VALUES, **FAST)
    overconfident = prepare_reliability(sharpened, labels, values=VALUES, **FAST)
    for good, bad in zip(calibrated["curves"], overconfident["curves"], strict=True):
        assert bad["smece"] > 2 * good["smece"]
        assert bad["low"] > good["smece"]


def test_same_seed_same_numbers_and_global_rng_untouched() -> None:
    probs, labels = _calibrated(2, n=300)
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    a = prepare_reliability(probs, labels, values=VALUES, threshold=3, seed=5, **FAST)
    assert np.random.random() == expected_next
    b = prepare_reliability(probs, labels, values=VALUES, threshold=3, seed=5, **FAST)
    c = prepare_reliability(probs, labels, values=VALUES, threshold=3, seed=6, **FAST)
    for ca, cb, cc in zip(a["curves"], b["curves"], c["curves"], strict=True):
        assert (ca["low"], ca["high"]) == (cb["low"], cb["high"])
        assert np.array_equal(ca["diagram"]["upper"], cb["diagram"]["upper"])
        assert not np.array_equal(ca["diagram"]["upper"], cc["diagram"]["upper"])


def test_column_labels_are_accepted() -> None:
    probs, labels = _calibrated(3, n=200)
    flat = prepare_reliability(probs, labels, values=VALUES, **FAST)
    column = prepare_reliability(probs, labels.reshape(-1, 1), values=VALUES, **FAST)
    assert [c["smece"] for c in flat["curves"]] == [c["smece"] for c in column["curves"]]


def test_plot_draws_one_panel_per_curve_and_is_repeatable() -> None:
    probs, labels = _calibrated(4, n=300)
    data = prepare_reliability(probs, labels, values=VALUES, threshold=3, **FAST)
    data["curves"] = data["curves"][-2:]  # drawing is the slow part; two panels show the layout
    fig, axes = plot_reliability(data)
    assert len(axes) == 2
    assert "smECE" in axes[0].get_title() and "answer >= 3" in axes[1].get_title()
    first = png_bytes(fig, dpi=60)
    second = png_bytes(plot_reliability(data)[0], dpi=60)
    assert first == second and first.startswith(b"\x89PNG")


def test_plot_into_given_axes() -> None:
    probs, labels = _calibrated(5, n=200)
    data = prepare_reliability(probs, labels, values=VALUES, **FAST)
    data["curves"] = data["curves"][:1]
    fig, ax = plt.subplots()
    got_fig, got_ax = plot_reliability(data, ax=ax)
    assert got_fig is fig and got_ax is ax
    with pytest.raises(ValueError, match="1 curves"):
        plot_reliability(data, ax=[ax, ax])
    plt.close(fig)


@pytest.mark.parametrize(
    ("probs", "labels", "match"),
    [
        (np.full((3, 4), 0.25), [1, 2, 5], r"\[5\.0\], which are not option values"),
        (np.full((3, 4), 0.3), [1, 2, 3], "sum to 1"),
        (np.full((3, 3), 1 / 3), [1, 2, 3], r"shape \(n, 4\)"),
        (np.full((3, 4), 0.25), [1, 2], "3 rows"),
        (np.array([[1.5, -0.5, 0, 0]] * 2), [1, 2], r"outside \[0, 1\]"),
        (np.zeros((0, 4)), [], "no rows"),
    ],
)
def test_bad_input(probs: np.ndarray, labels: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        prepare_reliability(probs, np.asarray(labels), values=VALUES, **FAST)
