"""`role-rubric compare-judges`: a judge against a copy of itself whose distributions are shuffled across turns
(the same labels, the same rubric), on the seeded synthetic data; the real one must win, the comparison must
not depend on the order the judges are given in, and bad inputs are one line and exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from calibration.cli import main
from calibration.judges.agreement import conversation_weights
from calibration.judges.kappa import reviewer_kappa

FAST = ["model=linear", "n_boot=200"]


def shuffled_copy(src: Path, dst: Path, *, share: float = 1.0, seed: int = 0) -> Path:
    """src with every question's distributions permuted across a `share` of its items (labels unchanged)."""
    shutil.copytree(src, dst)
    llm = pd.read_csv(src / "llm.csv")
    rng = np.random.default_rng(seed)
    parts = []
    for _, part in llm.groupby("question_id", sort=False):
        wide = part.pivot_table(index=["conversation_id", "turn"], columns="option", values="prob")
        probs = wide.to_numpy().copy()
        chosen = np.flatnonzero(rng.random(len(probs)) < share)
        probs[chosen] = probs[rng.permutation(chosen)]
        back = pd.DataFrame(probs, index=wide.index, columns=wide.columns).stack().rename("prob").reset_index()
        parts.append(back.assign(question_id=part["question_id"].iloc[0]))
    pd.concat(parts)[llm.columns].to_csv(dst / "llm.csv", index=False)
    return dst


@pytest.fixture(scope="module")
def judges(synthetic_dir, tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("judges")
    real = root / "real"
    shutil.copytree(synthetic_dir, real)
    return real, shuffled_copy(real, root / "shuffled")


@pytest.fixture(scope="module")
def compared(judges, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compared")
    real, shuffled = judges
    assert main(["compare-judges", f"data=[{real},{shuffled}]", f"out={out}", *FAST]) == 0
    return out


def test_the_real_judge_is_picked_on_every_question_and_the_shuffled_copy_needs_more_labels(compared):
    result = json.loads((compared / "compare-judges.json").read_text())
    assert set(result["questions"]) == {"scope", "tone", "overall"}
    for block in result["questions"].values():
        r = block["recommendation"]
        assert r["pick"] == "real" and not r["within_noise"] and r["p_best"]["real"] > 0.95
        assert r["rmse_difference_high"] < 0  # the paired interval clears 0
        shuffled = block["judges"]["shuffled"]
        assert shuffled["rmse"] > block["judges"]["real"]["rmse"]
        assert shuffled["label_multiplier"]["multiplier"] > 1.2
        assert block["judges"]["real"]["label_multiplier"]["multiplier"] == pytest.approx(1.0)
        assert block["judges"]["real"]["r2"] > shuffled["r2"]
        assert block["paired_vs_pick"]["shuffled"]["nll"]["difference"] > 0
        assert block["base_rate"]["majority"] >= max(block["base_rate"]["shares"].values()) - 1e-12
        assert block["alt_test"]["real"]["alt_test"]["tested"] >= 0
    assert result["overall"]["picked_on"] == {"real": 3, "shuffled": 0}
    whole = result["overall"]["whole_judge"]
    assert whole["pick"] == "real" and not whole["within_noise"] and whole["questions"] == ["scope", "tone", "overall"]
    assert whole["rmse_difference"] == pytest.approx(
        np.mean([b["recommendation"]["rmse_difference"] for b in result["questions"].values()]), abs=2e-6
    )
    assert "winner's curse" in result["winners_curse"]
    page = (compared / "compare-judges.html").read_text()
    assert "Recommendation per question" in page and "real" in page and "<img" in page
    assert "whole judge (over 3 question(s)): real, better than shuffled" in page


def test_the_comparison_does_not_depend_on_the_order_of_the_judges(judges, compared, tmp_path):
    real, shuffled = judges
    assert main(["compare-judges", f"data=[{shuffled},{real}]", f"out={tmp_path}", *FAST]) == 0
    a = json.loads((compared / "compare-judges.json").read_text())["questions"]
    b = json.loads((tmp_path / "compare-judges.json").read_text())["questions"]
    for qid in a:
        assert a[qid]["recommendation"]["pick"] == b[qid]["recommendation"]["pick"]
        for name in ("real", "shuffled"):  # the same folds and the same resamples, whatever the order
            assert a[qid]["judges"][name]["rmse"] == pytest.approx(b[qid]["judges"][name]["rmse"], abs=1e-9)
            assert a[qid]["judges"][name]["rmse_low"] == pytest.approx(b[qid]["judges"][name]["rmse_low"], abs=1e-9)


def test_the_disagreements_are_ranked_per_judge_and_carry_the_turns_trace_ids(judges, tmp_path):
    real, shuffled = judges
    traced = tmp_path / "traced"
    shutil.copytree(real, traced)
    items = pd.read_csv(real / "llm.csv")[["conversation_id", "turn"]].drop_duplicates()
    with open(traced / "conversations.jsonl", "w", encoding="utf-8") as fh:
        for cid, part in items.groupby("conversation_id"):
            turns = [
                {"user": "u", "assistant": "a", "trace_id": f"tr-{cid}-{t}", "span_id": f"sp-{t}"}
                for t in sorted(part["turn"])
            ]
            fh.write(json.dumps({"conversation_id": cid, "chatbot_role": "r", "turns": turns}) + "\n")
    out = tmp_path / "out"
    argv = ["compare-judges", f"data=[{traced},{shuffled}]", "names=[a,b]", f"out={out}", "questions=[overall]"]
    assert main([*argv, *FAST]) == 0
    frame = pd.read_csv(out / "disagreements.csv", dtype={"conversation_id": str, "turn": str})
    labels = pd.read_csv(real / "labels.csv")
    assert len(frame) == 2 * int((labels["question_id"] == "overall").sum())
    for _, part in frame.groupby("llm_judge"):
        assert part["rank"].tolist() == list(range(1, len(part) + 1))
        assert part["gap_share"].is_monotonic_decreasing
    assert (frame["trace_id"] == "tr-" + frame["conversation_id"] + "-" + frame["turn"]).all()
    assert (frame["gap"] == (frame["calibrated"] - frame["answer"]).round(6)).all() or np.allclose(
        frame["gap"], frame["calibrated"] - frame["answer"]
    )
    by_role = json.loads((out / "compare-judges.json").read_text())["questions"]["overall"]["kappa_per_role"]
    assert set(by_role) == {"r"} and set(by_role["r"]["judges"]) == {"a", "b"}  # one role: every row
    assert by_role["r"]["judges"]["a"]["n"] == len(frame) // 2
    spread = pd.read_csv(out / "reviewer_disagreements.csv", dtype={"conversation_id": str, "turn": str})
    assert len(spread) and spread["spread_share"].is_monotonic_decreasing and (spread["reviewers"] > 1).all()
    assert spread["trace_id"].str.startswith("tr-").all()


def test_the_network_calibrator_runs_on_shared_folds(judges, tmp_path):
    real, shuffled = judges
    argv = ["compare-judges", f"data=[{real},{shuffled}]", f"out={tmp_path}", "questions=[overall]", "n_boot=50"]
    small = ["train.ensemble=1", "train.pretrain_steps=20", "train.finetune_steps=40"]
    assert main([*argv, *small]) == 0
    result = json.loads((tmp_path / "compare-judges.json").read_text())
    assert result["settings"]["model"] == "network" and result["settings"]["settings"]["ensemble"] == 1
    block = result["questions"]["overall"]
    assert block["judges"]["real"]["rmse"] < block["judges"]["shuffled"]["rmse"]


def test_reviewers_who_always_agree_have_kappa_one_and_chance_level_pairs_about_zero():
    item = np.repeat(np.arange(200), 2)
    same = np.repeat(np.random.default_rng(0).integers(0, 4, 200), 2)
    W = conversation_weights(np.arange(200).repeat(2), 100, 0)
    assert reviewer_kappa(item, same, 4, W)["kappa"] == pytest.approx(1.0)
    independent = np.random.default_rng(1).integers(0, 4, 400)
    got = reviewer_kappa(item, independent, 4, W)
    assert abs(got["kappa"]) < 0.2 and got["low"] < 0 < got["high"]


def _bad(tmp_path: Path, argv: list[str], capsys) -> str:
    assert main(["compare-judges", *argv, f"out={tmp_path / 'out'}", *FAST]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_one_directory_is_refused(judges, tmp_path, capsys):
    assert "at least two data directories" in _bad(tmp_path, [f"data=[{judges[0]}]"], capsys)


def test_other_labels_in_one_directory_are_refused_naming_its_labels_file(judges, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(judges[1], other)
    labels = pd.read_csv(other / "labels.csv")
    labels.loc[0, "answer"] = 1 if labels.loc[0, "answer"] != 1 else 2
    labels.to_csv(other / "labels.csv", index=False)
    err = _bad(tmp_path, [f"data=[{judges[0]},{other}]"], capsys)
    assert "labels.csv" in err and "not those of real" in err


def test_another_rubric_is_refused(judges, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(judges[1], other)
    text = (other / "rubric.yaml").read_text().replace("label: t3", "label: t3\n  - value: 4\n    label: t4")
    (other / "rubric.yaml").write_text(text)
    assert "rubric" in _bad(tmp_path, [f"data=[{judges[0]},{other}]"], capsys)


def with_input_question(src: Path, dst: Path, *, source: Path) -> Path:
    """src with one more question, `hint`, that no reviewer answers (as a reference scorer's, `gather scorer=
    scorer.beside=`): its distributions are `source`'s real overall distributions (an informative input)."""
    shutil.copytree(src, dst)
    rubric = yaml.safe_load((dst / "rubric.yaml").read_text())
    rubric["questions"].append(
        {"id": "hint", "text": "A scorer's input", "options": [{"value": v, "label": f"h{v}"} for v in (1, 2, 3, 4)]}
    )
    (dst / "rubric.yaml").write_text(yaml.safe_dump(rubric, sort_keys=False))
    llm = pd.read_csv(dst / "llm.csv")
    real = pd.read_csv(source / "llm.csv")
    hint = real[real["question_id"] == "overall"].assign(question_id="hint")
    pd.concat([llm, hint[llm.columns]], ignore_index=True).to_csv(dst / "llm.csv", index=False)
    return dst


def test_a_question_no_reviewer_answers_is_read_as_an_input_and_combined(judges, tmp_path):
    """The shuffled judge with an input-only question carrying the real overall distributions: compared on the
    labelled questions only, it beats the shuffled judge alone on overall; combined, every judge's inputs are read
    whatever their number of questions."""
    real, shuffled = judges
    hinted = with_input_question(shuffled, tmp_path / "hinted", source=real)
    out = tmp_path / "out"
    argv = ["compare-judges", f"data=[{shuffled},{hinted},{real}]", f"out={out}", "combine_judges=true", *FAST]
    assert main(argv) == 0
    result = json.loads((out / "compare-judges.json").read_text())
    assert result["data"]["questions"] == ["scope", "tone", "overall"]  # hint is an input, never a target
    overall = result["questions"]["overall"]["judges"]
    assert overall["hinted"]["rmse"] < overall["shuffled"]["rmse"] - 0.05
    assert set(overall) == {"shuffled", "hinted", "real", "shuffled+hinted+real"}


def test_an_extra_question_the_reviewers_answer_is_refused(judges, tmp_path, capsys):
    real, shuffled = judges
    hinted = with_input_question(shuffled, tmp_path / "hinted", source=real)
    labels = pd.read_csv(hinted / "labels.csv")
    extra = labels[labels["question_id"] == "overall"].head(5).assign(question_id="hint")
    pd.concat([labels, extra], ignore_index=True).to_csv(hinted / "labels.csv", index=False)
    err = _bad(tmp_path, [f"data=[{real},{hinted}]"], capsys)
    assert "rubric.yaml" in err and "the reviewers answer hint, which only one of them has" in err


def test_an_unanswered_question_is_refused(judges, tmp_path, capsys):
    err = _bad(tmp_path, [f"data=[{judges[0]},{judges[1]}]", "questions=[nope]"], capsys)
    assert "nope" in err and "questions=" in err


def test_two_judges_that_each_miss_a_question_are_combined_into_one_calibrator(synthetic_dir, tmp_path):
    """a: the target's distributions shuffled; b: the other questions' shuffled. Combined, one calibrator reads
    the real distributions of every question: on the target it must beat a, which lacks the target's own."""
    a = _shuffle_questions(synthetic_dir, tmp_path / "a", ["overall"])
    b = _shuffle_questions(synthetic_dir, tmp_path / "b", ["scope", "tone"])
    out = tmp_path / "out"
    assert main(["compare-judges", f"data=[{a},{b}]", f"out={out}", "combine_judges=true", *FAST]) == 0
    result = json.loads((out / "compare-judges.json").read_text())
    assert result["settings"]["judges"] == ["a", "b", "a+b"]
    overall = result["questions"]["overall"]["judges"]
    assert overall["a+b"]["rmse"] < overall["a"]["rmse"]
    assert overall["a+b"]["rmse"] <= overall["b"]["rmse"] + 0.02
    assert "a+b (every judge's distributions into one calibrator) is the pick on" in result["overall"]["combination"]


def _shuffle_questions(src: Path, dst: Path, questions: list[str]) -> Path:
    shutil.copytree(src, dst)
    llm = pd.read_csv(src / "llm.csv")
    rng = np.random.default_rng(1)
    for qid in questions:
        rows = llm["question_id"] == qid
        wide = llm[rows].pivot_table(index=["conversation_id", "turn"], columns="option", values="prob")
        probs = wide.to_numpy().copy()[rng.permutation(len(wide))]
        back = pd.DataFrame(probs, index=wide.index, columns=wide.columns).stack().rename("prob").reset_index()
        llm = pd.concat([llm[~rows], back.assign(question_id=qid)[llm.columns]], ignore_index=True)
    llm.to_csv(dst / "llm.csv", index=False)
    return dst


def test_width_plans_more_labelled_conversations_for_the_shuffled_judge(judges, tmp_path):
    real, shuffled = judges
    argv = ["compare-judges", f"data=[{real},{shuffled}]", f"out={tmp_path}", "questions=[overall]", "width=0.15"]
    assert main([*argv, *FAST]) == 0
    block = json.loads((tmp_path / "compare-judges.json").read_text())["questions"]["overall"]["judges"]
    need = {name: j["labels_for_width"] for name, j in block.items()}
    assert 3 <= need["real"]["ppi"] < need["real"]["humans"] and need["real"]["ppi"] < need["shuffled"]["ppi"]
    # a judge that tells nothing saves nothing: ppi's lam then only costs its degree of freedom and its noise
    assert abs(need["shuffled"]["ppi"] - need["shuffled"]["humans"]) <= 0.1 * need["shuffled"]["humans"]
    assert need["real"]["humans"] == need["shuffled"]["humans"]  # humans-only does not read the judge


def test_alpha_sits_beside_kappa_and_a_second_reviewer_plan_ranks_singly_labelled_turns(judges, tmp_path):
    labels = pd.read_csv(judges[0] / "labels.csv", dtype=str)
    turns = labels[["conversation_id", "turn"]].drop_duplicates()
    thin = turns.sample(frac=0.6, random_state=0)  # these turns keep their first reviewer only
    first = labels.merge(thin, on=["conversation_id", "turn"]).groupby(["conversation_id", "turn"])["judge_id"].min()
    drop = labels.set_index(["conversation_id", "turn"]).index.isin(first.index) & ~labels.set_index(
        ["conversation_id", "turn", "judge_id"]
    ).index.isin(first.reset_index().set_index(["conversation_id", "turn", "judge_id"]).index)
    labels = labels[~drop]
    real, shuffled = (shutil.copytree(d, tmp_path / d.name) for d in judges)
    for d in (real, shuffled):
        labels.to_csv(d / "labels.csv", index=False)
    out = tmp_path / "plan"
    args = [f"data=[{real},{shuffled}]", f"out={out}", "agreement_width=0.15", *FAST]
    assert main(["compare-judges", *args]) == 0
    result = json.loads((out / "compare-judges.json").read_text())
    per_turn = labels.groupby(["conversation_id", "turn"])["judge_id"].nunique()
    for qid, block in result["questions"].items():
        a = block["alpha"]
        assert a["level"] == "ordinal" and set(a["per_reviewer"]) == set(labels["judge_id"])
        real_a, shuffled_a = a["judges"]["real"], a["judges"]["shuffled"]
        assert real_a["low"] <= real_a["alpha"] <= real_a["high"] and real_a["alpha"] > shuffled_a["high"]
        assert a["reviewers"]["turns"] == int((per_turn > 1).sum())
        plan = result["second_reviewer"]["questions"][qid]
        assert plan["turns_planned"] + plan["short_by"] >= plan["turns_needed"]
    plan = pd.read_csv(out / "second_reviewer.csv", dtype={"turn": str, "conversation_id": str})
    assert list(plan.columns[:4]) == ["rank", "conversation_id", "turn", "first_reviewer"]
    assert plan["rank"].tolist() == list(range(1, len(plan) + 1)) and len(plan) == result["second_reviewer"]["turns"]
    singly = per_turn[per_turn == 1].index
    assert set(zip(plan["conversation_id"], plan["turn"], strict=True)) <= set(singly)
    widths = plan["projected_width"].dropna().to_numpy()
    assert len(widths) and (np.diff(widths) <= 1e-9).all()
    assert "Krippendorff" in (out / "compare-judges.html").read_text()
