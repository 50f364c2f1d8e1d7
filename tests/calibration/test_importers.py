"""`import source=llm-rubric` on the shared reference data: what is kept, dropped and counted."""

from __future__ import annotations

import pandas as pd

from calibration.cli import main
from calibration.data.dataset import load_dataset
from tests.calibration.conftest import ANCHORS


def test_import_counts_and_formats(llm_rubric_dir, tmp_path, capsys):
    out = tmp_path / "lr"
    assert (
        main(
            [
                "import",
                "source=llm-rubric",
                f"evaluations={ANCHORS / 'llm_evaluations.tsv'}",
                f"judgments={ANCHORS / 'human_judgments.tsv'}",
                f"out={out}",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "guardrail_failed_rows_excluded=8" in printed
    assert f"wrote {out / 'rubric.yaml'}" in printed
    ds = load_dataset(out)
    assert ds.rubric.ids == [f"Q{i}" for i in range(9)] and ds.rubric.target == "Q0"
    assert ds.rubric.question("Q8").values == [1.0, 2.0, 3.0]  # the always-zero 4th column is dropped
    assert len(ds.items) == 225 and len(ds.judges) == 24
    labels = pd.read_csv(out / "labels.csv")
    assert labels["answer"].between(1, 4).all()  # 0 = not answered never becomes a label


def test_unanswered_questions_are_missing_not_zero(llm_rubric_dir):
    raw = pd.read_csv(ANCHORS / "human_judgments.tsv", sep="\t", dtype={"text_id": str})
    row = raw[(raw["DQQ0"] != 2) & (raw["Q2"] == 0)].iloc[0]
    ds = load_dataset(llm_rubric_dir)
    item = ds.items.index[ds.items["conversation_id"] == row["text_id"]][0]
    judge = ds.judges.index(str(row["annotator_id"]))
    r = [i for i in range(len(ds.label_item)) if ds.label_item[i] == item and ds.label_judge[i] == judge][0]
    assert ds.answers[r, ds.rubric.ids.index("Q2")] == -1
    assert ds.answers[r, ds.rubric.ids.index("Q0")] >= 0
