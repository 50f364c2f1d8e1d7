"""What `role-rubric estimate` prints: a short default (the table, the audit with its next step, the gate's
result either way, where the files are), the method's paragraph only with verbose=true, one short name per
role in every line, and counts that say why rows went (calibration/release/table.py, calibration/demo.py)."""

from __future__ import annotations

import json
import logging
import re
import shutil

import pandas as pd

from calibration.demo import _print_summary
from tests.calibration.test_estimate import _estimate, release  # noqa: F401  (release: the module's fixture)

METHOD = "Conversations are the sampling unit"  # a sentence of the method's paragraph (estimate.json's note)
LONG_ROLE = (
    "You are Sol, the support assistant of a bank. Scope: cards, payments and accounts; never give investment "
    "advice; end every reply with a next step."
)


def test_default_output_is_short_with_the_audit_step_the_passed_gate_and_the_files(release, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "est"
    gate = ("fail_under=0.1", f"baseline={release['baseline']}", "fail_if_worse=true")
    assert _estimate(release, out, *gate, "bias_margin=0.5") == 0
    printed = capsys.readouterr().out
    note = json.loads((out / "estimate.json").read_text())["note"]
    assert METHOD in note and METHOD not in printed and "verbose=true prints it" in printed
    rate = json.loads((out / "estimate.json").read_text())["rate"]["ppi"]
    assert f"gate: passed: the adherence rate's lower bound {rate['low']:.3f} is at or above fail_under=0.1" in printed
    assert "the rate difference's upper bound" in printed and "is not below 0" in printed
    # 16 labelled conversations, the bias well inside 0.5: PASS is withheld below 20, the line says how many more
    assert re.search(r"transport audit: INCONCLUSIVE: .*Next: label 4 more conversations \(PASS needs 20", printed)
    assert printed.rstrip().endswith(f"estimate: wrote {out / 'estimate.json'}")
    assert len(printed.splitlines()) == 23  # the table's 16 lines, 4 of notes, the audit, the gate, the file


def test_verbose_prints_the_method_and_no_gate_says_so(release, tmp_path, capsys):  # noqa: F811
    assert _estimate(release, tmp_path / "est", "verbose=true") == 0
    printed = " ".join(capsys.readouterr().out.split())  # the paragraph is wrapped
    assert METHOD in printed and "gate: none set (fail_under=X exits 1" in printed
    # the default margin: the interval crosses it, so the next step is more labels, with the command that draws them
    assert "Next: label more conversations to decide (role-rubric suggest purpose=estimate" in printed


def test_a_failed_gate_is_one_error_line_not_a_passed_line(release, tmp_path, capsys):  # noqa: F811
    assert _estimate(release, tmp_path / "est", "fail_under=0.99") == 1
    captured = capsys.readouterr()
    assert "gate: passed" not in captured.out and "is below fail_under=0.99" in captured.err


def _shifted_release(release, dst):  # noqa: F811
    """The release with a long role text under a short `role` id, and a judge that answers every question with
    its highest option (so the shift check fires)."""
    shutil.copytree(release["release"], dst)
    records = [json.loads(line) for line in (dst / "conversations.jsonl").read_text().splitlines()]
    for r in records:
        r["chatbot_role"], r["role"] = LONG_ROLE, "sol_support"
    (dst / "conversations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    llm = pd.read_csv(dst / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    top = llm.groupby("question_id")["option"].transform("max")
    llm["prob"] = (llm["option"] == top).map({True: 0.97, False: 0.01})
    llm["prob"] = llm["prob"] / llm.groupby(["conversation_id", "turn", "question_id"])["prob"].transform("sum")
    llm.to_csv(dst / "llm.csv", index=False)
    return dst


def test_one_short_name_per_role_in_the_table_and_the_shift_warning(release, tmp_path, capsys):  # noqa: F811
    data = _shifted_release(release, tmp_path / "shifted")
    out = tmp_path / "est"
    assert _estimate({**release, "release": data}, out) == 0
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    result = json.loads((out / "estimate.json").read_text())
    assert result["shift"]["fired"] and [g["role"] for g in result["shift"]["groups"]] == ["sol_support"]
    assert "role: sol_support" in printed and "role 'sol_support' (not in training)" in printed
    assert set(result["by_role"]) == {"sol_support"}
    assert "You are Sol" not in printed  # the role text stays in the files


def test_the_demo_says_why_pairs_are_not_judgments(caplog):
    summary = {
        "items": 558,
        "label_rows": 1674,
        "target_rows": 1623,
        "judges": 12,
        "folds": 5,
        "target": "overall",
        "adheres_at": 3.0,
        "smece": [],
    }
    metrics = {m: {"n": 1623, "rmse": 0.5, "pearson": 0.5} for m in ("calibrated", "expected_llm")}
    with caplog.at_level(logging.INFO, logger="calibration.demo"):
        _print_summary(summary, metrics, pd.DataFrame({"role": ["a"]}), {}, lambda m: "")
    text = caplog.text
    assert "1674 (turn, human judge) pairs" in text
    assert "1623 pairs answer it; in the other 51 the reviewer answered other questions only" in text
    assert "out of fold, 1623 judgments of 'overall'" in text
