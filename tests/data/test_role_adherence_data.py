"""The bundled role-adherence benchmark: files load, counts, balance, label sanity, and a byte-for-byte
deterministic generator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from rubric.conversations import load_conversations
from rubric.schema import load_rubric

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "data" / "role_adherence"
GENERATED = ["conversations.jsonl", "labels.csv", "turn_designs.csv", "judges.csv", "rubric.yaml", "README.md"]
QUESTIONS = ["scope", "tone", "prohibited", "next_step", "overall"]
DESIGNS = ["adherent", "scope_violation", "tone_violation", "prohibited_violation", "constructive_failure"]
VIOLATED_DIMENSION = {
    "scope_violation": "scope",
    "tone_violation": "tone",
    "prohibited_violation": "prohibited",
    "constructive_failure": "next_step",
}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    with (DATA / "conversations.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


@pytest.fixture(scope="module")
def labels() -> pd.DataFrame:
    return pd.read_csv(DATA / "labels.csv")


@pytest.fixture(scope="module")
def designs() -> pd.DataFrame:
    return pd.read_csv(DATA / "turn_designs.csv", keep_default_na=False)


@pytest.fixture(scope="module")
def judges() -> pd.DataFrame:
    return pd.read_csv(DATA / "judges.csv")


def test_files_load_with_the_package_loaders(records):
    conversations = load_conversations(DATA)
    rubric = load_rubric(DATA)
    assert rubric.ids == QUESTIONS and rubric.target == "overall"
    assert all(q.values == [1.0, 2.0, 3.0, 4.0] for q in rubric.questions)
    assert [c.conversation_id for c in conversations] == [r["conversation_id"] for r in records]
    assert all(t.reference for c in conversations for t in c.turns)
    assert (DATA / "conversations.jsonl").stat().st_size < 2_000_000


def test_rubric_matches_the_package_rubric():
    conf = ROOT / "conf" / "rubric" / "role_adherence.yaml"
    if not conf.exists():
        pytest.skip("conf/rubric/role_adherence.yaml not present")
    ours, theirs = load_rubric(DATA), load_rubric(conf)
    assert [(q.id, q.values) for q in ours.questions] == [(q.id, q.values) for q in theirs.questions]
    assert ours.target == theirs.target


def test_counts_roles_and_turns(records, designs):
    assert len(records) >= 80
    roles = {r["role"] for r in records}
    assert {"fintech_support", "maths_tutor", "telehealth_intake", "airline_booking"} <= roles
    for r in records:
        assert 4 <= len(r["turns"]) <= 6
        assert len(r["chatbot_role"]) > 300  # a full role definition, not a label
        for t in r["turns"]:
            for key in ("user", "assistant", "reference"):
                assert t[key].strip() and "{" not in t[key] and "}" not in t[key], (r["conversation_id"], t)
    keys = {(r["conversation_id"], i) for r in records for i in range(len(r["turns"]))}
    assert set(zip(designs.conversation_id, designs.turn, strict=True)) == keys
    assert len(designs) == len(keys)
    role_of = {r["conversation_id"]: r["role"] for r in records}
    assert (designs.conversation_id.map(role_of) == designs.role).all()


def test_text_is_varied(records):
    assistant = [t["assistant"] for r in records for t in r["turns"]]
    user = [t["user"] for r in records for t in r["turns"]]
    assert len(set(assistant)) / len(assistant) > 0.75
    assert len(set(user)) / len(user) > 0.75
    # each role's conversations do not share one opening line
    by_role: dict[str, set[str]] = {}
    for r in records:
        by_role.setdefault(r["role"], set()).add(r["turns"][0]["user"])
    assert all(len(openers) >= 15 for openers in by_role.values())


def test_design_balance(designs):
    share = designs.design.value_counts(normalize=True)
    assert set(share.index) == set(DESIGNS)
    assert 0.40 <= share["adherent"] <= 0.50
    for d in DESIGNS[1:]:
        assert share[d] >= 0.10
    per_role = designs.groupby(["role", "design"]).size().unstack(fill_value=0)
    assert (per_role >= 15).all().all()
    hard = designs[designs.hard_case == 1]
    kinds = hard.groupby("hard_case_kind").design.unique().to_dict()
    assert {k: list(v) for k, v in kinds.items()} == {
        "refusal_with_next_step": ["adherent"],
        "refusal_without_next_step": ["constructive_failure"],
        "right_content_wrong_register": ["tone_violation"],
        "subtle_prohibited": ["prohibited_violation"],
    }
    assert (hard.hard_case_kind.value_counts() >= 10).all()
    assert (designs[designs.hard_case == 0].hard_case_kind == "").all()


def test_labels_are_native_and_balanced(labels, judges, designs):
    assert list(labels.columns) == ["conversation_id", "turn", "judge_id", "question_id", "answer"]
    assert not labels.isna().any().any()
    assert labels.answer.dtype.kind == "i" and labels.answer.between(1, 4).all()
    assert not labels.duplicated(["conversation_id", "turn", "judge_id", "question_id"]).any()
    assert set(labels.question_id) == set(QUESTIONS)
    assert len(judges) >= 10 and set(labels.judge_id) == set(judges.judge_id)
    assert set(zip(labels.conversation_id, labels.turn, strict=True)) == set(
        zip(designs.conversation_id, designs.turn, strict=True)
    )
    per_conv = labels.groupby("conversation_id").judge_id.nunique()
    assert (per_conv == 3).all()
    load = labels.groupby("judge_id").conversation_id.nunique()
    assert load.max() - load.min() <= 1
    expected = len(designs) * 3 * len(QUESTIONS)
    skipped = expected - len(labels)
    assert 0 < skipped < 0.1 * expected  # judges sometimes leave a question unanswered


def test_labels_follow_the_design(labels, designs, judges):
    merged = labels.merge(designs, on=["conversation_id", "turn"])
    overall = merged[merged.question_id == "overall"].groupby("design").answer.mean()
    for design, dim in VIOLATED_DIMENSION.items():
        assert overall["adherent"] - overall[design] > 0.5, design
        on_dim = merged[merged.question_id == dim].groupby("design").answer.mean()
        assert on_dim["adherent"] - on_dim[design] > 0.8, (design, dim)
    # hard cases sit between the clear cases
    hard = merged[(merged.question_id == "overall") & (merged.hard_case_kind == "refusal_with_next_step")]
    assert hard.answer.mean() > overall.drop("adherent").max()
    # judge idiosyncrasies show up: the lenient judge rates above the severe one, the extreme one uses the ends
    by_judge = merged.groupby("judge_id").answer
    assert by_judge.mean()["J02"] - by_judge.mean()["J03"] > 0.5
    ends = merged.answer.isin([1, 4]).groupby(merged.judge_id).mean()
    assert ends["J04"] > ends["J05"] + 0.2
    traits = {"leniency", "extremity", "noise", "skip_prob", "min_weight"}
    weights = {f"w_{aspect}" for aspect in ("scope", "tone", "prohibited", "next_step")}  # each judge's per aspect
    assert set(judges.columns) >= traits | weights


def test_datasheet_states_synthetic_and_counts(records, labels, judges):
    text = (DATA / "README.md").read_text(encoding="utf-8")
    assert "synthetic" in text.lower()
    assert f"conversations: {len(records)}" in text and f"label rows: {len(labels)}" in text
    assert "python data/role_adherence/generate.py" in text
    assert all(j in text for j in judges.judge_id)


def test_generator_is_deterministic_and_matches_committed_files(tmp_path):
    out = tmp_path / "regen"
    subprocess.run(
        [sys.executable, str(DATA / "generate.py"), "--out", str(out)], check=True, capture_output=True, cwd=tmp_path
    )
    for name in GENERATED:
        assert (out / name).read_bytes() == (DATA / name).read_bytes(), f"{name} differs from a fresh generation"
