"""Agreement metrics on cases with known answers, and invariances."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.evaluation.metrics import agreement, mean_nll


def test_perfect_predictions():
    m = agreement([1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4])
    assert m["rmse"] == 0 and m["pearson"] == pytest.approx(1) and m["kendall"] == pytest.approx(1) and m["n"] == 4


def test_constant_predictions_have_undefined_correlation():
    m = agreement([2.5, 2.5, 2.5], [1, 3, 4])
    assert math.isnan(m["pearson"]) and m["rmse"] == pytest.approx(np.sqrt((1.5**2 + 0.5**2 + 1.5**2) / 3))


# Predictions on a 1e-6 grid: values one ulp apart (1.0 and 1.0000000000000002) can merge into a tie when
# rescaled in floating point, which changes the ranks; that is rounding, not a property of the metrics.
@given(
    st.lists(st.floats(1, 4).map(lambda v: round(v, 6)), min_size=3, max_size=30), st.floats(0.1, 3), st.floats(-2, 2)
)
@settings(max_examples=50, deadline=None)
def test_correlations_ignore_affine_rescaling(xs, scale, shift):
    rng = np.random.default_rng(len(xs))
    y = rng.integers(1, 5, size=len(xs)).astype(float)
    a, b = agreement(xs, y), agreement([scale * x + shift for x in xs], y)
    for key in ("pearson", "spearman", "kendall"):
        assert (math.isnan(a[key]) and math.isnan(b[key])) or a[key] == pytest.approx(b[key], abs=1e-9)


def test_mean_nll_of_uniform_is_log_k():
    assert mean_nll(np.full((5, 4), 0.25), np.array([0, 1, 2, 3, 0])) == pytest.approx(np.log(4))


def test_shapes_are_checked():
    with pytest.raises(ValueError, match="equal length"):
        agreement([1.0, 2.0], [1])
