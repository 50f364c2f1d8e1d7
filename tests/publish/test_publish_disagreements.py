"""publish disagreements=: compare-judges' ranked list of where a calibrated judge and a reviewer disagree,
written back to a real `mlflow server` (SQLite) and a real `phoenix serve`, each row on the span of its turn.

The list is real: conversations traced into the server by the backend's own client, imported
(`import source=mlflow|phoenix`), gathered with the project's fake judge and labelled by three reviewers
(tests/publish/conftest.py), then `compare-judges` of that judge against a degraded copy of itself (its
distributions half-way to uniform). Each published entry is read back with the backend's public client and
compared with its row of disagreements.csv: the trace (the one its conversation's turn was imported from), the
span, the gap, the rank, both answers; and each row of reviewer_disagreements.csv (the turns whose three
reviewers disagree with each other) likewise, with the spread and the answers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from calibration.cli import main
from tests.publish.conftest import PROJECT
from tests.publish.test_mlflow import traces_of

TOP = 12
"""Rows of each judge published (by rank): 24 of the list's 480."""


def degraded_copy(data: Path, dst: Path) -> Path:
    """`data` with the judge's distributions moved half-way to uniform (a weaker judge, same turns and labels)."""
    shutil.copytree(data, dst)
    llm = pd.read_csv(dst / "llm.csv")
    options = llm.groupby(["conversation_id", "turn", "question_id"])["option"].transform("count")
    llm["prob"] = 0.5 * llm["prob"] + 0.5 / options
    llm.to_csv(dst / "llm.csv", index=False)
    return dst


def compare_judges(run: dict, root: Path) -> Path:
    """compare-judges of the run's judge (`data`) and its degraded copy (`weaker`): the out= folder."""
    judges = root / "judges"
    shutil.copytree(run["data"], judges / "data")
    degraded_copy(run["data"], judges / "weaker")
    out = root / "compare"
    args = ["compare-judges", f"data=[{judges / 'data'},{judges / 'weaker'}]", f"out={out}", "model=linear",
            "n_boot=200"]  # fmt: skip
    assert main(args) == 0
    return out


def listed(out: Path) -> pd.DataFrame:
    """The rows publish top=TOP writes: each judge's first TOP by rank."""
    rows = pd.read_csv(out / "disagreements.csv", dtype={"conversation_id": str, "trace_id": str, "span_id": str})
    return rows[rows["rank"] <= TOP].reset_index(drop=True)


def turn_ids(run: dict) -> dict[tuple[str, int], dict]:
    """(conversation, turn) -> the turn's id fields, as the import wrote them."""
    convs = [json.loads(line) for line in run["conversations"].read_text().splitlines()]
    return {(c["conversation_id"], j): t for c in convs for j, t in enumerate(c["turns"])}


def reviewers_listed(out: Path) -> pd.DataFrame:
    """The reviewers' rows publish top=TOP writes: the first TOP by rank."""
    rows = pd.read_csv(
        out / "reviewer_disagreements.csv", dtype={"conversation_id": str, "trace_id": str, "span_id": str}
    )
    return rows[rows["rank"] <= TOP].reset_index(drop=True)


# ---- MLflow ------------------------------------------------------------------------------------------------


def disagreements_on(run: dict, prefix: str = "role_rubric/disagreement/") -> list:
    """The valid assessments on the run's traces whose name starts with prefix."""
    return [
        a
        for t in traces_of(run["url"], run["experiment_id"])
        for a in t.info.assessments
        if a.name.startswith(prefix) and a.valid is not False
    ]


@pytest.fixture(scope="module")
def mlflow_compared(mlflow_scored, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("mlflow_compare")
    return {**mlflow_scored, "compare": compare_judges(mlflow_scored, root), "root": root}


def publish_mlflow(run: dict, disagreements: Path, *extra: str) -> int:
    return main(["publish", "target=mlflow", f"disagreements={disagreements}", f"tracking_uri={run['url']}",
                 f"top={TOP}", *extra])  # fmt: skip


def test_each_disagreement_is_feedback_on_the_trace_and_span_of_its_turn(mlflow_compared, capsys):
    run = mlflow_compared
    rows = listed(run["compare"])
    assert len(rows) == 2 * TOP and (rows["trace_id"].str.len() == 32).all()  # every row from a trace
    assert publish_mlflow(run, run["compare"]) == 0
    said = capsys.readouterr().out
    assert f"{len(rows)} disagreement feedbacks" in said and f"{len(rows)} created" in said
    ids = turn_ids(run)
    found = disagreements_on(run)
    assert len(found) == len(rows)  # one entry per row, nothing else
    for row in rows.itertuples():
        (fb,) = [
            a
            for a in found
            if a.name == f"role_rubric/disagreement/{row.question_id}"
            and a.source.source_id == f"role-rubric/compare-judges/{row.llm_judge}"
            and a.metadata["reviewer_id"] == row.reviewer_id
            and a.span_id == row.span_id
        ]
        turn = ids[(row.conversation_id, int(row.turn))]
        assert fb.trace_id == turn["mlflow_trace_id"]  # the trace its conversation's turn was imported from
        assert fb.span_id == turn["span_id"] and row.trace_id == turn["trace_id"]
        assert fb.source.source_type == "LLM_JUDGE"
        assert fb.value == pytest.approx(row.gap)
        assert fb.metadata["rank"] == str(row.rank) and fb.metadata["answer"] == f"{row.answer:g}"
        assert float(fb.metadata["calibrated"]) == pytest.approx(row.calibrated)
        assert fb.metadata["conversation_id"] == row.conversation_id and fb.metadata["turn"] == str(row.turn)
        assert f"Rank {row.rank} for judge {row.llm_judge}" in fb.rationale and "\n" not in fb.rationale
        assert f"reviewer {row.reviewer_id} answered {row.answer:g}" in fb.rationale


def test_a_second_publish_changes_nothing_and_a_new_list_updates_the_same_entries(mlflow_compared, tmp_path, capsys):
    run = mlflow_compared
    if not disagreements_on(run):
        assert publish_mlflow(run, run["compare"]) == 0
    before = {a.assessment_id: a for a in disagreements_on(run)}
    capsys.readouterr()
    assert publish_mlflow(run, run["compare"]) == 0
    assert f"0 created, 0 updated, {2 * TOP} unchanged" in capsys.readouterr().out
    assert {a.assessment_id for a in disagreements_on(run)} == before.keys()
    rows = pd.read_csv(run["compare"] / "disagreements.csv", dtype=str, keep_default_na=False)
    rows["gap"] = (-rows["gap"].astype(float)).map(str)  # as if compared again on corrected labels
    changed = tmp_path / "disagreements.csv"
    rows.to_csv(changed, index=False)
    assert publish_mlflow(run, changed) == 0
    assert f"0 created, {2 * TOP} updated, 0 unchanged" in capsys.readouterr().out
    after = {a.assessment_id: a for a in disagreements_on(run)}
    assert after.keys() == before.keys()  # superseded in place: the same entries, no second one beside them
    assert sorted(a.value for a in after.values()) == pytest.approx(sorted(-a.value for a in before.values()))
    assert publish_mlflow(run, run["compare"]) == 0  # back as the list says


def test_each_reviewer_disagreement_is_feedback_on_its_turn_and_a_second_publish_changes_nothing(
    mlflow_compared, capsys
):
    run = mlflow_compared
    rows = reviewers_listed(run["compare"])
    assert len(rows) == TOP and (rows["trace_id"].str.len() == 32).all() and (rows["spread_share"] > 0).all()
    assert publish_mlflow(run, run["compare"]) == 0 and publish_mlflow(run, run["compare"]) == 0
    said = capsys.readouterr().out
    assert f"{TOP} reviewer disagreement feedbacks" in said and f"0 created, 0 updated, {TOP} unchanged" in said
    ids = turn_ids(run)
    found = disagreements_on(run, "role_rubric/reviewer_disagreement/")
    assert len(found) == len(rows)  # one entry per row, however often it is published
    for row in rows.itertuples():
        turn = ids[(row.conversation_id, int(row.turn))]
        (fb,) = [a for a in found if a.name.endswith(f"/{row.question_id}") and a.span_id == turn["span_id"]]
        assert fb.trace_id == turn["mlflow_trace_id"] and row.span_id == turn["span_id"]
        assert fb.source.source_type == "CODE" and fb.source.source_id == "role-rubric/compare-judges/reviewers"
        assert fb.value == pytest.approx(row.spread_share)
        assert fb.metadata["answers"] == row.answers and fb.metadata["reviewers"] == str(row.reviewers)
        assert f"{row.reviewers} reviewers answered {row.answers} to {row.question_id}" in fb.rationale


def test_rows_without_a_trace_id_are_counted_and_named(mlflow_compared, tmp_path, capsys):
    run = mlflow_compared
    rows = pd.read_csv(run["compare"] / "disagreements.csv", dtype=str, keep_default_na=False)
    first = rows.index[rows["rank"].astype(int) <= 2]  # the first two rows of each judge: no trace
    rows.loc[first, ["trace_id", "span_id"]] = ""
    untraced = tmp_path / "disagreements.csv"
    rows.to_csv(untraced, index=False)
    capsys.readouterr()
    assert publish_mlflow(run, untraced) == 0
    said = capsys.readouterr().out
    named = ", ".join(f"{rows.at[i, 'conversation_id']}/{rows.at[i, 'turn']}" for i in first[:3])
    assert f"4 of the {2 * TOP} disagreement rows have no trace id" in said and named in said, said
    assert f"{2 * TOP - 4} disagreement feedbacks" in said


# ---- Phoenix -----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def phoenix_compared(phoenix_scored, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("phoenix_compare")
    return {**phoenix_scored, "compare": compare_judges(phoenix_scored, root)}


def publish_phoenix_twice(run: dict) -> None:
    """publish the compare-judges folder to Phoenix twice (the second replaces the first)."""
    args = ["publish", "target=phoenix", f"disagreements={run['compare']}", f"url={run['url']}", f"top={TOP}"]
    assert main(args) == 0 and main(args) == 0


def annotations_on(run: dict, ids: dict, prefix: str) -> list:
    """The span annotations on the run's turns whose name starts with prefix, read with Phoenix's client."""
    from phoenix.client import Client

    span_ids = sorted({t["span_id"] for t in ids.values()})
    annotations = Client(base_url=run["url"]).spans.get_span_annotations(span_ids=span_ids, project_identifier=PROJECT)
    return [a for a in annotations if a["name"].startswith(prefix)]


def test_each_disagreement_is_a_span_annotation_of_its_turn_replaced_by_a_second_publish(phoenix_compared, capsys):
    run = phoenix_compared
    rows = listed(run["compare"])
    publish_phoenix_twice(run)
    assert f"{len(rows)} disagreement span annotations" in capsys.readouterr().out
    ids = turn_ids(run)
    found = annotations_on(run, ids, "role_rubric/disagreement/")
    assert len(found) == len(rows)
    for row in rows.itertuples():
        (a,) = [
            a
            for a in found
            if a["name"] == f"role_rubric/disagreement/{row.question_id}"
            and a["identifier"] == f"role-rubric/{row.llm_judge}/{row.reviewer_id}"
            and a["span_id"] == row.span_id
        ]
        assert a["span_id"] == ids[(row.conversation_id, int(row.turn))]["span_id"]
        assert a["result"]["score"] == pytest.approx(row.gap) and a["result"]["label"] == f"rank {row.rank}"
        assert a["metadata"]["reviewer_id"] == row.reviewer_id and a["metadata"]["rank"] == str(row.rank)


def test_each_reviewer_disagreement_is_a_span_annotation_of_its_turn(phoenix_compared, capsys):
    run = phoenix_compared
    rows = reviewers_listed(run["compare"])
    publish_phoenix_twice(run)
    assert f"{TOP} reviewer disagreement span annotations" in capsys.readouterr().out
    ids = turn_ids(run)
    found = annotations_on(run, ids, "role_rubric/reviewer_disagreement/")
    assert len(found) == len(rows)
    for row in rows.itertuples():
        span = ids[(row.conversation_id, int(row.turn))]["span_id"]
        (a,) = [a for a in found if a["name"].endswith(f"/{row.question_id}") and a["span_id"] == span]
        assert a["identifier"] == "role-rubric/reviewers" and a["annotator_kind"] == "CODE"
        assert a["result"]["score"] == pytest.approx(row.spread_share) and a["result"]["label"] == f"rank {row.rank}"
        assert a["metadata"]["answers"] == row.answers
