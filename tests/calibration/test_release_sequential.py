"""`estimate sequential=true`: a confidence sequence valid at every look, recorded in OUT/looks.jsonl, read
by the gate; a looks file of another release or model is refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from calibration.release.intervals import confidence_sequence
from tests.calibration.test_estimate import _estimate, release  # noqa: F401  (the module's trained release)


def test_confidence_sequence_is_wider_than_the_fixed_interval_and_narrows_with_n():
    low, high = confidence_sequence(0.7, 0.05, 20, alpha=0.1, t_star=40)
    assert high - low > 2 * 1.729 * 0.05  # wider than the fixed-n t interval at n=20
    lows, highs = confidence_sequence(0.7, 0.3 / np.sqrt([10, 40, 160]), np.array([10, 40, 160]), alpha=0.1)
    assert np.all(np.diff(highs - lows) < 0)


def test_confidence_sequence_holds_over_every_look_where_fixed_intervals_do_not():
    """i.i.d. Bernoulli(0.7) draws looked at after every 5 up to 200: the share of runs in which some look
    misses the truth stays under alpha for the sequence and exceeds it for the fixed-n interval."""
    rng = np.random.default_rng(0)
    draws, looks = 2000, np.arange(10, 201, 5)
    x = (rng.uniform(size=(draws, 200)) < 0.7).astype(float)
    miss_cs = np.zeros(draws, bool)
    miss_fixed = np.zeros(draws, bool)
    for n in looks:
        mean = x[:, :n].mean(1)
        se = x[:, :n].std(1, ddof=1) / np.sqrt(n)
        low, high = confidence_sequence(mean, se, n, alpha=0.1, t_star=40)
        miss_cs |= (low > 0.7) | (high < 0.7)
        miss_fixed |= np.abs(mean - 0.7) > 1.66 * se
    assert miss_cs.mean() <= 0.1
    assert miss_fixed.mean() > 0.2


def test_looks_are_recorded_and_the_gate_reads_the_sequence(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "sequential=true") == 0
    assert _estimate(release, out, "sequential=true") == 0
    looks = [json.loads(line) for line in (out / "looks.jsonl").read_text().splitlines()]
    assert [look["look"] for look in looks] == [1, 2]
    result = json.loads((out / "estimate.json").read_text())
    seq, ppi = result["sequential"], result["rate"]["ppi"]
    assert seq["look"] == 2 and seq["low"] < ppi["low"] and seq["high"] > ppi["high"]  # wider than fixed-n
    # A threshold between the sequence's and the fixed interval's lower bound: the gate reads the sequence.
    between = (seq["low"] + ppi["low"]) / 2
    assert _estimate(release, tmp_path / "fixed", f"fail_under={between}") == 0
    assert _estimate(release, out, "sequential=true", f"fail_under={between}") == 1
    assert "confidence sequence" in capsys.readouterr().err


def test_a_looks_file_of_another_release_or_model_is_refused(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "sequential=true") == 0
    before = (out / "looks.jsonl").read_text()
    from calibration.cli import main

    assert (
        main(["estimate", f"data={release['baseline']}", f"model={release['model']}", f"out={out}", "sequential=true"])
        == 2
    )
    err = capsys.readouterr().err
    assert "looks.jsonl" in err and "another release" in err and err.count("\n") == 1
    look = json.loads(before)
    (out / "looks.jsonl").write_text(json.dumps(look | {"model_sha256": "0" * 16}) + "\n")
    (out / "estimate.json").unlink()
    assert _estimate(release, out, "sequential=true") == 2
    assert "another model" in capsys.readouterr().err and not (out / "estimate.json").exists()


def test_fail_if_worse_reads_the_sequential_difference_and_the_baseline_in_the_identity(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    base = f"baseline={release['baseline']}"
    assert _estimate(release, out, "sequential=true", base) == 0
    assert _estimate(release, out, "sequential=true", base) == 0
    result = json.loads((out / "estimate.json").read_text())
    seq, fixed = result["sequential"]["difference"], result["difference"]["rate"]
    # valid at every look: wider than the fixed-n difference on both sides, around the same estimate
    assert seq["low"] < fixed["low"] and seq["high"] > fixed["high"]
    assert seq["estimate"] == pytest.approx(fixed["estimate"], abs=1e-9)
    looks = [json.loads(line) for line in (out / "looks.jsonl").read_text().splitlines()]
    assert all("diff_low" in look and look["baseline_sha256"] for look in looks)
    # the same looks file without the baseline (or with another) is another sequence: refused, one line
    assert _estimate(release, out, "sequential=true") == 2
    err = capsys.readouterr().err
    assert "another baseline" in err and err.count("\n") == 1


def test_the_gate_decides_worse_by_the_sequence_not_by_the_fixed_difference():
    from calibration.release.gate import gate

    rate = {"ppi": {"estimate": 0.7, "low": 0.6, "high": 0.8}}
    fixed = {"rate": {"estimate": -0.1, "low": -0.2, "high": -0.01, "p": 0.04}}
    wide = {
        "look": 3,
        "estimate": 0.7,
        "low": 0.5,
        "high": 0.9,
        "difference": {"estimate": -0.1, "low": -0.3, "high": 0.05},
    }
    assert gate({"rate": rate, "difference": fixed}, fail_under=None, fail_if_worse=True)  # fixed-n: worse
    assert gate({"rate": rate, "difference": fixed, "sequential": wide}, fail_under=None, fail_if_worse=True) == []
    narrow = wide | {"difference": {"estimate": -0.1, "low": -0.2, "high": -0.02}}
    failed = gate({"rate": rate, "difference": fixed, "sequential": narrow}, fail_under=None, fail_if_worse=True)
    assert len(failed) == 1 and "confidence sequence" in failed[0]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda look: None, "not a look"),
        (lambda look: {k: v for k, v in look.items() if k != "cs_low"}, "cs_low"),
        (lambda look: look | {"cs_high": "high"}, "cs_high"),
        (lambda look: {k: v for k, v in look.items() if k != "alpha"}, "without its alpha"),
        (lambda look: look | {"look": 3}, "look 3 where look 1"),
    ],
    ids=["null line", "no cs_low", "cs_high not a number", "no alpha", "a look lost"],
)
def test_a_malformed_look_is_one_line_naming_the_file_and_line(release, tmp_path, capsys, edit, needle):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "sequential=true") == 0
    look = json.loads((out / "looks.jsonl").read_text())
    (out / "looks.jsonl").write_text(json.dumps(edit(look)) + "\n")
    capsys.readouterr()
    assert _estimate(release, out, "sequential=true") == 2
    err = capsys.readouterr().err
    assert needle in err and "looks.jsonl, row 1" in err and err.count("\n") == 1, err


def test_a_second_look_at_another_alpha_is_refused(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "sequential=true") == 0
    before = (out / "looks.jsonl").read_text()
    capsys.readouterr()
    assert _estimate(release, out, "sequential=true", "alpha=0.2") == 2
    err = capsys.readouterr().err
    assert "another level (alpha)" in err and err.count("\n") == 1
    assert (out / "looks.jsonl").read_text() == before  # nothing recorded for the refused look
    assert json.loads(before)["alpha"] == 0.1


def test_a_deleted_looks_file_beside_a_later_look_is_refused_not_restarted(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "out"
    assert _estimate(release, out, "sequential=true") == 0
    (out / "looks.jsonl").unlink()
    capsys.readouterr()
    assert _estimate(release, out, "sequential=true") == 2
    err = capsys.readouterr().err
    assert "restart the sequence at look 1" in err and err.count("\n") == 1
    assert not (out / "looks.jsonl").exists()
    (out / "estimate.json").unlink()  # the fix it names: restart here on purpose
    assert _estimate(release, out, "sequential=true") == 0
