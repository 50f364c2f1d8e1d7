"""Every kind of bad input ends in one clear line naming the file (and row) and a non-zero exit,
or in its defined behaviour. One table, in the style of scikit-learn's error tests."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibration.cli import main


def _edit_csv(name: str, change):
    def apply(root: Path) -> None:
        path = root / name
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        df = change(df)
        df.to_csv(path, index=False)

    return apply


def _set(column: str, value: str, row: int = 0):
    def change(df):
        df.loc[row, column] = value
        return df

    return change


def _write(name: str, text: str):
    def apply(root: Path) -> None:
        (root / name).write_text(text)

    return apply


def _remove(name: str):
    return lambda root: (root / name).unlink()


CASES = [
    ("llm missing column", _edit_csv("llm.csv", lambda d: d.drop(columns=["prob"])), "llm.csv: missing column"),
    (
        "llm unknown question",
        _edit_csv("llm.csv", _set("question_id", "empathy")),
        r"llm.csv, row 1: unknown question 'empathy'",
    ),
    ("llm unknown option", _edit_csv("llm.csv", _set("option", "7")), r"llm.csv, row 1: option '7' is not an option"),
    ("llm prob above 1", _edit_csv("llm.csv", _set("prob", "1.5")), r"row 1: prob 1.5 is outside \[0, 1\]"),
    ("llm prob negative", _edit_csv("llm.csv", _set("prob", "-0.1")), r"row 1: prob -0.1 is outside"),
    ("llm prob NaN", _edit_csv("llm.csv", _set("prob", "")), r"llm.csv, row 1: prob is empty/NaN"),
    ("llm prob text", _edit_csv("llm.csv", _set("prob", "high")), r"row 1: prob is not a number \('high'\)"),
    ("llm not summing to 1", _edit_csv("llm.csv", _set("prob", "0.9", row=1)), r"sum to .*, not 1"),
    ("llm duplicate key", _edit_csv("llm.csv", lambda d: pd.concat([d, d.iloc[[3]]])), r"duplicate key"),
    ("llm bad turn", _edit_csv("llm.csv", _set("turn", "first")), r"row 1: turn 'first' is not a non-negative integer"),
    ("llm header only", _write("llm.csv", "conversation_id,turn,question_id,option,prob\n"), "header but no rows"),
    ("llm empty file", _write("llm.csv", ""), r"llm.csv: the file is empty"),
    ("llm missing", _remove("llm.csv"), r"no llm.csv or llm.parquet"),
    (
        "labels unknown question",
        _edit_csv("labels.csv", _set("question_id", "Q9")),
        r"labels.csv, row 1: unknown question 'Q9'",
    ),
    ("labels answer not an option", _edit_csv("labels.csv", _set("answer", "5")), r"answer '5' is not an option"),
    ("labels answer NaN", _edit_csv("labels.csv", _set("answer", "")), r"answer is empty/NaN.*leave out the row"),
    (
        "labels duplicate key",
        _edit_csv("labels.csv", lambda d: pd.concat([d, d.iloc[[0]]])),
        r"labels.csv, row \d+: duplicate key",
    ),
    (
        "labels without distributions",
        _edit_csv("labels.csv", _set("conversation_id", "ghost")),
        r"has no judge distributions",
    ),
    ("labels empty judge", _edit_csv("labels.csv", _set("judge_id", "")), r"judge_id is empty"),
    ("labels empty file", _write("labels.csv", ""), r"labels.csv: the file is empty"),
    ("labels missing", _remove("labels.csv"), r"no labels.csv or labels.parquet"),
    (
        "rubric invalid yaml",
        _write("rubric.yaml", "questions: [\n  - id: a\n    options: {"),
        r"rubric.yaml, row \d+: not valid YAML",
    ),
    ("rubric missing", _remove("rubric.yaml"), r"rubric.yaml: rubric file not found"),
    (
        "rubric non-numeric option",
        _write("rubric.yaml", "questions:\n  - id: overall\n    options: [{value: high}, {value: 2}]\n"),
        "non-numeric value 'high'",
    ),
    (
        "rubric duplicate question",
        _write(
            "rubric.yaml",
            "questions:\n  - {id: a, options: [{value: 1}, {value: 2}]}\n"
            "  - {id: a, options: [{value: 1}, {value: 2}]}\n",
        ),
        "duplicate question id",
    ),
]


@pytest.mark.parametrize(("name", "corrupt", "message"), CASES, ids=[c[0] for c in CASES])
def test_bad_dataset_fails_with_one_clear_line(name, corrupt, message, synthetic_copy, tmp_path, capsys):
    corrupt(synthetic_copy)
    code = main(["train", f"data={synthetic_copy}", f"out={tmp_path / 'model'}"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("role-rubric train: error: ")
    assert pd.Series([err]).str.contains(message).item(), err
    assert not (tmp_path / "model").exists()  # nothing half-written


def test_unknown_target_is_an_error(synthetic_dir, tmp_path, capsys):
    assert main(["train", f"data={synthetic_dir}", f"out={tmp_path}", "target=nope"]) == 2
    assert "target question 'nope' is not in the rubric" in capsys.readouterr().err


def test_unknown_setting_is_an_error(synthetic_dir, tmp_path, capsys):
    assert main(["train", f"data={synthetic_dir}", f"out={tmp_path}", "+train.momentum=0.9"]) == 2
    assert "unknown setting(s) ['momentum']" in capsys.readouterr().err


def test_bad_override_is_one_line(synthetic_dir, capsys):
    assert main(["cv", f"data={synthetic_dir}", "folds"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad override" in err


def test_unknown_command(capsys):
    assert main(["fly"]) == 2
    assert "unknown command 'fly'" in capsys.readouterr().err


def test_skip_unmatched_labels_is_counted(synthetic_copy):
    from calibration.data.dataset import load_dataset

    _edit_csv("labels.csv", _set("conversation_id", "ghost"))(synthetic_copy)
    ds = load_dataset(synthetic_copy, unmatched_labels="skip")
    assert ds.report == {"labels_without_distributions": 1}


def test_import_rejects_swapped_files(tmp_path, capsys):
    from tests.calibration.conftest import ANCHORS

    if not ANCHORS.exists():
        pytest.skip("reference data absent")
    code = main(
        [
            "import",
            f"evaluations={ANCHORS / 'human_judgments.tsv'}",
            f"judgments={ANCHORS / 'llm_evaluations.tsv'}",
            f"out={tmp_path}",
        ]
    )
    assert code == 2
    assert "is this the right LLM-Rubric file?" in capsys.readouterr().err
