"""calibration.connectors.mlflow.scorer: `mlflow.genai.evaluate(data=mlflow.search_traces(...), scorers=[...])` with
the per-trace and the session-level scorer gives the values `score` writes, on traces in a real MLflow server."""

from __future__ import annotations

import pandas as pd
import pytest

from calibration.cli import main
from tests.publish.scored import mlflow_traces, write_conversations


def test_evaluate_with_the_scorers_gives_scores_values(mlflow_scored, tmp_path, monkeypatch):
    import mlflow

    from calibration.connectors.mlflow.scorer import RoleAdherenceScorer, SessionAdherenceScorer
    from rubric.servers.fake import FakeOpenAI

    url, model = mlflow_scored["url"], mlflow_scored["model"]
    experiment_id, ids = mlflow_traces(url, "support-bot-eval", prefix="ev", n=3, turns=3)
    conversations = write_conversations(tmp_path / "conversations.jsonl", n=3, turns=3, prefix="ev", ids=ids)
    scores = tmp_path / "scores.csv"
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    mlflow.set_tracking_uri(url)
    with FakeOpenAI() as server:
        judge = {"name": "fake", "base_url": server.base_url}
        args = ["score", f"conversations={conversations}", f"calibrator={model}", f"out={scores}", "judge=fake",
                f"judge.base_url={server.base_url}", "progress=false"]  # fmt: skip
        assert main(args) == 0
        traces = mlflow.search_traces(locations=[experiment_id])
        scorers = [RoleAdherenceScorer(calibrator=str(model), judge=judge),
                   SessionAdherenceScorer(calibrator=str(model), judge=judge)]  # fmt: skip
        mlflow.set_experiment(experiment_id=experiment_id)
        result = mlflow.genai.evaluate(data=traces, scorers=scorers)
    # evaluate copies the traces into its run (new ids): its rows follow the data's order
    table = result.tables["eval_results"]
    assert [m["mlflow.trace.session"] for m in table["trace_metadata"]] == [
        m["mlflow.trace.session"] for m in traces["trace_metadata"]
    ]
    table.index = traces["trace_id"]
    turns = pd.read_csv(scores.with_name("scores_turns.csv"), dtype={"conversation_id": str})
    for row in turns.itertuples():
        tid = ids[(int(row.conversation_id[-2:]), row.turn)]["mlflow_trace_id"]
        assert table.loc[tid, "role_rubric/adherence/value"] == pytest.approx(row.adherence, abs=1e-4)
        assert f"{row.adherence:.3f}" in table.loc[tid, "role_rubric/adherence/rationale"]
    sessions = pd.read_csv(scores, dtype={"conversation_id": str}).set_index("conversation_id")["score"]
    scored = table[table["role_rubric/session_adherence/value"].notna()]  # one row per session: its first trace
    by_session = {
        m["mlflow.trace.session"]: v
        for m, v in zip(scored["trace_metadata"], scored["role_rubric/session_adherence/value"], strict=True)
    }
    assert by_session.keys() == set(sessions.index)
    for session, value in by_session.items():
        assert value == pytest.approx(sessions[session], abs=1e-4)
