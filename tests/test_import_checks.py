"""`import` checks what it writes with the rules `train` reads it by, naming the source file and row:
a dataset `import` wrote is never refused later."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from calibration.cli import main

EVAL_HEADER = "text_id\tcriterion\tanswer1_prob\tanswer2_prob\tanswer3_prob\tanswer4_prob\n"
JUDGMENT_HEADER = "text_id\tDQQ0\tQ0\tannotator_id\n"


def _write(tmp_path: Path, evals: list[str], judgments: list[str]) -> list[str]:
    (tmp_path / "e.tsv").write_text(EVAL_HEADER + "".join(line + "\n" for line in evals))
    (tmp_path / "h.tsv").write_text(JUDGMENT_HEADER + "".join(line + "\n" for line in judgments))
    return [
        "import",
        "source=llm-rubric",
        f"evaluations={tmp_path / 'e.tsv'}",
        f"judgments={tmp_path / 'h.tsv'}",
        f"out={tmp_path / 'out'}",
    ]


GOOD_EVALS = ["d1\tQ0\t0.1\t0.2\t0.3\t0.4", "d2\tQ0\t0.4\t0.3\t0.2\t0.1"]
GOOD_JUDGMENTS = ["d1\t1\t3\t21", "d2\t1\t2\t21", "d1\t1\t4\t22"]


def test_a_good_import_trains(tmp_path):
    assert main(_write(tmp_path, GOOD_EVALS, GOOD_JUDGMENTS)) == 0
    assert (
        main(
            [
                "train",
                f"data={tmp_path / 'out'}",
                f"out={tmp_path / 'model'}",
                "train.ensemble=1",
                "train.pretrain_steps=2",
                "train.finetune_steps=2",
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    ("evals", "judgments", "message"),
    [
        (
            ["d1\tQ0\t0.1\t0.2\t0.3\t0.4", "d2\tQ0\t0.4\t0.3\t0.2\t0.4"],
            GOOD_JUDGMENTS,
            r"e.tsv, row 2: probabilities of question 'Q0' for item \('d2', ''\) sum to 1.3000, not 1",
        ),
        (GOOD_EVALS, ["d1\t1\t3\t21", "d2\t1\t5\t21"], r"h.tsv, row 2: answer '5' is not an option of question 'Q0'"),
        (GOOD_EVALS, ["d1\t1\t3\t21", "d2\t1\t2\t"], r"h.tsv, row 2: judge_id is empty"),
        (GOOD_EVALS, ["d1\t1\t3\t21", "d1\t1\t3.5\t22"], r"h.tsv, row 2: answer '3.5' is not an option"),
    ],
    ids=["sum", "answer-outside", "empty-annotator", "fractional-answer"],
)
def test_import_refuses_what_train_would_refuse(tmp_path, capsys, evals, judgments, message):
    code = main(_write(tmp_path, evals, judgments))
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert pd.Series([err]).str.contains(message).all(), err
    assert "import again" in err
    assert not (tmp_path / "out" / "llm.csv").exists()  # nothing written that train would refuse


def test_padded_ids_in_the_source_are_one_id(tmp_path):
    assert (
        main(
            _write(
                tmp_path,
                [" d1\tQ0 \t0.1\t0.2\t0.3\t0.4", "d2\tQ0\t0.4\t0.3\t0.2\t0.1"],
                ["d1 \t1\t3\t21", "d2\t1\t2\t21 ", "d1\t1\t4\t22"],
            )
        )
        == 0
    )
    labels = pd.read_csv(tmp_path / "out" / "labels.csv", dtype=str)
    assert sorted(labels["judge_id"].unique()) == ["21", "22"] and set(labels["conversation_id"]) == {"d1", "d2"}
