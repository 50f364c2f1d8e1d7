"""When not to trust the calibrated numbers: the shift check, the transport audit, and whether the calibrated
judge can stand in for a reviewer (calibration/model/shift.py, calibration/release/audit.py,
calibration/evaluation/reviewers.py)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.data.dataset import load_dataset
from calibration.evaluation.reviewers import MIN_SHARED_TURNS, alt_test, reviewer_agreement
from calibration.model.shift import ShiftRefused, check_shift, handle_shift, training_summary
from calibration.release.audit import bias_interval, verdict
from tests.calibration.conftest import make_native_dataset


def _subset(ds, keep: np.ndarray):
    return dataclasses.replace(
        ds,
        items=ds.items[keep].reset_index(drop=True),
        probs=ds.probs[keep],
        present=ds.present[keep],
        coverage=None if ds.coverage is None else ds.coverage[keep],
    )


@pytest.fixture(scope="module")
def synth(tmp_path_factory):
    return load_dataset(make_native_dataset(tmp_path_factory.mktemp("trust") / "d", n_conversations=160, seed=5))


def _high_target(ds, share: float) -> np.ndarray:
    """(N,) items of the conversations whose judge-expected target is in the top `share`."""
    t = ds.target_index
    expected = (ds.probs[:, t] * ds.option_values()[t]).sum(-1)
    conv = ds.items["conversation_id"].to_numpy()
    per_conv = pd.Series(expected).groupby(conv).mean().sort_values(kind="stable")
    return np.isin(conv, per_conv.index[-int(share * len(per_conv)) :])


def test_shift_check_is_quiet_in_distribution_and_fires_on_a_covariate_shift(synth):
    conv = synth.items["conversation_id"].to_numpy()
    ids = np.unique(conv)
    p_values = []
    for seed in range(20):
        train = np.isin(conv, np.random.default_rng(seed).permutation(ids)[:80])
        result = check_shift(training_summary(_subset(synth, train)), _subset(synth, ~train), seed=seed)
        assert result["checked"] and result["groups"][0]["n_conversations"] == 80
        p_values.append(result["groups"][0]["p_value"])
    assert np.mean(np.array(p_values) < 0.01) <= 0.1  # exact under the null: about 1% fire
    assert np.mean(p_values) > 0.3  # and the p-values spread over (0, 1)
    shifted = _high_target(synth, 0.3)
    result = check_shift(training_summary(_subset(synth, ~shifted)), _subset(synth, shifted))
    assert result["fired"] and result["groups"][0]["p_value"] <= 0.002 and result["groups"][0]["distance"] > 1


def test_shift_check_per_role_compares_each_role_with_its_own_training_conversations(synth):
    conv = synth.items["conversation_id"].to_numpy()
    high = _high_target(synth, 0.5)
    # Two roles that differ from each other: "b" holds the high conversations. Trained on both, a new
    # sample of both roles is in distribution per role, though each role alone differs from the mixture.
    roles = {c: ("b" if h else "a") for c, h in zip(conv, high, strict=True)}
    ids = np.unique(conv)
    train = np.isin(conv, np.random.default_rng(1).permutation(ids)[:80])
    summary = training_summary(_subset(synth, train), roles)
    assert summary["roles"] is not None and len(set(summary["roles"])) == 2
    result = check_shift(summary, _subset(synth, ~train), roles)
    assert result["by_role"] and {g["role"] for g in result["groups"]} == {"a", "b"}
    assert all(g["role_seen_in_training"] for g in result["groups"])
    assert not result["fired"]
    # A role the model never saw is compared with all training conversations: "b" alone, new, differs.
    only_a = training_summary(_subset(synth, train & ~high), roles)
    new_b = _subset(synth, ~train & high)
    result = check_shift(only_a, new_b, {c: "c" for c in roles})
    assert result["groups"][0]["role_seen_in_training"] is False and result["fired"]


def test_shift_check_without_a_training_sample_skips_with_a_note_and_on_shift_is_checked(synth):
    result = check_shift(None, synth)
    assert result == {"checked": False, "fired": False, "note": result["note"]} and "retrain" in result["note"]
    said = []
    assert handle_shift(None, synth, None, "warn", "score", say=said.append)["checked"] is False
    assert said and "shift check skipped" in said[0]
    with pytest.raises(ValueError, match="on_shift='wran'"):
        handle_shift(None, synth, None, "wran", "score")
    shifted = _high_target(synth, 0.3)
    summary = training_summary(_subset(synth, ~shifted))
    with pytest.raises(ShiftRefused, match="differ from the training data"):
        handle_shift(summary, _subset(synth, shifted), None, "refuse", "score")
    said.clear()
    assert handle_shift(summary, _subset(synth, shifted), None, "warn", "score", say=said.append)["fired"]
    assert len(said) == 1 and said[0].startswith("score: warning: these conversations differ") and "label " in said[0]
    assert handle_shift(summary, _subset(synth, shifted), None, "ignore", "score")["checked"] is False


def test_bias_interval_and_verdicts():
    rng = np.random.default_rng(0)
    conv = np.repeat(np.arange(40), 3)
    human = rng.integers(0, 2, len(conv)).astype(float)
    calibrated = np.full(len(conv), 0.5)
    bias, low, high, n = bias_interval(calibrated, human, conv, 0.1)
    assert n == 40 and math.isclose(bias, 0.5 - human.mean()) and low < bias < high
    # conversation totals: the linearised variance equals the one of per-conversation means (equal sizes)
    per_conv = (calibrated - human).reshape(40, 3).mean(1)
    from scipy import stats

    half = stats.t.ppf(0.95, 39) * per_conv.std(ddof=1) / math.sqrt(40)
    assert math.isclose(high - bias, half, rel_tol=1e-9)
    assert verdict(-0.02, 0.03, 0.05, 40) == "PASS"
    assert verdict(-0.02, 0.03, 0.05, 10) == "INCONCLUSIVE"  # PASS withheld below 20 conversations
    assert verdict(0.06, 0.2, 0.05, 40) == "FAIL" and verdict(-0.2, -0.051, 0.05, 40) == "FAIL"
    assert verdict(0.01, 0.08, 0.05, 40) == "INCONCLUSIVE"


def _panel(n_turns=80, n_reviewers=5, noise=0.7, seed=0):
    """Every reviewer answers every turn: a latent quality plus noise, rounded to 1..4."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(1, 4, n_turns)
    item = np.repeat(np.arange(n_turns), n_reviewers)
    judge = np.tile(np.arange(n_reviewers), n_turns)
    value = np.clip(np.rint(quality[item] + rng.normal(0, noise, len(item))), 1, 4)
    return quality, item, judge, value, rng


def test_alt_test_judge_fed_the_true_labels_wins():
    _, item, judge, value, _ = _panel()
    f = np.bincount(item, weights=value) / np.bincount(item)  # the panel's own mean answer per turn
    result = alt_test(item, judge, value, f, 0.1, [f"r{j}" for j in range(5)])
    assert result["tested"] == 5 and result["outcome"] == "passes" and result["winning_rate"] == 1.0


def test_alt_test_a_planted_reviewer_close_to_the_others_mean_is_not_beaten():
    quality, item, judge, value, rng = _panel(noise=0.5)
    planted = judge == 4
    others = pd.Series(value[~planted]).groupby(item[~planted]).mean().to_numpy()
    value = value.copy()
    value[planted] = others[item[planted]] + rng.normal(0, 0.05, planted.sum())
    f = quality + rng.normal(0, 0.8, len(quality))  # an imperfect judge
    result = alt_test(item, judge, value, f, 0.1, [f"r{j}" for j in range(5)])
    planted_row = next(r for r in result["reviewers"] if r["judge_id"] == "r4")
    assert planted_row["judge_wins"] is False and planted_row["rho_reviewer"] > 0.7
    with pytest.raises(ValueError, match="epsilon=1.5"):
        alt_test(item, judge, value, f, 1.5, [])


def test_alt_test_a_unanimous_panel_and_a_judge_that_agrees_within_the_scale_can_stand_in():
    """Every reviewer answers 4 and the judge predicts 4 (to 3e-7): compared as the answer it would give (the
    nearest option), the judge ties every turn, which both sides win; compared unrounded it lost them all."""
    from calibration.evaluation.reviewers import verdict_text

    n_turns, n_reviewers = MIN_SHARED_TURNS + 10, 5
    item = np.repeat(np.arange(n_turns), n_reviewers)
    judge = np.tile(np.arange(n_reviewers), n_turns)
    value = np.full(len(item), 4.0)
    f = np.full(n_turns, 4 - 3e-7)
    names = [f"r{j}" for j in range(n_reviewers)]
    result = alt_test(item, judge, value, f, 0.1, names, options=[1, 2, 3, 4])
    assert result["tested"] == n_reviewers and result["outcome"] == "passes" and result["winning_rate"] == 1.0
    assert all(r["rho_judge"] == r["rho_reviewer"] == 1.0 for r in result["reviewers"])
    text = verdict_text("overall", {"alt_test": result})
    assert "can stand in for a reviewer" in text and "cannot" not in text and "matches only" not in text
    assert alt_test(item, judge, value, f, 0.1, names)["outcome"] == "fails"  # the continuous comparison
    # a judge an option away from the unanimous panel still loses: rounding does not hide a wrong answer
    assert alt_test(item, judge, value, f - 1, 0.1, names, options=[1, 2, 3, 4])["outcome"] == "fails"


def test_alt_test_is_undecided_with_too_few_shared_turns():
    _, item, judge, value, _ = _panel(n_turns=MIN_SHARED_TURNS - 1)
    f = np.bincount(item, weights=value) / np.bincount(item)
    result = alt_test(item, judge, value, f, 0.1, [f"r{j}" for j in range(5)])
    assert result["tested"] == 0 and result["outcome"] == "undecided" and len(result["skipped"]) == 5


def test_reviewer_agreement_leaves_one_reviewer_out(synth):
    block = reviewer_agreement(synth)["questions"]
    assert set(block) == set(synth.rubric.ids)
    t = synth.target_index
    rows = np.flatnonzero(synth.answers[:, t] >= 0)
    values = np.asarray(synth.rubric.questions[t].values, float)
    item, value = synth.label_item[rows], values[synth.answers[rows, t]]
    count, total = np.bincount(item), np.bincount(item, weights=value)
    others = (total[item] - value) / (count[item] - 1)
    assert math.isclose(block[synth.rubric.target]["reviewers"]["pearson"], np.corrcoef(others, value)[0, 1])
    assert block[synth.rubric.target]["alt_test"] is None and "not tested" in block[synth.rubric.target]["verdict"]


def test_commands_refuse_bad_trust_settings(tmp_path, capsys):
    cases = [
        ["cv", "data=x", "out=y", "epsilon=1.5"],
        ["cv", "data=x", "out=y", "epsilon=0"],
        ["estimate", "data=x", "model=m", "out=y", "bias_margin=0"],
        ["estimate", "data=x", "model=m", "out=y", "bias_margin=1"],
        ["estimate", "data=x", "model=m", "out=y", "bias_margin=2"],
        ["score", "conversations=c.jsonl", "out=s.csv", "on_shift=wran"],
        ["predict", "model=m", "data=x", "out=p.csv", "on_shift=refuze"],
    ]
    for args in cases:
        assert main(args) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and args[-1].split("=")[0] in err[0]
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("margin", [0, 1, 2, -0.1])
def test_a_bias_margin_outside_0_1_is_refused_from_python_too(margin):
    """A rate's bias lies in [-1, 1]: a margin of 1 or more makes FAIL impossible (the audit could only pass)."""
    from calibration.release.estimate import estimate_release
    from rubric.errors import InputError

    with pytest.raises(InputError, match=rf"bias_margin={margin} .*set bias_margin to a number > 0 and < 1"):
        estimate_release("no-such-release", "no-such-model", bias_margin=margin)


def test_training_summary_keeps_a_bounded_sample(synth, monkeypatch):
    import calibration.model.shift as shift

    monkeypatch.setattr(shift, "MAX_CONVERSATIONS", 50)
    summary = shift.training_summary(synth)
    assert len(summary["conversations"]) == 50 and summary["n_conversations"] == 160
    assert check_shift(summary, synth)["groups"][0]["n_training_conversations"] == 50
    # whatever the rubric's size, at most MAX_VALUES numbers (and never fewer than 200 conversations)
    assert shift.MAX_VALUES * 15 < 1_000_000
