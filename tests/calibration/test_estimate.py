"""`role-rubric estimate` and `suggest purpose=estimate` end to end, the CI gate, and every refusal."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from calibration.cli import main
from calibration.release import estimate_release
from tests.calibration.conftest import make_native_dataset, train_quick

ROLES = ("support agent", "tutor")
JUDGE = {"backend": "chat", "model": "judge-a", "base_url_host": "127.0.0.1:8000", "answer_mode": "auto"}


def _split(src: Path, dst: Path, conversations: list[str], *, labelled: list[str] | None = None) -> Path:
    """A dataset dir with the conversations named (and labels only for `labelled`, default all)."""
    dst.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "rubric.yaml", dst)
    llm = pd.read_csv(src / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    labels = pd.read_csv(
        src / "labels.csv", dtype={"conversation_id": str, "turn": str, "judge_id": str}, keep_default_na=False
    )
    llm[llm.conversation_id.isin(conversations)].to_csv(dst / "llm.csv", index=False)
    keep = conversations if labelled is None else labelled
    labels[labels.conversation_id.isin(keep)].to_csv(dst / "labels.csv", index=False)
    with open(dst / "conversations.jsonl", "w") as fh:
        for i, cid in enumerate(conversations):
            # each conversation its own text: the model recognises its training conversations by their text
            turns = [{"user": f"question {t} of {cid}", "assistant": f"answer {t} to {cid}"} for t in range(2)]
            fh.write(json.dumps({"conversation_id": cid, "chatbot_role": ROLES[i % 2], "turns": turns}) + "\n")
    (dst / "gather_summary.json").write_text(json.dumps({"judge_identity": JUDGE}))  # gathered by the model's judge
    return dst


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A model trained on conversations c000-c029 of a 60-conversation dataset; a release (c030-c059)
    with 16 labelled conversations, and a baseline release from the same process."""
    root = tmp_path_factory.mktemp("release")
    data = make_native_dataset(root / "all", n_conversations=90, seed=3)
    ids = [f"c{c:03d}" for c in range(90)]
    train = _split(data, root / "train", ids[:30])
    rel = _split(data, root / "release", ids[30:60], labelled=ids[30:46])
    base = _split(data, root / "baseline", ids[60:90], labelled=ids[60:90:2])
    for folder in (train, rel, base):  # gathered by one judge; the model records it
        (folder / "gather_summary.json").write_text(json.dumps({"judge_identity": JUDGE}))
    model = root / "model"
    assert train_quick(train, model, steps=30, ensemble=2) == 0
    return {"root": root, "data": data, "train": train, "release": rel, "baseline": base, "model": model, "ids": ids}


def _estimate(release, out, *extra) -> int:
    return main(["estimate", f"data={release['release']}", f"model={release['model']}", f"out={out}", *extra])


def test_estimate_writes_the_pinned_shape_and_a_table(release, tmp_path, capsys):
    assert _estimate(release, tmp_path / "est") == 0
    printed = capsys.readouterr().out
    assert (
        "ppi 90% CI" in printed
        and "humans 90% CI" in printed
        and f"wrote {tmp_path / 'est' / 'estimate.json'}" in printed
    )
    result = json.loads((tmp_path / "est" / "estimate.json").read_text())
    assert result["alpha"] == 0.1
    for kind in ("rate", "mean"):
        block = result[kind]
        assert isinstance(block["calibrator"], float)
        for column in ("humans", "ppi"):
            assert block[column]["low"] <= block[column]["estimate"] <= block[column]["high"]
        assert block["n_labelled_conversations"] == 16 and block["n_conversations"] == 30
        assert block["effective_labels"] > 0
        assert set(result["by_role"]) == set(ROLES)
        assert all(set(v) >= {"rate", "mean"} for v in result["by_role"].values())
    assert result["rate"]["ppi"]["low"] >= 0 and result["rate"]["ppi"]["high"] <= 1.2
    assert set(result["by_question"]) == {"scope", "tone"}
    assert "same reviewer" in result["note"] and "conversation" in result["note"]
    assert result["gate"]["passed"] is True


def test_humans_column_is_the_labelled_sample_mean(release):
    """With every turn of a labelled conversation labelled, the humans-only estimate of the rate is the
    turn-weighted mean of the reviewers' per-turn share of answers >= 3."""
    result = estimate_release(release["release"], release["model"])
    labels = pd.read_csv(release["release"] / "labels.csv", dtype={"conversation_id": str, "turn": str})
    target = labels[labels.question_id == "overall"]
    per_turn = (target.answer >= 3).groupby([target.conversation_id, target.turn]).mean()
    assert result["rate"]["humans"]["estimate"] == pytest.approx(per_turn.mean(), abs=1e-9)


def test_api_and_command_agree(release, tmp_path):
    assert _estimate(release, tmp_path / "est") == 0
    written = json.loads((tmp_path / "est" / "estimate.json").read_text())
    api = estimate_release(release["release"], release["model"])
    assert api["rate"]["ppi"]["estimate"] == pytest.approx(written["rate"]["ppi"]["estimate"], abs=1e-12)


def test_gate_fails_with_one_line_naming_the_bound(release, tmp_path, capsys):
    assert _estimate(release, tmp_path / "strict", "fail_under=0.99") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lower bound" in err[0] and "fail_under=0.99" in err[0]
    assert json.loads((tmp_path / "strict" / "estimate.json").read_text())["gate"]["passed"] is False
    assert _estimate(release, tmp_path / "loose", "fail_under=0.01") == 0


def test_baseline_difference_and_fail_if_worse(release, tmp_path):
    assert _estimate(release, tmp_path / "diff", f"baseline={release['baseline']}") == 0
    result = json.loads((tmp_path / "diff" / "estimate.json").read_text())
    for kind in ("rate", "mean"):
        d = result["difference"][kind]
        assert d["low"] <= d["estimate"] <= d["high"] and 0 <= d["p"] <= 1
    process = estimate_release(release["release"], release["model"], population="process", baseline=release["baseline"])
    for kind in ("rate", "mean"):  # releases are compared as draws of their chatbots' behaviour
        assert result["difference"][kind]["estimate"] == pytest.approx(
            process[kind]["ppi"]["estimate"] - process["baseline"][kind]["ppi"]["estimate"], abs=1e-12
        )
    assert _estimate(release, tmp_path / "nobase", "fail_if_worse=true") == 2


def test_sampling_plan_round_trip(release, tmp_path, capsys):
    sheet = tmp_path / "plan" / "to_label.csv"
    assert (
        main(["suggest", "purpose=estimate", f"data={release['release']}", "budget=12", f"out={sheet}", "seed=4"]) == 0
    )
    plan = pd.read_csv(sheet.parent / "sample_plan.csv", dtype={"conversation_id": str})
    assert plan["sampled"].sum() == 12 and len(plan) == 30
    assert plan["inclusion_probability"].eq(12 / 30).all()
    rows = pd.read_csv(sheet, dtype={"conversation_id": str}, keep_default_na=False)
    assert set(rows["conversation_id"]) == set(plan.loc[plan.sampled == 1, "conversation_id"])
    assert (rows["judge_id"] == "").all() and len(rows) == 12 * 2 * 3  # every turn x every question
    # Label exactly the planned conversations and estimate with the plan.
    chosen = list(plan.loc[plan.sampled == 1, "conversation_id"])
    rel = _split(release["data"], tmp_path / "planned", release["ids"][30:60], labelled=chosen)
    shutil.copy(sheet.parent / "sample_plan.csv", rel / "sample_plan.csv")
    assert main(["estimate", f"data={rel}", f"model={release['model']}", f"out={tmp_path / 'e'}"]) == 0
    assert "uniform" in json.loads((tmp_path / "e" / "estimate.json").read_text())["sampling"]


def test_unequal_plan_is_used_and_an_unplanned_label_refused(release, tmp_path, capsys):
    rel = _split(release["data"], tmp_path / "rel", release["ids"][30:60], labelled=release["ids"][30:46])
    plan = pd.DataFrame(
        {
            "conversation_id": release["ids"][30:60],
            "inclusion_probability": [0.8] * 15 + [0.4] * 15,
            "sampled": [1] * 16 + [0] * 14,
        }
    )
    plan.to_csv(rel / "sample_plan.csv", index=False)
    assert main(["estimate", f"data={rel}", f"model={release['model']}", f"out={tmp_path / 'w'}"]) == 0
    assert "inclusion probabilities from" in json.loads((tmp_path / "w" / "estimate.json").read_text())["sampling"]
    plan.iloc[:10].to_csv(rel / "sample_plan.csv", index=False)  # labelled conversations the plan does not know
    capsys.readouterr()
    assert main(["estimate", f"data={rel}", f"model={release['model']}", f"out={tmp_path / 'x'}"]) == 2
    assert "not in the sampling plan" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def _refused(args, tmp_path, capsys, words) -> None:
    out = tmp_path / "refused"
    capsys.readouterr()
    assert main([*args, f"out={out}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
    assert not out.exists()


def test_refusals(release, tmp_path, capsys):
    model = f"model={release['model']}"
    # labels for conversations not in the release
    rel = _split(release["data"], tmp_path / "extra", release["ids"][30:60], labelled=release["ids"][30:60])
    labels = pd.read_csv(release["data"] / "labels.csv", dtype=str)
    pd.concat([pd.read_csv(rel / "labels.csv", dtype=str), labels[labels.conversation_id == "c070"]]).to_csv(
        rel / "labels.csv", index=False
    )
    _refused(["estimate", f"data={rel}", model], tmp_path, capsys, "labels.csv")
    # the model's own training conversations
    _refused(["estimate", f"data={release['train']}", model], tmp_path, capsys, "trained on")
    _refused(["decide", f"calibration={release['train']}", model], tmp_path, capsys, "trained on")
    # fewer than 2 labelled conversations
    one = _split(release["data"], tmp_path / "one", release["ids"][30:60], labelled=release["ids"][30:31])
    _refused(["estimate", f"data={one}", model], tmp_path, capsys, "at least 2")
    # distributions from another judge than the model's
    other_judge = _split(release["data"], tmp_path / "judge_b", release["ids"][30:60], labelled=release["ids"][30:40])
    (other_judge / "gather_summary.json").write_text(json.dumps({"judge_identity": {**JUDGE, "model": "judge-b"}}))
    _refused(["estimate", f"data={other_judge}", model], tmp_path, capsys, "another judge")
    # alpha outside (0, 1)
    _refused(["estimate", f"data={release['release']}", model, "alpha=1.5"], tmp_path, capsys, "alpha")
    # a model and a baseline with another rubric
    other = _split(release["data"], tmp_path / "other", release["ids"][30:60])
    rubric = yaml.safe_load((other / "rubric.yaml").read_text())
    rubric["questions"][0]["text"] = "Something else?"
    rubric["questions"][0]["id"] = "renamed"
    (other / "rubric.yaml").write_text(yaml.safe_dump(rubric))
    _refused(["estimate", f"data={other}", model], tmp_path, capsys, "rubric")
    _refused(["estimate", f"data={release['release']}", model, f"baseline={other}"], tmp_path, capsys, "rubric")


def test_estimate_reports_the_transport_audit_and_the_shift_check(release, tmp_path, capsys):
    assert _estimate(release, tmp_path / "est", "bias_margin=0.5") == 0
    printed = capsys.readouterr().out
    result = json.loads((tmp_path / "est" / "estimate.json").read_text())
    audit = result["transport_audit"]  # calibration/release/audit.py
    assert (
        audit["margin"] == 0.5
        and audit["n_labelled_conversations"] == 16
        and audit["low"] <= audit["bias"] <= audit["high"]
    )
    assert audit["verdict"] == "INCONCLUSIVE" and "PASS needs 20" in audit["pass_withheld"]  # 16 < 20 conversations
    assert set(audit["by_role"]) == set(ROLES) and f"transport audit: {audit['verdict']}" in printed
    assert result["shift"]["checked"] and result["shift"]["by_role"]  # calibration/model/shift.py, per role
    assert _estimate(release, tmp_path / "bad", "bias_margin=-1") == 2 and not (tmp_path / "bad").exists()
