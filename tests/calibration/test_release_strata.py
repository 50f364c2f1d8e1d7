"""`suggest purpose=estimate strata=role` and the stratified estimate (stratified PPI)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.release.estimate import STRATUM_LAMBDA_FROM
from calibration.release.inference import Interval, stratified
from calibration.release.plan import stratified_plan
from tests.calibration.test_estimate import _split, release  # noqa: F401  (the module's trained release)


def test_proportional_allocation_keeps_two_per_stratum_and_the_budget():
    convs = [f"a{i}" for i in range(40)] + [f"b{i}" for i in range(8)] + [f"c{i}" for i in range(3)]
    stratum_of = {c: c[0] for c in convs}
    plan = stratified_plan(convs, stratum_of, 12, seed=1)
    taken = plan.groupby("stratum")["sampled"].sum().to_dict()
    assert sum(taken.values()) == 12 and min(taken.values()) >= 2 and taken["a"] > taken["b"]
    size = plan.groupby("stratum").size()
    assert np.allclose(plan["inclusion_probability"], plan["stratum"].map(taken) / plan["stratum"].map(size))


def test_strata_combine_by_turn_share():
    a = Interval(0.9, 0.8, 1.0, 0.05, df=9)
    b = Interval(0.5, 0.3, 0.7, 0.1, df=9)
    iv = stratified([(0.75, a, 10, 10), (0.25, b, 10, 10)], bounds=(0, 1))
    assert iv.estimate == pytest.approx(0.8)
    assert iv.se == pytest.approx(np.sqrt((0.75 * 0.05) ** 2 + (0.25 * 0.1) ** 2))
    assert 0 <= iv.low < 0.8 < iv.high <= 1 and 9 <= iv.df <= 18
    # each stratum's own degrees of freedom (a cross-fitted lambda spends one): fewer, a wider interval
    spent = stratified([(0.75, a, 10, 10), (0.25, Interval(0.5, 0.3, 0.7, 0.1, df=8), 10, 10)], bounds=(0, 1))
    assert spent.df < iv.df and spent.high - spent.low > iv.high - iv.low


def test_stratified_sample_round_trip(release, tmp_path, capsys):  # noqa: F811
    sheet = tmp_path / "plan" / "to_label.csv"
    assert (
        main(["suggest", "purpose=estimate", f"data={release['release']}", "budget=12", "strata=role", f"out={sheet}"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "stratified by role" in printed and "drawn at random within each role stratum" in printed
    assert "uniformly" not in printed and "inclusion probability by stratum: support agent 0." in printed
    plan = pd.read_csv(sheet.parent / "sample_plan.csv", dtype={"conversation_id": str})
    assert set(plan["stratum"]) == {"support agent", "tutor"} and plan["sampled"].sum() == 12
    chosen = list(plan.loc[plan.sampled == 1, "conversation_id"])
    rel = _split(release["data"], tmp_path / "planned", release["ids"][30:60], labelled=chosen)
    shutil.copy(sheet.parent / "sample_plan.csv", rel / "sample_plan.csv")
    assert main(["estimate", f"data={rel}", f"model={release['model']}", f"out={tmp_path / 'e'}"]) == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "e" / "estimate.json").read_text())
    for kind in ("rate", "mean"):
        block = result[kind]
        counts = block["stratified"]["labelled"]
        assert sum(counts.values()) == 12
        assert block["ppi"]["low"] <= block["ppi"]["estimate"] <= block["ppi"]["high"]
        # 12 over two strata: both under STRATUM_LAMBDA_FROM, so the stratified ppi is the humans-only one, and
        # estimate says so (estimate.json and one line)
        few = block["stratified"]["humans_only_strata"]
        assert few == sorted(k for k, v in counts.items() if v < STRATUM_LAMBDA_FROM) == sorted(counts)
        assert block["ppi"]["lambda"] == 0 and block["ppi"]["low"] == pytest.approx(block["humans"]["low"])
    assert "estimate: stratified ppi: support agent, tutor: under 8 labelled conversations each" in printed
    assert result["rate"]["ppi"]["low"] >= 0 and result["rate"]["ppi"]["high"] <= 1
    assert set(result["by_role"]) == {"support agent", "tutor"}  # per-role rows stay


def test_strata_naming_a_missing_field_is_refused(release, tmp_path, capsys):  # noqa: F811
    sheet = tmp_path / "to_label.csv"
    assert (
        main(
            ["suggest", "purpose=estimate", f"data={release['release']}", "budget=12", "strata=region", f"out={sheet}"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "strata=region" in err and "'region'" in err and err.count("\n") == 1
    assert not sheet.exists() and not (tmp_path / "sample_plan.csv").exists()


def test_a_stratum_with_one_label_is_said_on_screen(release, tmp_path, capsys):  # noqa: F811
    """Strata are combined only with 2 labels in each; otherwise the intervals treat the sample as one, and the
    terminal says so (it was a note in estimate.json only)."""
    sheet = tmp_path / "plan" / "to_label.csv"
    args = ["suggest", "purpose=estimate", f"data={release['release']}", "budget=12", "strata=role", f"out={sheet}"]
    assert main(args) == 0
    plan = pd.read_csv(sheet.parent / "sample_plan.csv", dtype={"conversation_id": str})
    chosen = list(plan.loc[plan.sampled == 1, "conversation_id"])
    lonely = plan["stratum"] == plan.loc[plan["conversation_id"] == chosen[0], "stratum"].iloc[0]
    plan.loc[lonely & (plan["conversation_id"] != chosen[0]), "sampled"] = 0  # one labelled conversation there
    labelled = list(plan.loc[plan.sampled == 1, "conversation_id"])
    rel = _split(release["data"], tmp_path / "planned", release["ids"][30:60], labelled=labelled)
    plan.to_csv(rel / "sample_plan.csv", index=False)
    capsys.readouterr()
    code = main(["estimate", f"data={rel}", f"model={release['model']}", f"out={tmp_path / 'e'}"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    note = json.loads((tmp_path / "e" / "estimate.json").read_text())["rate"]["stratified"]["note"]
    assert "labelled conversation(s): the strata are not combined" in note
    assert f"estimate: note: {note}" in printed.out
