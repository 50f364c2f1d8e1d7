"""Several dataset directories trained on as one (`data=[OLD,NEW] weights=[1,3]`): stacking, refusals, and
what a row's weight does in every loss it enters."""

from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.cli import main
from calibration.data.dataset import load_dataset
from calibration.data.union import load_training_data, qualified
from calibration.model.linear import fit_linear
from calibration.model.network import CalibrationNet
from calibration.model.recalibrate import fit_vector_scaling
from tests.calibration.conftest import make_native_dataset

FAST = ["train.ensemble=2", "train.pretrain_steps=20", "train.finetune_steps=20", "network.hidden1=8"]


@pytest.fixture(scope="module")
def two_dirs(tmp_path_factory):
    """Two releases whose conversation ids collide ("c000" names different dialogues in each)."""
    root = tmp_path_factory.mktemp("union")
    old = make_native_dataset(root / "old", n_conversations=20, seed=1)
    new = make_native_dataset(root / "new", n_conversations=8, seed=2)
    return old, new


def test_stacked_data_keeps_each_conversation_apart(two_dirs):
    old, new = two_dirs
    a, b = load_dataset(old), load_dataset(new)
    ds = load_training_data([str(old), str(new)]).ds
    assert len(ds.items) == len(a.items) + len(b.items)
    assert len(ds.label_item) == len(a.label_item) + len(b.label_item)
    # ids collide across the two directories, yet every conversation is its own group
    assert set(a.items["conversation_id"]) & set(b.items["conversation_id"])
    assert ds.groups.max() + 1 == a.groups.max() + 1 + b.groups.max() + 1
    assert sorted(ds.judges) == sorted(set(a.judges) | set(b.judges))
    # each label row still points at its own item, judge and answers
    i = len(a.label_item) + 3
    j = 3
    assert ds.items.iloc[ds.label_item[i]]["dataset"] == "new"
    assert ds.judges[ds.label_judge[i]] == b.judges[b.label_judge[j]]
    np.testing.assert_array_equal(ds.answers[i], b.answers[j])
    np.testing.assert_array_equal(ds.probs[ds.label_item[i]], b.probs[b.label_item[j]])
    assert ds.label_weight is None  # no weights= given
    names = qualified(ds).items["conversation_id"]
    assert "new/c000" in set(names) and "old/c000" in set(names)


def test_weights_follow_each_directorys_rows(two_dirs):
    old, new = two_dirs
    data = load_training_data([str(old), str(new)], weights=[1, 3])
    n_old = len(load_dataset(old).label_item)
    assert set(data.ds.label_weight[:n_old]) == {1.0} and set(data.ds.label_weight[n_old:]) == {3.0}
    assert load_training_data([str(old), str(new)], weights=[2, 2]).ds.label_weight is None  # equal = none


def test_one_directory_reads_as_before(two_dirs):
    old, _ = two_dirs
    ds, alone = load_training_data(str(old)).ds, load_dataset(old)
    assert list(ds.items.columns) == list(alone.items.columns)
    np.testing.assert_array_equal(ds.groups, alone.groups)
    np.testing.assert_array_equal(ds.probs, alone.probs)


def test_train_on_two_directories_records_both(two_dirs, tmp_path, capsys):
    old, new = two_dirs
    out = tmp_path / "model"
    assert main(["train", f"data=[{old},{new}]", "weights=[1,3]", f"out={out}", *FAST]) == 0
    printed = capsys.readouterr().out
    assert "2 directories" in printed and "weight 3" in printed
    assert "deploy the model `role-rubric cv` with the same data= names" in printed
    meta = json.loads((out / "model.json").read_text())
    records = meta["trained_on"]
    assert [r["data"] for r in records] == [str(old), str(new)]
    assert [r["weight"] for r in records] == [1.0, 3.0]
    assert [r["n_conversations"] for r in records] == [20, 8]
    assert set(records[1]["files"]) == {"rubric.yaml", "llm.csv", "labels.csv"}
    assert records[0]["files"]["labels.csv"] != records[1]["files"]["labels.csv"]
    # and the model predicts either release
    pred = tmp_path / "p.csv"
    assert main(["predict", f"model={out}", f"data={new}", f"out={pred}"]) == 0
    assert len(pd.read_csv(pred)) > 0


def test_cv_on_two_directories_names_each_rows_directory(two_dirs, tmp_path, capsys):
    old, new = two_dirs
    out = tmp_path / "cv"
    assert main(["cv", f"data=[{old},{new}]", "folds=3", f"out={out}", *FAST]) == 0
    frame = pd.read_csv(out / "predictions.csv", dtype={"conversation_id": str})
    assert set(frame["dataset"]) == {"old", "new"}
    # a conversation is whole in one fold, and "c000" of each release is its own conversation
    folds = frame[frame["method"] == "calibrated"].groupby(["dataset", "conversation_id"])["fold"].nunique()
    assert folds.max() == 1 and len(folds) == 28
    # every fold holds new conversations (each directory is dealt over the folds on its own)
    new_rows = frame[(frame["method"] == "calibrated") & (frame["dataset"] == "new")]
    assert sorted(new_rows["fold"].unique()) == [0, 1, 2]
    # the metrics per directory, and the deploy choice: 8 new conversations are too few, the union decides
    summary = json.loads((out / "metrics.json").read_text())
    assert list(summary["metrics_by_dataset"]) == ["old", "new"]
    assert summary["metrics_by_dataset"]["new"]["linear"]["conversations"] == 8
    assert summary["metrics_by_dataset"]["new"]["linear"]["n"] == len(new_rows)
    assert summary["deploy_basis"]["by_last"] is False and "fewer than the 10" in summary["deploy_basis"]["note"]
    # beside them, the new rows as the network trained on the old directory alone predicts them (no adaptation)
    previous = pd.read_csv(out / "previous_predictions.csv", dtype={"conversation_id": str})
    assert set(previous["method"]) == {"previous"} and set(previous["dataset"]) == {"new"}
    assert previous[["conversation_id", "turn", "judge_id"]].astype(str).values.tolist() == (
        new_rows[["conversation_id", "turn", "judge_id"]].astype(str).values.tolist()
    )
    before = summary["metrics_by_dataset"]["new"]["previous"]
    assert before["n"] == len(new_rows) and "previous" not in summary["metrics_by_dataset"]["old"]
    assert "previous" not in summary["metrics"]  # scored on the new rows only, never in the union's table
    # the report reads them with cv=: a row removed is named, the file gone is refused (metrics.json scores it)
    report = ["report", f"data=[{old},{new}]", f"cv={out}", f"out={tmp_path / 'report'}"]
    previous.iloc[1:].to_csv(out / "previous_predictions.csv", index=False)
    capsys.readouterr()
    assert main(report) == 2
    first = new_rows.iloc[0]
    assert f"conversation 'new/{first['conversation_id']}', turn '{first['turn']}'" in capsys.readouterr().err
    (out / "previous_predictions.csv").unlink()
    assert main(report) == 2
    assert "previous_predictions.csv: is missing, though metrics.json scores" in capsys.readouterr().err


def _with_rubric_change(src, dst):
    shutil.copytree(src, dst)
    rubric = yaml.safe_load((dst / "rubric.yaml").read_text())
    rubric["questions"][1]["options"] = rubric["questions"][1]["options"][:2]
    (dst / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    llm = pd.read_csv(dst / "llm.csv")
    llm[~((llm["question_id"] == "tone") & (llm["option"] == 3))].to_csv(dst / "llm.csv", index=False)
    labels = pd.read_csv(dst / "labels.csv")
    labels["answer"] = np.where(labels["question_id"] == "tone", labels["answer"].clip(upper=2), labels["answer"])
    labels.to_csv(dst / "labels.csv", index=False)


def _identity(folder, model: str) -> None:
    identity = {
        "backend": "chat",
        "model": model,
        "base_url_host": "127.0.0.1:1",
        "prompt_template": "p",
        "rubric": "r",
        "answer_mode": "distribution",
    }
    (folder / "gather_summary.json").write_text(json.dumps({"judge_identity": identity}))


def test_different_judges_are_refused_unless_allowed(two_dirs, tmp_path, capsys):
    old, new = two_dirs
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(old, a)
    shutil.copytree(new, b)
    _identity(a, "judge-one")
    _identity(b, "judge-two")
    assert main(["train", f"data=[{a},{b}]", f"out={tmp_path / 'm'}", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "another judge" in err and "judge-two" in err, err
    assert not (tmp_path / "m").exists()
    assert main(["train", f"data=[{a},{b}]", f"out={tmp_path / 'm'}", "allow_judge_mismatch=true", *FAST]) == 0
    assert json.loads((tmp_path / "m" / "model.json").read_text())["judge"]["model"] == "judge-one"


BAD = [
    ("rubric", lambda old, new, other: [f"data=[{old},{other}]"], "differs from"),
    ("weights length", lambda old, new, other: [f"data=[{old},{new}]", "weights=[1,2,3]"], "3 value(s) for 2"),
    ("negative weight", lambda old, new, other: [f"data=[{old},{new}]", "weights=[1,-1]"], "negative"),
    ("zero weights", lambda old, new, other: [f"data=[{old},{new}]", "weights=[0,0]"], "all zero"),
    ("text weight", lambda old, new, other: [f"data=[{old},{new}]", "weights=[1,x]"], "not numbers"),
    ("same twice", lambda old, new, other: [f"data=[{old},{old}]"], "twice"),
]


@pytest.mark.parametrize(("name", "args", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_union_is_one_line(name, args, message, two_dirs, tmp_path, capsys):
    old, new = two_dirs
    other = tmp_path / "other"
    _with_rubric_change(new, other)
    assert main(["train", *args(old, new, other), f"out={tmp_path / 'm'}", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "m").exists()


# --- what a row's weight means: an integer weight counts like that many copies of the row -------------------


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=6, max_size=6).filter(lambda w: sum(w) > 0), st.integers(0, 10_000))
def test_network_loss_weight_is_copies(weights, seed):
    torch.manual_seed(seed)
    net = CalibrationNet(1, 5, 3, [3, 4], hidden1=4, hidden2=4, seeds=[seed])
    x, judge = torch.rand(1, 6, 5), torch.randint(-1, 3, (1, 6))
    targets = torch.stack([torch.randint(-1, 3, (1, 6)), torch.randint(0, 4, (1, 6))], dim=-1)
    w = torch.tensor(weights, dtype=torch.float32)[None]
    weighted = net.loss(x, judge, targets, row_weight=w)
    copies = torch.repeat_interleave(torch.arange(6), torch.tensor(weights))
    repeated = net.loss(x[:, copies], judge[:, copies], targets[:, copies])
    torch.testing.assert_close(weighted, repeated, rtol=1e-5, atol=1e-6)
    ones = net.loss(x, judge, targets, row_weight=torch.ones(1, 6))
    assert torch.equal(ones, net.loss(x, judge, targets))  # weight 1 is no weight, bit for bit


@pytest.mark.parametrize("kind", ["multinomial", "ordinal"])
def test_linear_fit_weight_is_copies(kind):
    rng = np.random.default_rng(0)
    n, n_judges = 60, 4
    e = torch.from_numpy(rng.normal(size=(1, n, 3)))
    judge = torch.from_numpy(rng.integers(0, n_judges, size=(1, n)))
    answers = torch.from_numpy(
        np.clip(np.rint(1.5 + e[0, :, :1].numpy() + rng.normal(0, 0.7, (n, 1))), 0, 3).astype(np.int64)
    )[None]
    weights = rng.integers(0, 4, size=n)
    copies = np.repeat(np.arange(n), weights)
    weighted = fit_linear(
        kind,
        e,
        judge,
        answers,
        torch.ones(1, n, dtype=torch.bool),
        [4],
        n_judges,
        1e-3,
        row_weight=torch.from_numpy(weights.astype(float))[None],
    )
    repeated = fit_linear(
        kind,
        e[:, copies],
        judge[:, copies],
        answers[:, copies],
        torch.ones(1, len(copies), dtype=torch.bool),
        [4],
        n_judges,
        1e-3,
    )
    probe = torch.from_numpy(rng.normal(size=(1, 10, 3)))
    who = torch.from_numpy(rng.integers(-1, n_judges, size=(1, 10)))
    torch.testing.assert_close(weighted.logp(probe, who, [4]), repeated.logp(probe, who, [4]), atol=2e-4, rtol=0)


def test_recalibration_weight_is_copies_and_scale_free():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(4), size=80)
    answers = rng.integers(0, 4, size=80)
    weights = rng.integers(1, 4, size=80).astype(float)
    copies = np.repeat(np.arange(80), weights.astype(int))
    a, b = fit_vector_scaling(probs, answers, 0.0, weights)
    a2, b2 = fit_vector_scaling(probs[copies], answers[copies], 0.0)
    np.testing.assert_allclose(np.r_[a, b], np.r_[a2, b2], atol=1e-4)
    # a common factor changes nothing (weights are relative), and equal weights are no weights
    np.testing.assert_allclose(
        np.r_[fit_vector_scaling(probs, answers, 1.0, weights * 7)],
        np.r_[fit_vector_scaling(probs, answers, 1.0, weights)],
        atol=1e-8,
    )
    np.testing.assert_allclose(
        np.r_[fit_vector_scaling(probs, answers, 1.0, np.full(80, 3.0))],
        np.r_[fit_vector_scaling(probs, answers, 1.0)],
        atol=1e-8,
    )


def test_zero_weight_directory_teaches_nothing(two_dirs):
    """With weight 0, the new directory's labels leave the base and the losses: flipping its answers
    changes nothing the ensemble learns (its items still shape the inputs' scale: the same in both runs)."""
    import dataclasses

    from calibration.model.ensemble import train_ensemble
    from calibration.model.settings import Settings

    old, new = two_dirs
    ds = load_training_data([str(old), str(new)], weights=[1, 0]).ds
    flipped_answers = ds.answers.copy()
    zero = ds.label_weight == 0
    flipped_answers[zero] = np.where(flipped_answers[zero] >= 0, 0, -1)
    flipped = dataclasses.replace(ds, answers=flipped_answers)
    settings = Settings(ensemble=2, pretrain_steps=15, finetune_steps=15, hidden1=6, hidden2=6, val_fraction=0.0)
    a = train_ensemble(ds, settings, seed=0)[0]
    b = train_ensemble(flipped, settings, seed=0)[0]
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        torch.testing.assert_close(p, q, msg=name)


def test_search_and_report_read_two_directories(two_dirs, tmp_path):
    from calibration.report.build import run_report
    from calibration.schema.build import command_config

    old, new = two_dirs
    assert (
        main(
            [
                "search",
                f"data=[{old},{new}]",
                f"out={tmp_path / 's'}",
                "search.trials=2",
                "search.inner_folds=2",
                "search.workers=1",
                *FAST,
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "s" / "search.json").read_text())["finished_trials"] == 2
    quick = [
        "folds=2",
        "report.n_boot=20",
        "report.n_perm=20",
        "report.smece_boot=5",
        "report.band_bootstrap=5",
        "report.ablations=false",
        "report.learning_curve.repeats=0",
        "report.workers=1",
        "report.targets=true",
    ]
    results = run_report(
        command_config("report", [f"data=[{old},{new}]", "weights=[1,2]", f"out={tmp_path / 'r'}", *quick, *FAST])
    )
    page = (tmp_path / "r" / "report.html").read_text()
    assert "2 directories" in page
    assert results["verdict"]["size"]["conversations"] == 28  # "c000" of each directory counted apart
    assert "fewer than the 10 needed" in results["verdict"]["deploy"]["basis"]  # 8 new: the union chooses
    assert {r["question"] for r in results["targets"]} == {"scope", "tone", "overall"}


@pytest.mark.parametrize("command", ["predict", "estimate", "suggest", "label-studio"])
def test_commands_of_one_directory_refuse_a_list(command, two_dirs, tmp_path, capsys):
    old, new = two_dirs
    model = [] if command == "label-studio" else [f"model={tmp_path}"]
    model += ["budget=1"] if command == "suggest" else []  # its other required key
    code = main([command, f"data=[{old},{new}]", *model, f"out={tmp_path / 'out'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"{command} reads one path from data=, not a list of 2" in err
    assert "(train, cv, search, report, " in err and " read several as one)" in err


def test_recalibration_gives_the_last_directory_half_its_weight(two_dirs):
    from calibration.model.ensemble import last_directory_rows, recalibration_weight

    old, new = two_dirs
    one = load_dataset(old)
    assert last_directory_rows(one) is None and recalibration_weight(one, [np.arange(len(one.label_item))]) is None
    ds = load_training_data([str(old), str(new)], weights=[1, 2]).ds
    is_new = last_directory_rows(ds)
    np.testing.assert_array_equal(is_new, ds.items["dataset"].to_numpy()[ds.label_item] == "new")
    every = np.arange(len(ds.label_item))
    labelled = ds.answers[:, ds.target_index] >= 0
    w = recalibration_weight(ds, [every[: len(every) // 2], every[len(every) // 2 :]])
    assert np.isclose(w[is_new & labelled].sum(), w[~is_new & labelled].sum())  # half and half
    np.testing.assert_allclose(w[~is_new], ds.label_weight[~is_new])  # the old side keeps its weights=
    # a zero-weight row stays out, and too few new conversations among the rows: the weights as given
    zero = dataclasses.replace(ds, label_weight=np.where(every == np.flatnonzero(is_new)[0], 0.0, ds.label_weight))
    assert recalibration_weight(zero, [every])[np.flatnonzero(is_new)[0]] == 0
    few = np.flatnonzero(~is_new | np.isin(ds.groups[ds.label_item], np.unique(ds.groups[ds.label_item[is_new]])[:4]))
    assert recalibration_weight(ds, [few]) is ds.label_weight
    # "new" as the last category wins over the items' order (the benchmarks mark their sides so)
    flipped = dataclasses.replace(
        ds, items=ds.items.assign(dataset=pd.Categorical(ds.items["dataset"], categories=["new", "old"]))
    )
    np.testing.assert_array_equal(last_directory_rows(flipped), ~is_new)


def test_a_conversation_labelled_in_two_directories_is_refused(two_dirs, tmp_path, capsys):
    """The same dialogue in two directories (gathered again: its probabilities moved by up to 1e-3; labelled
    by other reviewers, so no byte copy) would count twice and sit on both sides of a cv fold."""
    old, new = two_dirs
    again = tmp_path / "again"
    shutil.copytree(new, again)
    llm = pd.read_csv(again / "llm.csv", dtype={"conversation_id": str, "turn": str})
    prob = [c for c in llm.columns if c.startswith("p_")]
    rng = np.random.default_rng(0)
    llm[prob] = (llm[prob] + rng.uniform(-1e-3, 1e-3, size=llm[prob].shape)).clip(0, 1)
    llm.to_csv(again / "llm.csv", index=False)
    labels = pd.read_csv(again / "labels.csv", dtype=str, keep_default_na=False)
    labels[labels.conversation_id == sorted(set(labels.conversation_id))[-1]].to_csv(again / "labels.csv", index=False)
    shared = sorted(set(labels.conversation_id))[-1]

    assert main(["train", f"data=[{new},{again}]", f"out={tmp_path / 'm'}", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"labelled conversation '{shared}' is also labelled in {new}" in err, err
    assert str(again) in err and not (tmp_path / "m").exists()
    # one of the two: the union trains; different dialogues under the same ids (old and new) never collide
    assert main(["train", f"data=[{old},{again}]", f"out={tmp_path / 'm'}", *FAST]) == 0
