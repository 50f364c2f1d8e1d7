"""publish target=mlflow against a real `mlflow server` (SQLite, a free port) whose traces were logged by
MLflow's own tracing: each turn's feedback, the session's, a second publish, a resumed one, estimate and cv
runs, and the bad inputs (deleted traces, an unreachable server, an unknown experiment)."""

from __future__ import annotations

import json
import shutil
import time

import pandas as pd
import pytest

from calibration.cli import main
from tests.publish.conftest import EXPERIMENT

TOKEN = "mlflow-s3cret-token-value"


def traces_of(url, experiment_id):
    import mlflow

    mlflow.set_tracking_uri(url)  # the client downloads span data through the server's artifact proxy
    return mlflow.MlflowClient(tracking_uri=url).search_traces(locations=[experiment_id], max_results=500)


def ours(trace, name):
    return [
        a
        for a in trace.info.assessments
        if a.name == name and a.source.source_id.startswith("role-rubric/model-") and a.valid is not False
    ]


def publish(run, *extra):
    return main(["publish", "target=mlflow", f"scores={run['scores']}", f"tracking_uri={run['url']}", *extra])


@pytest.fixture(scope="module")
def published(mlflow_scored):
    assert publish(mlflow_scored) == 0
    return mlflow_scored


def test_each_turn_has_its_feedback_on_its_span_with_the_scored_value(published, monkeypatch, capsys):
    turns = pd.read_csv(published["scores"].with_name("scores_turns.csv"), dtype={"conversation_id": str})
    convs = [json.loads(line) for line in published["conversations"].read_text().splitlines()]
    by_trace = {t.info.trace_id: t for t in traces_of(published["url"], published["experiment_id"])}
    checksum = json.loads((published["model"] / "model.json").read_text())["integrity"]["model_sha256"]
    for row in turns.itertuples():
        ids = next(c for c in convs if c["conversation_id"] == row.conversation_id)["turns"][row.turn]
        (fb,) = ours(by_trace[ids["mlflow_trace_id"]], "role_rubric/adherence")
        assert fb.value == pytest.approx(row.adherence)
        assert fb.span_id == ids["span_id"]
        assert fb.source.source_type == "LLM_JUDGE" and fb.source.source_id == f"role-rubric/model-{checksum[:16]}"
        assert "\n" not in fb.rationale and f"{row.adherence:.3f}" in fb.rationale
        assert fb.metadata["expected_overall"] == f"{row.expected_overall:g}"
        assert fb.metadata["shift_check"] in ("passed", "fired: the conversations differ from the training data")
        assert "fake-judge" in fb.metadata["judge"]


def test_each_session_has_one_feedback_on_its_first_trace(published):
    scores = pd.read_csv(published["scores"], dtype={"conversation_id": str})
    traces = traces_of(published["url"], published["experiment_id"])
    for row in scores.itertuples():
        session = [t for t in traces if t.info.trace_metadata.get("mlflow.trace.session") == row.conversation_id]
        first = min(t.info.request_time for t in session)
        (fb,) = [a for t in session for a in ours(t, "role_rubric/session_adherence")]
        on = next(t for t in session if t.info.trace_id == fb.trace_id)
        assert on.info.request_time == first  # the session's first trace (two may start in the same millisecond)
        assert fb.value == pytest.approx(row.score)
        assert fb.metadata["mlflow.trace.session"] == row.conversation_id
        assert fb.metadata["success"] == str(bool(row.success)).lower()


def snapshot(run):
    return sorted(
        (a.trace_id, a.assessment_id, a.name, a.value, a.rationale)
        for t in traces_of(run["url"], run["experiment_id"])
        for a in t.info.assessments
    )


def test_a_second_publish_changes_nothing_and_never_prints_the_token(published, monkeypatch, capsys):
    before = snapshot(published)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    capsys.readouterr()
    assert publish(published) == 0
    printed = capsys.readouterr()
    assert snapshot(published) == before
    assert "0 created, 0 updated, 24 unchanged" in printed.out
    assert TOKEN not in printed.out + printed.err


def test_a_new_score_updates_the_same_assessment_and_an_interrupted_publish_resumes(published, tmp_path):
    from calibration.connectors.mlflow.publish import publish_scores
    from calibration.publish.results import read_scored

    scores = tmp_path / "scores" / "scores.csv"
    shutil.copytree(published["scores"].parent, scores.parent)
    turns_file = scores.with_name("scores_turns.csv")
    turns = pd.read_csv(turns_file, dtype={"conversation_id": str})
    turns["adherence"] = (1 - turns["adherence"]).round(4)  # as if scored again by a changed judge
    turns.to_csv(turns_file, index=False)
    before = {a[1]: a for a in snapshot(published)}
    scored = read_scored(scores)
    half = type(scored)(**{**scored.__dict__, "turns": scored.turns[:5], "sessions": ()})
    lines = []
    publish_scores(published["url"], half, say=lines.append)  # stopped after 5 turns
    assert "0 created, 5 updated" in lines[-1]
    assert main(["publish", "target=mlflow", f"scores={scores}", f"tracking_uri={published['url']}"]) == 0
    after = {a[1]: a for a in snapshot(published)}
    assert after.keys() == before.keys()  # the same assessments, updated in place
    values = {
        (a.trace_id, a.span_id): a.value
        for t in traces_of(published["url"], published["experiment_id"])
        for a in ours(t, "role_rubric/adherence")
    }
    assert sorted(values.values()) == pytest.approx(sorted(turns["adherence"]))
    assert main(["publish", "target=mlflow", f"scores={published['scores']}", f"tracking_uri={published['url']}"]) == 0


def test_a_retrained_model_supersedes_the_earlier_ones_score_one_current_per_turn(published, tmp_path, capsys):
    """After retraining, publish overrides the earlier model's feedback the way MLflow overrides feedback: one
    valid role-rubric assessment per turn and per conversation, the earlier one kept (invalid) as its history;
    publishing the first model again makes it the current one again."""
    from rubric.servers.fake import FakeOpenAI
    from tests.publish.scored import rescored_by_another_model

    with FakeOpenAI() as server:
        again = rescored_by_another_model(published, tmp_path, server.base_url)
    model, scores = again["model"], again["scores"]
    first = json.loads((published["model"] / "model.json").read_text())["integrity"]["model_sha256"]
    second = json.loads((model / "model.json").read_text())["integrity"]["model_sha256"]
    assert first != second
    capsys.readouterr()
    assert main(["publish", "target=mlflow", f"scores={scores}", f"tracking_uri={published['url']}"]) == 0
    said = capsys.readouterr().out
    assert "24 created, 0 updated, 0 unchanged" in said and "24 of the created override an earlier model's" in said

    def current_and_history(source: str):
        traces = traces_of(published["url"], published["experiment_id"])
        current = {
            name: [(a.trace_id, a.span_id, a.source.source_id) for t in traces for a in ours(t, name)]
            for name in ("role_rubric/adherence", "role_rubric/session_adherence")
        }
        kept = {a.assessment_id: a for t in traces for a in t.info.assessments}
        history = [
            kept[a.overrides].source.source_id
            for t in traces
            for a in t.info.assessments
            if a.overrides and a.valid is not False and a.source.source_id == source
        ]
        return current, history

    current, history = current_and_history(f"role-rubric/model-{second[:16]}")
    turns = pd.read_csv(scores.with_name("scores_turns.csv"))
    assert len(current["role_rubric/adherence"]) == len(turns)  # one current score per turn...
    assert len(set(current["role_rubric/adherence"])) == len(turns)
    assert {s for *_, s in current["role_rubric/adherence"]} == {f"role-rubric/model-{second[:16]}"}  # ...the new
    assert {s for *_, s in current["role_rubric/session_adherence"]} == {f"role-rubric/model-{second[:16]}"}
    assert history == [f"role-rubric/model-{first[:16]}"] * 24  # each overrides the earlier model's, kept
    assert main(["publish", "target=mlflow", f"scores={published['scores']}", f"tracking_uri={published['url']}"]) == 0
    current, _ = current_and_history(f"role-rubric/model-{first[:16]}")
    assert {s for *_, s in current["role_rubric/adherence"]} == {f"role-rubric/model-{first[:16]}"}
    assert len(current["role_rubric/adherence"]) == len(turns)


def test_traces_deleted_since_the_import_stop_the_publish_before_anything_is_written(published, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    before = snapshot(published)
    lines = published["conversations"].read_text().splitlines()
    first = json.loads(lines[0])
    gone = "tr-" + "0" * 32
    first["turns"][1]["mlflow_trace_id"] = gone
    moved = tmp_path / "conversations.jsonl"
    moved.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert publish(published, f"conversations={moved}") == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "1 of the 16 traces" in err and gone in err and "nothing was published" in err
    assert snapshot(published) == before
    assert MlflowClient(tracking_uri=published["url"]).get_experiment(published["experiment_id"]) is not None


def test_an_unreachable_server_is_one_line_within_seconds(mlflow_scored, capsys):
    from tests.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    assert (
        main(["publish", "target=mlflow", f"scores={mlflow_scored['scores']}", f"tracking_uri={url}", "timeout=2"]) == 2
    )
    assert time.monotonic() - start < 15
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and url in err[0] and "does not answer" in err[0]


def test_estimate_runs_hold_estimate_json_and_link_the_baseline(mlflow_scored, capsys):
    from mlflow.tracking import MlflowClient

    run = mlflow_scored
    common = [
        "publish",
        "target=mlflow",
        f"tracking_uri={run['url']}",
        f"model={run['model']}",
        f"experiment={EXPERIMENT}",
    ]
    assert main([*common, f"estimate={run['estimate_base']}"]) == 0
    assert main([*common, f"estimate={run['estimate']}"]) == 0
    assert main([*common, f"estimate={run['estimate']}"]) == 0  # again: the same run
    client = MlflowClient(tracking_uri=run["url"])
    runs = client.search_runs([run["experiment_id"]], filter_string="tags.`role_rubric.kind` = 'estimate'")
    assert len(runs) == 2
    release = json.loads((run["estimate"] / "estimate.json").read_text())
    (mine,) = [r for r in runs if r.data.tags["role_rubric.release"] == str((run["root"] / "rel").resolve())]
    (base,) = [r for r in runs if r is not mine]
    m = mine.data.metrics
    assert m["rate/ppi"] == pytest.approx(release["rate"]["ppi"]["estimate"])
    assert m["rate/ppi_low"] == pytest.approx(release["rate"]["ppi"]["low"])
    assert m["rate/ppi_high"] == pytest.approx(release["rate"]["ppi"]["high"])
    assert m["rate/n_labelled_conversations"] == release["rate"]["n_labelled_conversations"] == 6
    assert m["vs_baseline/rate/estimate"] == pytest.approx(release["difference"]["rate"]["estimate"])
    role, blocks = next(iter(release["by_role"].items()))
    assert any(
        k.startswith("role/") and k.endswith("rate/ppi") and v == pytest.approx(blocks["rate"]["ppi"]["estimate"])
        for k, v in m.items()
    )
    assert mine.data.tags["role_rubric.gate"] == "passed"
    assert mine.data.tags["role_rubric.transport_audit"] == release["transport_audit"]["verdict"]
    assert mine.data.tags["role_rubric.baseline_run_id"] == base.info.run_id
    checksum = json.loads((run["model"] / "model.json").read_text())["integrity"]["model_sha256"]
    assert mine.data.params["model_sha256"] == checksum and mine.data.params["alpha"] == str(release["alpha"])
    assert float(mine.data.params["ci_level"]) == pytest.approx(1 - release["alpha"])
    assert {"crossfit", "sequential"} <= mine.data.params.keys()
    assert {f.path for f in client.list_artifacts(mine.info.run_id)} == {"estimate.json", "estimate.html"}


def test_an_unknown_experiment_is_one_line(mlflow_scored, capsys):
    run = mlflow_scored
    args = ["publish", "target=mlflow", f"tracking_uri={run['url']}", f"model={run['model']}", "experiment=nope",
            f"estimate={run['estimate']}"]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no experiment 'nope'" in err[0]


def test_cv_run_keeps_each_reviewer_apart(mlflow_scored):
    from mlflow.tracking import MlflowClient

    run = mlflow_scored
    args = ["publish", "target=mlflow", f"tracking_uri={run['url']}", f"experiment={EXPERIMENT}", f"cv={run['cv']}"]
    assert main(args) == 0
    reviewers = json.loads((run["cv"] / "reviewers.json").read_text())
    (cv_run,) = MlflowClient(tracking_uri=run["url"]).search_runs(
        [run["experiment_id"]], filter_string="tags.`role_rubric.kind` = 'cv'"
    )
    m = cv_run.data.metrics
    overall = reviewers["questions"]["overall"]
    assert m["overall/reviewer_ceiling/pearson"] == pytest.approx(overall["reviewers"]["pearson"])
    assert m["overall/calibrated_judge/rmse"] == pytest.approx(overall["calibrated"]["rmse"])
    for judge in ("rev0", "rev1", "rev2"):
        assert f"overall/reviewer/{judge}/ceiling_rmse" in m and f"overall/reviewer/{judge}/calibrated_rmse" in m
    assert m["overall/reviewer/rev0/ceiling_rmse"] != m["overall/reviewer/rev2/ceiling_rmse"]
