"""`suggest purpose=estimate width= | decide_at= cv=DIR`: the plan from the calibrator's out-of-fold agreement
with the reviewers (calibration/release/cv_spread.py)."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.cli import main
from calibration.release.cv_spread import CvAgreement, cv_agreement, read_cv_agreement, spread_from_cv
from calibration.release.planning import labels_needed, spread_from_calibrator
from rubric.schema import load_rubric
from tests.calibration.conftest import SYNTH_RUBRIC
from tests.calibration.test_estimate import _split, release  # noqa: F401  (the module's trained release)

TINY = ["train.ensemble=2", "train.pretrain_steps=30", "train.finetune_steps=30"]


def _turns(n_conversations: int, rng, lengths=(1, 2, 3, 4, 5)):
    conversation = np.repeat(np.arange(n_conversations), rng.choice(lengths, size=n_conversations))
    return conversation, rng.uniform(0.1, 0.9, size=len(conversation))


def test_a_calibrated_cv_gives_back_the_calibrator_alone_spread():
    rng = np.random.default_rng(0)
    conversation, f = _turns(2000, rng)
    y = (rng.uniform(size=len(f)) < f).astype(float)
    found = cv_agreement(conversation, f, y)
    assert abs(found.slope) < 0.1 and abs(found.turn_inflation - 1) < 0.06 and found.correlation < 0.05
    assert abs(found.inflation - 1) < 0.1
    rel_conv, rel_f = _turns(300, np.random.default_rng(1))
    alone, from_cv = spread_from_calibrator(rel_conv, rel_f), spread_from_cv(rel_conv, rel_f, found, "cv")
    assert from_cv.ppi == pytest.approx(alone.ppi, rel=0.12) and from_cv.humans == pytest.approx(alone.humans, rel=0.12)
    assert from_cv.df == 1999 and from_cv.N == alone.N and from_cv.m_bar == alone.m_bar


def test_a_calibrated_agreement_is_exactly_the_calibrator_alone_formulas():
    conversation, f = _turns(50, np.random.default_rng(2))
    alone = spread_from_calibrator(conversation, f)
    same = spread_from_cv(conversation, f, CvAgreement(0.0, 1.0, 0.0, 1.0, 40, 100), "cv")
    assert (same.rate, same.humans, same.ppi) == pytest.approx((alone.rate, alone.humans, alone.ppi))
    assert same.df == 39 and alone.df is None


def test_a_miscalibrated_cv_plans_a_larger_ppi_spread_and_more_labels():
    rng = np.random.default_rng(3)
    conversation, p = _turns(400, rng)
    shared = rng.normal(0, 0.2, size=400)[conversation]  # what a conversation's turns share, unseen by f
    f = np.clip(0.5 + 1.8 * (p - 0.5), 0.02, 0.98)  # over-confident
    y = (rng.uniform(size=len(p)) < np.clip(p + shared, 0, 1)).astype(float)
    found = cv_agreement(conversation, f, y)
    assert found.slope < -0.2 and found.inflation > 1.5 and found.correlation > 0.1
    rel_conv, rel_f = _turns(300, np.random.default_rng(4))
    alone, from_cv = spread_from_calibrator(rel_conv, rel_f), spread_from_cv(rel_conv, rel_f, found, "cv")
    assert from_cv.ppi > 1.5 * alone.ppi and from_cv.ppi <= from_cv.humans
    n_alone = labels_needed(alone.ppi, alone.m_bar, alone.N, 0.05)
    assert labels_needed(from_cv.ppi, from_cv.m_bar, from_cv.N, 0.05, df=from_cv.df) > 1.3 * n_alone


def test_the_within_conversation_term_grows_with_the_release_conversations_length():
    found = CvAgreement(0.0, 1.2, 0.3, 1.8, 100, 300)
    f = np.full(120, 0.7)
    short, long = (spread_from_cv(np.repeat(np.arange(120 // k), k), f, found, "cv") for k in (2, 6))
    per_turn = [s.ppi / s.m_bar for s in (short, long)]
    assert per_turn[1] > per_turn[0] > 1.2 * 0.21 - 1e-9  # more turns share an error: more per turn


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(3, 40),
    skew=st.floats(-3, 3),
    shared=st.floats(0, 0.4),
)
def test_inflation_is_non_negative_and_plans_are_monotone_in_width(seed, n, skew, shared):
    rng = np.random.default_rng(seed)
    conversation, p = _turns(n, rng)
    f = 1 / (1 + np.exp(-(skew * (p - 0.5) + rng.normal(0, shared + 1e-9, size=n)[conversation])))
    y = (rng.uniform(size=len(p)) < p).astype(float)
    found = cv_agreement(conversation, f, y)
    assert found.inflation >= 0 and found.turn_inflation >= 0 and 0 <= found.correlation <= 1
    assert np.isfinite(found.slope)
    sp = spread_from_cv(conversation, f, found, "cv")
    assert 0 <= sp.ppi <= sp.humans
    plans = [labels_needed(sp.ppi, sp.m_bar, 500, w, df=sp.df) for w in (0.02, 0.05, 0.1, 0.2)]
    known = [500 if x is None else x for x in plans]
    assert known == sorted(known, reverse=True)


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cv_dir(release):  # noqa: F811
    out = release["root"] / "cv"
    if not (out / "predictions.csv").exists():
        assert main(["cv", f"data={release['train']}", f"out={out}", "folds=3", *TINY]) == 0
    return out


@pytest.fixture(scope="module")
def unlabelled(release):  # noqa: F811
    """The release without its pilot labels: the planner falls back to the calibrator (or cv=)."""
    out = _split(release["data"], release["root"] / "unlabelled", release["ids"][30:60], labelled=[])
    (out / "labels.csv").unlink()
    return out


def _suggest(data, model, out, *extra) -> int:
    return main(["suggest", "purpose=estimate", f"data={data}", f"model={model}", "budget=30", f"out={out}", *extra])


def _sampled(sheet) -> int:
    return int(pd.read_csv(sheet.parent / "sample_plan.csv")["sampled"].sum())


def _copy(cv_dir, dst):
    shutil.copytree(cv_dir, dst)
    return dst


def test_cv_records_its_judge_and_suggest_names_the_source(release, cv_dir, unlabelled, tmp_path, capsys):  # noqa: F811
    assert json.loads((cv_dir / "metrics.json").read_text())["judge"]["model"] == "judge-a"
    sheet = tmp_path / "cv" / "sheet.csv"
    assert _suggest(unlabelled, release["model"], sheet, "width=0.15", f"cv={cv_dir}") == 0
    printed = "".join(capsys.readouterr())
    assert f"out-of-fold agreement of cv={cv_dir}, 30 conversations" in printed
    assert "what a calibrated calibrator would leave" in printed and "ppi: label" in printed
    assert 2 <= _sampled(sheet) <= 30
    assert "differ from the training data" not in printed  # the release is like the training data


def test_a_cv_plan_for_a_release_unlike_the_training_data_says_to_plan_from_a_pilot(
    release,  # noqa: F811
    cv_dir,
    unlabelled,
    tmp_path,
    capsys,
):
    shifted = shutil.copytree(unlabelled, tmp_path / "shifted")
    llm = pd.read_csv(shifted / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    top = llm.groupby(["conversation_id", "turn", "question_id"])["option"].transform("max")
    llm["prob"] = (llm["option"] == top).astype(float)  # the judge now always answers the top option
    llm.to_csv(shifted / "llm.csv", index=False)
    assert _suggest(shifted, release["model"], tmp_path / "s" / "sheet.csv", "width=0.15", f"cv={cv_dir}") == 0
    out, err = capsys.readouterr()
    printed = out + err
    assert "suggest: warning: these conversations differ from the training data (role " in err
    assert "warning:" not in out  # warnings on standard error, apart from the results
    assert "the plan is optimistic: it assumes the calibrator is as far off here as out of fold (cv=)" in printed
    assert "label a pilot of 10 conversations and plan from it" in printed
    assert _sampled(tmp_path / "s" / "sheet.csv") >= 2  # a warning: the plan is still written


def test_a_cv_where_the_calibrator_is_off_plans_more_than_the_calibrator_alone(
    release,  # noqa: F811
    cv_dir,
    unlabelled,
    tmp_path,
    capsys,
):
    off = _copy(cv_dir, tmp_path / "off")
    frame = pd.read_csv(off / "predictions.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    rows = frame["method"] == "calibrated"
    first_half = frame["conversation_id"].isin(release["ids"][:15])
    frame.loc[rows, "answer"] = np.where(first_half[rows], 4, 1)  # whole conversations the calibrator misjudges
    frame.to_csv(off / "predictions.csv", index=False)
    sizes = {}
    for name, extra in (("alone", []), ("cv", [f"cv={cv_dir}"]), ("off", [f"cv={off}"])):
        sheet = tmp_path / name / "sheet.csv"
        assert _suggest(unlabelled, release["model"], sheet, "width=0.1", *extra) == 0
        printed = capsys.readouterr().out
        sizes[name] = int(printed.split("ppi: label ")[1].split()[0])
    assert sizes["off"] > sizes["alone"]
    assert sizes["off"] > sizes["cv"]


def _refused(release, unlabelled, tmp_path, capsys, *extra, purpose="estimate") -> str:  # noqa: F811
    sheet = tmp_path / "refused" / "sheet.csv"
    args = ["suggest", f"purpose={purpose}", f"data={unlabelled}", f"model={release['model']}", "budget=30"]
    assert main([*args, f"out={sheet}", *extra]) == 2
    assert not sheet.exists() and not (sheet.parent / "sample_plan.csv").exists()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    return err


def test_refusals(release, cv_dir, unlabelled, tmp_path, capsys):  # noqa: F811
    judge = _copy(cv_dir, tmp_path / "judge")
    info = json.loads((judge / "metrics.json").read_text())
    info["judge"]["model"] = "judge-b"
    (judge / "metrics.json").write_text(json.dumps(info))
    assert "another judge" in _refused(release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={judge}")

    target = _copy(cv_dir, tmp_path / "target")
    frame = pd.read_csv(target / "predictions.csv", keep_default_na=False)
    frame["question_id"] = "scope"
    frame.to_csv(target / "predictions.csv", index=False)
    assert "the model's target is 'overall'" in _refused(
        release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={target}"
    )

    empty = _copy(cv_dir, tmp_path / "empty")
    (empty / "predictions.csv").write_text("")
    assert "predictions.csv" in _refused(release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={empty}")

    bad = _copy(cv_dir, tmp_path / "bad")
    frame = pd.read_csv(bad / "predictions.csv", keep_default_na=False, dtype={"p_4": str})
    frame.loc[frame.index[frame["method"] == "calibrated"][3], "p_4"] = "high"
    frame.to_csv(bad / "predictions.csv", index=False)
    assert "not numbers in [0, 1]" in _refused(release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={bad}")

    options = _copy(cv_dir, tmp_path / "options")
    frame = pd.read_csv(options / "predictions.csv", keep_default_na=False).drop(columns="p_4")
    frame.to_csv(options / "predictions.csv", index=False)
    assert "options" in _refused(release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={options}")

    missing = tmp_path / "no-cv"
    missing.mkdir()
    assert "predictions.csv" in _refused(release, unlabelled, tmp_path, capsys, "width=0.1", f"cv={missing}")

    assert "cv=" in _refused(release, unlabelled, tmp_path, capsys, f"cv={cv_dir}", purpose="learn")
    assert "cv=" in _refused(release, unlabelled, tmp_path, capsys, f"cv={cv_dir}")  # estimate without a plan


def test_a_cv_of_several_directories_keeps_their_conversations_apart(tmp_path):
    """`cv data=[OLD,NEW]` writes a `dataset` column; "c000" of each directory is its own conversation."""
    (tmp_path / "rubric.yaml").write_text(yaml.safe_dump(SYNTH_RUBRIC, sort_keys=False))
    model = SimpleNamespace(rubric=load_rubric(tmp_path / "rubric.yaml"), judge_identity=None)
    rng = np.random.default_rng(5)
    rows = []
    for dataset in ("old", "new"):
        for c in range(4):
            for t in range(2):
                p = rng.dirichlet(np.ones(4))
                rows.append((f"c{c:03d}", t, "j0", "overall", "calibrated", *p, p @ [1, 2, 3, 4], 3, dataset))
    columns = ["conversation_id", "turn", "judge_id", "question_id", "method", "p_1", "p_2", "p_3", "p_4"]
    frame = pd.DataFrame(rows, columns=[*columns, "expected", "answer", "dataset"])
    (tmp_path / "cv").mkdir()
    frame.to_csv(tmp_path / "cv" / "predictions.csv", index=False)
    found = read_cv_agreement(tmp_path / "cv", model, 3.0)
    assert found.n_conversations == 8 and found.n_turns == 16
