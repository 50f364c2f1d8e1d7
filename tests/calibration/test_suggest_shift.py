"""`suggest purpose=estimate width=` runs the shift check of `estimate` and `predict` on the release and says
what it means for the plan: optimistic where the plan rests on the calibrator, not biased where it rests on the
release's own labels (calibration/release/sampling.py)."""

from __future__ import annotations

import shutil

import pandas as pd

from calibration.cli import main
from tests.calibration.test_estimate import release  # noqa: F401  (the module's trained release)
from tests.calibration.test_release_cv_plan import unlabelled  # noqa: F401  (the release without labels)

SHIFTED = "suggest: warning: these conversations differ from the training data (role "


def _shifted(folder, dst):
    """The folder, its judge answering every question with the top option: unlike the model's training data."""
    shutil.copytree(folder, dst)
    llm = pd.read_csv(dst / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    top = llm.groupby(["conversation_id", "turn", "question_id"])["option"].transform("max")
    llm["prob"] = (llm["option"] == top).astype(float)
    llm.to_csv(dst / "llm.csv", index=False)
    return dst


def _plan(data, model, out, *extra) -> int:
    args = ["suggest", "purpose=estimate", f"data={data}", f"model={model}", "budget=30", f"out={out}", *extra]
    return main(args)


def test_a_plan_from_the_calibrator_on_a_shifted_release_is_called_optimistic(release, unlabelled, tmp_path, capsys):  # noqa: F811
    for i, key in enumerate(("width=0.1", "decide_at=0.8")):
        sheet = tmp_path / f"plan{i}" / "sheet.csv"
        assert _plan(_shifted(unlabelled, tmp_path / f"shifted{i}"), release["model"], sheet, key) == 0
        out, err = capsys.readouterr()
        printed = out + err
        assert (
            SHIFTED in err
            and SHIFTED not in out
            and "the plan is optimistic: it assumes the calibrator is calibrated" in printed
        )
        assert sheet.exists()  # a warning: the plan is still written


def test_the_same_release_unshifted_plans_without_the_warning(release, unlabelled, tmp_path, capsys):  # noqa: F811
    assert _plan(unlabelled, release["model"], tmp_path / "s" / "sheet.csv", "width=0.1") == 0
    printed = "".join(capsys.readouterr())
    assert "differ from the training data" not in printed and "optimistic" not in printed


def test_a_plan_from_the_release_own_labels_says_the_shift_does_not_bias_it(release, tmp_path, capsys):  # noqa: F811
    labelled = _shifted(release["release"], tmp_path / "shifted")  # 16 of its 30 conversations labelled
    assert _plan(labelled, release["model"], tmp_path / "s" / "sheet.csv", "width=0.1", "overwrite=true") == 0
    printed = "".join(capsys.readouterr())
    assert SHIFTED in printed and "the plan reads this release's own labelled conversations" in printed
    assert "optimistic" not in printed
