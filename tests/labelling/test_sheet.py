"""The plain labelling path: suggest's sheet shows what the judge saw, and a filled sheet is read back."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from calibration.data.dataset import load_dataset
from calibration.labelling.items import dataset_conversations
from calibration.labelling.sheet import sheet_frame
from calibration.labelling.suggest import suggestions_frame
from rubric.schema import load_rubric


def _ds(labelling_dir):
    """What suggestions_frame reads of a Dataset: its items and rubric."""
    conversations = dataset_conversations(labelling_dir)
    items = pd.DataFrame(
        [(c, str(t)) for c, conv in conversations.items() for t in range(len(conv.turns))],
        columns=["conversation_id", "turn"],
    )
    return SimpleNamespace(items=items, rubric=load_rubric(labelling_dir)), conversations


def test_the_sheet_shows_the_conversation_so_far_and_no_meaningless_score(labelling_dir):
    ds, conversations = _ds(labelling_dir)
    sheet = suggestions_frame(
        ds, np.array([2, 0]), ["J1", "J2"], np.array([0.9996, 0.31]), "random", conversations=conversations
    )
    assert "score" not in sheet.columns and "strategy" not in sheet.columns
    assert len(sheet) == 2 * 5 and sheet["rank"].tolist()[:6] == [1, 1, 1, 1, 1, 2]
    conv = conversations[ds.items.iloc[2]["conversation_id"]]
    row = sheet.iloc[0]
    assert row["earlier_turns"].startswith(f"[turn 0] USER: {conv.turns[0].user}")
    assert f"[turn 1] USER: {conv.turns[1].user}\nASSISTANT: {conv.turns[1].assistant}" in row["earlier_turns"]
    assert row["user"] == conv.turns[2].user and row["assistant"] == conv.turns[2].assistant
    assert sheet.iloc[5]["earlier_turns"] == ""  # the first turn has nothing before it
    ranked = suggestions_frame(ds, np.array([2]), ["J1"], np.array([0.42]), "bald", conversations=conversations)
    assert ranked["score"].tolist() == [0.42] * 5


def _filled(labelling_dir, tmp_path, judge_ids=("J1", "J2")):
    ds, conversations = _ds(labelling_dir)
    items = [tuple(ds.items.iloc[i]) for i in (0, 1)]
    sheet = sheet_frame(items, list(judge_ids), ds.rubric, conversations)
    return sheet, tmp_path / "to_label.csv"


def test_a_filled_sheet_is_read_back_and_trains_as_a_dataset(labelling_dir, tmp_path, capsys):
    sheet, path = _filled(labelling_dir, tmp_path)
    sheet.loc[[0, 1, 4, 5], "answer"] = ["4", "3.0", "2: Adheres poorly", "1"]  # rows 6-10 of J2 half-done
    sheet.to_csv(path, index=False)
    out = tmp_path / "labelled"
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={out}"]) == 0
    labels = pd.read_csv(out / "labels.csv", dtype=str)
    assert labels["answer"].tolist() == ["4", "3", "2", "1"]
    assert labels["judge_id"].tolist() == ["J1", "J1", "J1", "J2"]
    printed = capsys.readouterr().out
    assert "rows_without_answer_skipped=6" in printed and str(out / "labels.csv") in printed
    ds = load_dataset(out)  # the folder is a dataset: rubric, llm.csv and the new labels agree
    assert len(ds.label_item) == 2 and sorted(ds.judges) == ["J1", "J2"]


def test_an_estimate_sheet_is_filled_with_the_reviewers_own_id(labelling_dir, tmp_path, capsys):
    sheet, path = _filled(labelling_dir, tmp_path, judge_ids=("", ""))
    sheet.loc[[0, 2], ["judge_id", "answer"]] = [["ana", "4"], ["ana", "3"]]
    sheet.loc[[5], "answer"] = ["2"]  # answered, but whose answer is it?
    sheet.to_csv(path, index=False)
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: sheet row 7 has an answer but no judge_id. Fix: write your reviewer id in judge_id" in err
    sheet.loc[5, "judge_id"] = "ana"
    sheet.to_csv(path, index=False)
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 0
    assert set(pd.read_csv(tmp_path / "o" / "labels.csv", dtype=str)["judge_id"]) == {"ana"}


@pytest.mark.parametrize(
    "edit,message",
    [
        (
            lambda s: s.loc.__setitem__((3, "answer"), "7"),
            r"sheet row 5: answer '7' to 'next_step' is not one of 1, 2, 3 or 4",
        ),
        (lambda s: s.loc.__setitem__((8, "answer"), "great"), r"sheet row 10: answer 'great' to 'next_step'"),
        (
            lambda s: (s.loc.__setitem__((2, "question_id"), "manner"), s.loc.__setitem__((2, "answer"), "2")),
            r"sheet row 4: question 'manner' is not in rubric.yaml",
        ),
        (
            lambda s: (s.loc.__setitem__((1, "assistant"), "Another reply."), s.loc.__setitem__((1, "answer"), "2")),
            r"sheet row 3: the assistant text no longer matches conversations.jsonl",
        ),
        (
            lambda s: (s.loc.__setitem__((6, "turn"), "99"), s.loc.__setitem__((6, "answer"), "2")),
            r"sheet row 8: conversation '.*' has no turn '99'",
        ),
        (
            lambda s: (
                s.loc.__setitem__((0, "answer"), "4"),
                s.loc.__setitem__((1, "answer"), "3"),
                s.loc.__setitem__((1, "question_id"), "scope"),
            ),
            r"sheet row 3 answers 'scope' .* again \(3; row 2 says 4\)",
        ),
    ],
)
def test_bad_sheets_name_the_sheets_own_row(labelling_dir, tmp_path, capsys, edit, message):
    sheet, path = _filled(labelling_dir, tmp_path)
    sheet["answer"] = sheet["answer"].astype(object)
    edit(sheet)
    sheet.to_csv(path, index=False)
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Fix:" in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()  # nothing written on bad input


def test_an_empty_sheet_and_a_missing_source_key(labelling_dir, tmp_path, capsys):
    sheet, path = _filled(labelling_dir, tmp_path)
    sheet.to_csv(path, index=False)
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 2
    assert "no row has an answer" in capsys.readouterr().err
    assert main(["import", "source=sheet", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 2
    assert "source=sheet needs sheet=" in capsys.readouterr().err


def test_imported_labels_join_the_datasets_own_and_replace_the_same_answer(labelling_dir, tmp_path, capsys):
    sheet, path = _filled(labelling_dir, tmp_path)
    first = sheet.iloc[0]
    pd.DataFrame(
        [
            (first["conversation_id"], first["turn"], "J1", "scope", "1"),
            (first["conversation_id"], first["turn"], "J9", "scope", "2"),
        ],
        columns=["conversation_id", "turn", "judge_id", "question_id", "answer"],
    ).to_csv(labelling_dir / "labels.csv", index=False)
    sheet.loc[0, "answer"] = "4"
    sheet.to_csv(path, index=False)
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={labelling_dir}"]) == 2
    assert "inputs are never overwritten" in capsys.readouterr().err
    out = tmp_path / "o"
    assert main(["import", "source=sheet", f"sheet={path}", f"data={labelling_dir}", f"out={out}"]) == 0
    labels = pd.read_csv(out / "labels.csv", dtype=str)
    assert sorted(zip(labels["judge_id"], labels["answer"], strict=True)) == [("J1", "4"), ("J9", "2")]
    assert "earlier_labels_kept=1" in capsys.readouterr().out


def test_an_estimate_sample_goes_to_label_studio_and_comes_back_from_its_sheet(labelling_dir, tmp_path):
    sheet = tmp_path / "estimate.csv"
    assert main(["suggest", "purpose=estimate", f"data={labelling_dir}", "budget=2", f"out={sheet}"]) == 0
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    assert "score" not in frame.columns and (frame["judge_id"] == "").all() and "earlier_turns" in frame.columns
    tasks = {}
    for name in ("estimate.csv", "sample_plan.csv"):  # the sheet and its plan name the same turns
        assert (
            main(["label-studio", f"data={labelling_dir}", f"select={tmp_path / name}", f"out={tmp_path / name}.ls"])
            == 0
        )
        tasks[name] = [
            (t["data"]["conversation_id"], str(t["data"]["turn"]))
            for t in json.loads((tmp_path / f"{name}.ls" / "tasks.json").read_text())
        ]
    assert tasks["estimate.csv"] == tasks["sample_plan.csv"]
    assert tasks["estimate.csv"] == list(dict.fromkeys(zip(frame["conversation_id"], frame["turn"], strict=True)))
    frame.loc[:4, ["judge_id", "answer"]] = ["ana", "3"]
    frame.to_csv(sheet, index=False)
    assert main(["import", "source=sheet", f"sheet={sheet}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]) == 0
    assert len(pd.read_csv(tmp_path / "o" / "labels.csv")) == 5
