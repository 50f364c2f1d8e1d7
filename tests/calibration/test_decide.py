"""decide: the disagreement losses, the Learn-then-Test threshold (its guarantee on data where the truth is
known), the held-out validation, and the command end to end on a tiny model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.evaluation.risk_control import calibrate, decide, losses, p_value, validate
from rubric.errors import InputError
from tests.calibration.conftest import make_native_dataset


def _calibrated_sample(rng, n: int, reviewers: int = 1):
    """Turns whose adherence probability is exact: each reviewer votes 'adheres' with probability p."""
    p = rng.beta(0.6, 0.6, size=n)
    return p, rng.binomial(reviewers, p), np.full(n, reviewers)


def test_losses_count_a_tie_as_disagreement_and_reviewer_shares():
    yes, no = losses(np.array([2, 1, 0]), np.array([3, 2, 3]))
    assert yes.tolist() == [0.0, 1.0, 1.0] and no.tolist() == [1.0, 1.0, 0.0]
    yes, no = losses(np.array([2, 1]), np.array([3, 2]), against="reviewers")
    assert yes == pytest.approx([1 / 3, 0.5]) and no == pytest.approx([2 / 3, 0.5])


def test_decide_escalates_below_the_threshold_and_everything_at_infinity():
    p = np.array([0.99, 0.7, 0.3, 0.01])
    assert decide(p, 0.95).tolist() == ["adheres", "escalate", "escalate", "violates"]
    assert set(decide(p, np.inf)) == {"escalate"}
    assert "escalate" not in set(decide(p, 0.5))


def test_p_values_are_small_only_when_the_observed_loss_is_well_below_the_risk():
    zeros, highs = np.zeros(100), np.full(100, 0.3)
    assert p_value(zeros, 0.1, binary=True) < 1e-4 and p_value(zeros, 0.1, binary=False) < 1e-3
    assert p_value(highs, 0.1, binary=False) == 1.0
    assert p_value(np.r_[np.ones(10), np.zeros(90)], 0.1, binary=True) > 0.5
    assert p_value(np.zeros(0), 0.1, binary=True) == 1.0


@pytest.mark.parametrize(
    "against,reviewers,least_coverage", [("majority", 1, 0.3), ("majority", 3, 0.3), ("reviewers", 3, 0.1)]
)
def test_the_risk_holds_on_new_turns_with_probability_one_minus_delta(against, reviewers, least_coverage):
    """Many calibration draws; each threshold is judged on a large fresh sample (close to the true risk)."""
    rng = np.random.default_rng(0)
    test_p, test_yes, test_n = _calibrated_sample(rng, 20000, reviewers)
    yes_loss, no_loss = losses(test_yes, test_n, against)
    test_loss = np.where(test_p >= 0.5, yes_loss, no_loss)
    risk, delta, violations, coverage = 0.1, 0.1, 0, []
    for _ in range(60):
        th = calibrate(*_calibrated_sample(rng, 300, reviewers), risk=risk, delta=delta, against=against)
        decided = np.maximum(test_p, 1 - test_p) >= th.threshold
        coverage.append(decided.mean())
        violations += decided.any() and test_loss[decided].mean() > risk + 0.005  # 0.005: the test sample's noise
    assert violations <= 60 * delta
    assert np.mean(coverage) > least_coverage  # it does decide (Hoeffding-Bentkus is the more cautious)


def test_a_risk_below_the_ties_escalates_everything():
    th = calibrate(np.full(50, 0.99), np.full(50, 1), np.full(50, 2), risk=0.1, delta=0.1)
    assert th.threshold == np.inf and th.coverage == 0.0


def test_validate_reports_each_split_and_the_share_within_risk():
    rng = np.random.default_rng(1)
    p, yes, n = _calibrated_sample(rng, 600, 3)
    out = validate(p, yes, n, np.arange(600) // 3, risk=0.1, delta=0.1, splits=20, seed=0)
    assert len(out["per_split"]) == 20 and 0 < out["coverage_mean"] <= 1
    assert out["share_within_risk"] >= 0.9
    assert out["disagreement_q90"] <= 0.12


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"risk": 0.0}, "risk"),
        ({"delta": 1.0}, "delta"),
        ({"against": "judge"}, "against"),
    ],
)
def test_bad_settings_are_input_errors(kwargs, match):
    with pytest.raises(InputError, match=match):
        calibrate(np.array([0.9]), np.array([1]), np.array([1]), **kwargs)


@pytest.fixture(scope="module")
def held_out_dir(tmp_path_factory):
    """Labelled turns from the same process as the model's training data, never trained on (decide refuses
    the model's own training conversations)."""
    return make_native_dataset(tmp_path_factory.mktemp("held_out"), seed=1)


def test_decide_command_stores_calibration_and_decides_every_turn(
    tiny_model, synthetic_dir, held_out_dir, tmp_path, capsys
):
    out = tmp_path / "decide"
    assert (
        main(
            [
                "decide",
                f"model={tiny_model}",
                f"calibration={held_out_dir}",
                f"data={synthetic_dir}",
                f"out={out}",
                "risk=0.3",
            ]
        )
        == 0
    )
    threshold = json.loads((out / "threshold.json").read_text())
    assert threshold["risk"] == 0.3 and len(threshold["risk_coverage"]) == 7
    coverages = [row["coverage"] for row in threshold["risk_coverage"]]
    assert coverages == sorted(coverages)  # a looser risk never decides fewer turns
    decisions = pd.read_csv(out / "decisions.csv")
    assert len(decisions) == 80 and set(decisions["decision"]) <= {"adheres", "violates", "escalate"}
    assert (tiny_model / "decide_calibration.csv").exists()
    assert "calibration turns" in capsys.readouterr().out


def test_decide_without_labels_is_one_clear_error(tiny_model, tmp_path, capsys):
    assert main(["decide", f"model={tiny_model}", f"calibration={tmp_path}", f"out={tmp_path / 'x'}"]) == 2
    assert "error" in capsys.readouterr().err


def test_role_adherence_with_risk_uses_the_stored_calibration(tiny_model, held_out_dir, tmp_path):
    from calibration.api import RoleAdherence
    from calibration.release.decide import load_calibration, threshold_from

    assert main(["decide", f"model={tiny_model}", f"calibration={held_out_dir}", f"out={tmp_path}"]) == 0
    metric = RoleAdherence(calibrator=tiny_model, risk=0.3, delta=0.2)
    expected = threshold_from(load_calibration(tiny_model), risk=0.3, delta=0.2).threshold
    assert metric.decision_threshold == expected
    assert RoleAdherence(calibrator=tiny_model).decision_threshold is None
    with pytest.raises(InputError, match="judges=None"):
        RoleAdherence(calibrator=tiny_model, risk=0.3, judges=["j0"])
