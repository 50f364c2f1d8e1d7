"""Identifiers compared as the user meant them (rubric/ids.py): an id with surrounding whitespace in one
file and without it in another is one id, in every reader."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import yaml

from calibration.data.dataset import load_dataset
from rubric.ids import clean_id, clean_id_list
from tests.calibration.conftest import make_native_dataset, train_quick


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        (" 21 ", "21"),
        ("21\t", "21"),
        ("\u00a021", "21"),
        ("\ufeff21", "21"),
        ("21\u200b", "21"),
        (21.0, "21"),
        (7, "7"),
        ("rater 1", "rater 1"),
        ("007", "007"),
    ],
)
def test_one_rule_for_every_id(raw, clean):
    assert clean_id(raw) == clean


def test_judges_lists_are_cleaned():
    assert clean_id_list(" j1 , j2,,j1 ") == ["j1", "j2"]
    assert clean_id_list(["j1 ", 3, "\u00a0j2"]) == ["j1", "3", "j2"]


def test_whitespace_in_any_id_column_changes_nothing(tmp_path):
    root = make_native_dataset(tmp_path / "d", n_conversations=6)
    before = load_dataset(root)
    labels = pd.read_csv(root / "labels.csv", dtype=str)
    judge = labels["judge_id"].iloc[0]
    half = labels.index[labels["judge_id"] == judge][::2]  # half of one reviewer's rows written "j0 "
    labels.loc[half, "judge_id"] = judge + " "
    labels["conversation_id"] = labels["conversation_id"] + " "
    labels["question_id"] = "\u00a0" + labels["question_id"]
    labels.to_csv(root / "labels.csv", index=False)
    llm = pd.read_csv(root / "llm.csv", dtype=str)
    llm["conversation_id"] = " " + llm["conversation_id"]
    llm["question_id"] = llm["question_id"] + "\t"
    llm["option"] = llm["option"] + " "
    llm.to_csv(root / "llm.csv", index=False)
    rubric = yaml.safe_load((root / "rubric.yaml").read_text())
    rubric["questions"][0]["id"] = " " + rubric["questions"][0]["id"]
    rubric["target"] = "overall "
    (root / "rubric.yaml").write_text(yaml.safe_dump(rubric))
    after = load_dataset(root)
    assert after.judges == before.judges  # not a new judge "j0 "
    assert after.item_keys() == before.item_keys() and after.rubric.ids == before.rubric.ids
    assert np.array_equal(after.label_judge, before.label_judge) and np.array_equal(after.answers, before.answers)
    assert np.array_equal(after.probs, before.probs)


def test_conversation_ids_in_conversations_jsonl_are_cleaned(tmp_path):
    from rubric.conversations import load_conversations

    path = tmp_path / "c.jsonl"
    path.write_text(
        json.dumps({"conversation_id": " c1 ", "chatbot_role": "r", "turns": [{"user": "u", "assistant": "a"}]})
        + "\n"
        + json.dumps({"conversation_id": "c1", "chatbot_role": "r", "turns": [{"user": "u", "assistant": "a"}]})
        + "\n"
    )
    from rubric.errors import InputError

    with pytest.raises(InputError, match="duplicate conversation_id 'c1'"):
        load_conversations(path)  # " c1 " and "c1" are one conversation written twice


def test_predictions_with_padded_ids_are_evaluated_as_written_without(tmp_path, tiny_model, synthetic_dir):
    from calibration.cli import main

    pred = tmp_path / "predictions.csv"
    assert main(["predict", f"model={tiny_model}", f"data={synthetic_dir}", f"out={pred}"]) == 0
    assert main(["evaluate", f"data={synthetic_dir}", f"predictions={pred}", f"out={tmp_path / 'a.json'}"]) == 0
    frame = pd.read_csv(pred, dtype=str, keep_default_na=False)
    for column in ("conversation_id", "judge_id", "question_id"):
        frame[column] = frame[column].map(lambda v: f" {v}\u00a0" if v else v)
    frame.to_csv(pred, index=False)
    assert main(["evaluate", f"data={synthetic_dir}", f"predictions={pred}", f"out={tmp_path / 'b.json'}"]) == 0
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())


def test_a_padded_judge_in_a_judges_list_is_the_trained_judge(tmp_path, tiny_model, synthetic_dir):
    from calibration.cli import main

    judge = load_dataset(synthetic_dir).judges[0]
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert main(["predict", f"model={tiny_model}", f"data={synthetic_dir}", f"out={a}", f"judges=[{judge}]"]) == 0
    assert main(["predict", f"model={tiny_model}", f"data={synthetic_dir}", f"out={b}", f"judges=['  {judge} ']"]) == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.fixture(scope="module")
def synthetic_dir(tmp_path_factory):
    return make_native_dataset(tmp_path_factory.mktemp("synthetic"), n_conversations=12)


@pytest.fixture(scope="module")
def tiny_model(synthetic_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("model")
    assert train_quick(synthetic_dir, out, steps=10) == 0
    return out
