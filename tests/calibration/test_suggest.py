"""suggest: the acquisition scores, the diverse batch, and the labelling sheet end to end on a tiny model."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.labelling.suggest import acquisition, entropy, select
from rubric.errors import InputError

VALUES = np.array([1.0, 2.0, 3.0, 4.0])


def _members():
    """Three candidates: members agree and are sure; agree and are unsure; disagree and are each sure."""
    sure = np.array([0.97, 0.01, 0.01, 0.01])
    flat = np.full(4, 0.25)
    return np.stack([np.stack([sure, flat, sure]), np.stack([sure, flat, sure[::-1]])])  # (M=2, B=3, K=4)


def test_entropy_ranks_the_unsure_candidates_and_bald_only_the_disputed_one():
    members = _members()
    pooled = members.mean(0)
    ent = acquisition("entropy", members, pooled, VALUES)
    bald = acquisition("bald", members, pooled, VALUES)
    assert ent[1] > ent[0] and ent[2] > ent[0]
    assert bald[1] == pytest.approx(0.0, abs=1e-9)  # agreed noise: a label would not change the model
    assert bald[2] > 0.5 > bald[0]
    assert acquisition("variance", members, pooled, VALUES).argmax() == 2


def test_scores_do_not_depend_on_the_order_of_candidates():
    rng = np.random.default_rng(0)
    members = rng.dirichlet(np.ones(4), size=(3, 20))
    perm = rng.permutation(20)
    for strategy in ("entropy", "bald", "variance"):
        a = acquisition(strategy, members, members.mean(0), VALUES)
        b = acquisition(strategy, members[:, perm], members.mean(0)[perm], VALUES)
        assert np.allclose(a[perm], b)
    assert entropy(np.full((1, 4), 0.25))[0] == pytest.approx(np.log(4))


def test_diversity_spreads_a_batch_over_conversations():
    # 12 candidates: 4 conversations x 3 reviewers of one item each; scores favour conversation 0.
    item = np.repeat(np.arange(4), 3)
    scores = np.array([9, 8.9, 8.8, 5, 4.9, 4.8, 3, 2.9, 2.8, 1, 0.9, 0.8])
    features = np.eye(4)
    groups = np.arange(4)
    top = select(scores, item, 4, features=features, groups=groups, diversity=0.0)
    spread = select(scores, item, 4, features=features, groups=groups, diversity=0.5)
    assert len(set(item[top])) == 2 and top[0] == 0
    assert sorted(set(item[spread])) == [0, 1, 2, 3] and spread[0] == 0
    labelled = select(scores, item, 1, features=features, groups=groups, diversity=0.9, labelled_items=np.array([0]))
    assert item[labelled[0]] != 0  # an item that already has a label counts as covered


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: acquisition("oracle", _members(), _members().mean(0), VALUES), "strategy"),
        (
            lambda: select(np.ones(2), np.arange(2), 1, features=np.eye(2), groups=np.arange(2), diversity=2.0),
            "diversity",
        ),
    ],
)
def test_bad_arguments_are_input_errors(call, match):
    with pytest.raises(InputError, match=match):
        call()


@pytest.mark.parametrize("strategy", ["random", "entropy", "bald", "variance"])
def test_suggest_writes_a_ranked_sheet_of_unlabelled_pairs(tiny_model, synthetic_dir, tmp_path, strategy):
    out = tmp_path / "to_label.csv"
    argv = ["suggest", f"data={synthetic_dir}", f"model={tiny_model}", f"out={out}", "budget=5"]
    assert main([*argv, f"strategy={strategy}"]) == 0
    sheet = pd.read_csv(out, dtype={"conversation_id": str, "turn": str, "judge_id": str})
    assert len(sheet) == 5 * 3 and sorted(sheet["rank"].unique()) == [1, 2, 3, 4, 5]  # 3 questions per pair
    assert {"question", "options", "assistant", "answer"} <= set(sheet.columns)
    assert sheet["options"].str.contains("1: ").all()
    labels = pd.read_csv(synthetic_dir / "labels.csv", dtype=str)
    labelled = set(zip(labels["conversation_id"], labels["turn"], labels["judge_id"], strict=True))
    assert not labelled & set(zip(sheet["conversation_id"], sheet["turn"], sheet["judge_id"], strict=True))


def test_suggest_for_named_judges_and_the_target_only(tiny_model, synthetic_dir, tmp_path):
    out = tmp_path / "to_label.csv"
    named = ["judges=[j0]", "questions=target"]
    assert main(["suggest", f"data={synthetic_dir}", f"model={tiny_model}", f"out={out}", "budget=3", *named]) == 0
    sheet = pd.read_csv(out, dtype=str)
    assert set(sheet["judge_id"]) == {"j0"} and set(sheet["question_id"]) == {"overall"} and len(sheet) == 3


def test_suggest_with_no_budget_is_one_clear_error(tiny_model, synthetic_dir, tmp_path, capsys):
    assert main(["suggest", f"data={synthetic_dir}", f"model={tiny_model}", "budget=0", f"out={tmp_path}/x.csv"]) == 2
    assert "budget" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command,override,key",
    [
        ("suggest", "budget=abc", "budget"),
        ("suggest", "strategy=oracle", "strategy"),
        ("suggest", "diversity=2", "diversity"),
        ("decide", "risk=1.5", "risk"),
        ("decide", "against=judge", "against"),
    ],
)
def test_bad_values_stop_before_any_work(command, override, key, tmp_path, capsys):
    args = {"suggest": ["data=x", "model=y", "budget=3"], "decide": ["model=y", "calibration=x"]}[command]
    args = [a for a in args if not a.startswith(key + "=")]
    assert main([command, *args, override, f"out={tmp_path / 'o'}"]) == 2
    assert key in capsys.readouterr().err


@pytest.mark.parametrize(
    "args,start",
    [
        (["purpose=learn", "width=0.1"], "width=, decide_at= and strata= plan a random sample"),
        (["purpose=learn", "strata=role"], "width=, decide_at= and strata= plan a random sample"),
        (["purpose=estimate", "strategy=bald"], "judges=, strategy= and diversity= rank pairs"),
        (["purpose=estimate", "judges=[j0]"], "judges=, strategy= and diversity= rank pairs"),
        (["purpose=estimate", "diversity=0.5"], "judges=, strategy= and diversity= rank pairs"),
    ],
)
def test_keys_of_the_other_purpose_are_refused_before_any_work(args, start, tmp_path, capsys):
    """A key the purpose does not use would be ignored silently: the sample would not be what was asked."""
    argv = ["suggest", f"data={tmp_path / 'd'}", f"model={tmp_path / 'm'}", "budget=3", f"out={tmp_path / 'o.csv'}"]
    assert main([*argv, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"role-rubric suggest: error: {start}") and err.count("\n") == 1, err
    assert not list(tmp_path.iterdir())


def test_no_plan_is_written_into_a_labelled_folder_without_one(synthetic_dir, tmp_path, capsys):
    """estimate reads DATA/sample_plan.csv as the plan of DATA's labels: a new draw's plan there would be
    taken for theirs."""
    import shutil

    data = tmp_path / "labelled"
    shutil.copytree(synthetic_dir, data)
    assert (data / "labels.csv").exists() and not (data / "sample_plan.csv").exists()
    sheet = data / "round2.csv"
    assert main(["suggest", "purpose=estimate", f"data={data}", "budget=3", f"out={sheet}"]) == 2
    err = capsys.readouterr().err
    assert "holds labels without a sampling plan" in err and "out=round2/to_label.csv" in err, err
    assert not sheet.exists() and not (data / "sample_plan.csv").exists()
