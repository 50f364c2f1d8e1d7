"""A scored import, as `import source=...` -> `gather judge=fake` -> `train` -> `score` leave it: the
conversations carry each turn's trace and span ids (the trace-import contract), the project's fake judge is
the only LLM, and the calibrator is trained on reviewers' labels drawn from the judge's own distributions.

The traces are either made up (ids only: target=otel needs no server) or real: MLflow traces logged by the
MLflow client's tracing into a real server (`mlflow_traces`), one trace per user message, a session per
conversation, as a traced chatbot leaves them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROLE = "Customer-support agent for a bank: account inquiries, transactions and cards only; never investment advice."


def hex_id(text: str, n: int) -> str:
    """A deterministic id of n hex digits (32 for a trace, 16 for a span)."""
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def texts(prefix: str, i: int, j: int) -> tuple[str, str]:
    cid = f"{prefix}-{i:02d}"
    return (
        f"Question {j} of {cid}: can you check my card {i}-{j}?",
        f"Reply {j}: card {i}-{j} is active; anything else?",
    )


def write_conversations(
    path: Path,
    *,
    n: int = 8,
    turns: int = 2,
    prefix: str = "sess",
    ids: dict[tuple[int, int], dict] | None = None,
    source: dict | None = None,
) -> Path:
    """conversations.jsonl as an import from traces writes it; ids: (conversation, turn) -> the turn's id fields
    (default: made-up trace and span ids, as from an OTLP file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            cid = f"{prefix}-{i:02d}"
            turn_records = []
            for j in range(turns):
                user, assistant = texts(prefix, i, j)
                made_up = {"trace_id": hex_id(f"{cid}/{j}", 32), "span_id": hex_id(f"{cid}/{j}/llm", 16)}
                turn_records.append({"user": user, "assistant": assistant, **(ids or {}).get((i, j), made_up)})
            record = {
                "conversation_id": cid,
                "chatbot_role": ROLE,
                "started_at": f"2026-11-29T02:{i:02d}:00.000000Z",
                "source": source or {"kind": "otel", "files": "traces.jsonl"},
                "turns": turn_records,
            }
            f.write(json.dumps(record) + "\n")
    return path


def write_labels(data: Path, *, reviewers: int = 3, seed: int = 0, conversations: int | None = None) -> Path:
    """labels.csv: each reviewer's answer near the judge's expected answer, with a reviewer's own offset; only
    the first `conversations` conversations labelled when given (a release's random sample)."""
    rng = np.random.default_rng(seed)
    llm = pd.read_csv(data / "llm.csv", dtype={"conversation_id": str})
    if conversations is not None:
        llm = llm[llm["conversation_id"].isin(sorted(llm["conversation_id"].unique())[:conversations])]
    expected = llm.assign(v=llm["option"] * llm["prob"]).groupby(["conversation_id", "turn", "question_id"])["v"].sum()
    top = llm.groupby("question_id")["option"].max()
    rows = []
    for (cid, turn, qid), value in expected.items():
        for r in range(reviewers):
            answer = int(np.clip(np.rint(value + (r - 1) * 0.5 + rng.normal(0, 0.5)), 1, top[qid]))
            rows.append((cid, turn, f"rev{r}", qid, answer))
    out = data / "labels.csv"
    pd.DataFrame(rows, columns=["conversation_id", "turn", "judge_id", "question_id", "answer"]).to_csv(
        out, index=False
    )
    return out


def make_scored(
    root: Path, base_url: str, *, conversations: Path | None = None, n: int = 8, turns: int = 2
) -> dict[str, Path]:
    """gather (fake judge) -> labels -> train (tiny) -> score: the paths of every output."""
    from calibration.cli import main

    if conversations is None:
        conversations = write_conversations(root / "import" / "conversations.jsonl", n=n, turns=turns)
    data, model, scores = root / "data", root / "model", root / "scores" / "scores.csv"
    judge = ["judge=fake", f"judge.base_url={base_url}", "progress=false"]
    assert main(["gather", f"conversations={conversations}", f"out={data}", *judge]) == 0
    write_labels(data)
    train = ["train.ensemble=2", "train.pretrain_steps=30", "train.finetune_steps=30"]
    assert main(["train", f"data={data}", f"out={model}", *train]) == 0
    assert main(["score", f"conversations={conversations}", f"calibrator={model}", f"out={scores}", *judge]) == 0
    return {"conversations": conversations, "data": data, "model": model, "scores": scores}


def rescored_by_another_model(run: dict[str, Path], root: Path, base_url: str) -> dict[str, Path]:
    """A model retrained on the run's data (other settings: another checksum) and the run's conversations
    scored with it, as after retraining: the new model's folder and scores.csv."""
    from calibration.cli import main

    model, scores = root / "model_b", root / "scores_b" / "scores.csv"
    train = ["train.ensemble=2", "train.pretrain_steps=30", "train.finetune_steps=40"]
    assert main(["train", f"data={run['data']}", f"out={model}", *train]) == 0
    assert main(["score", f"conversations={run['conversations']}", f"calibrator={model}", f"out={scores}",
                 "judge=fake", f"judge.base_url={base_url}", "progress=false"]) == 0  # fmt: skip
    return {"model": model, "scores": scores}


def make_release(root: Path, base_url: str, *, prefix: str, n: int = 10, labelled: int = 6, seed: int = 1) -> Path:
    """A release folder for `estimate`: its conversations gathered with the fake judge, a sample labelled."""
    from calibration.cli import main

    conversations = write_conversations(root / f"{prefix}_import" / "conversations.jsonl", n=n, prefix=prefix)
    data = root / prefix
    assert main(["gather", f"conversations={conversations}", f"out={data}", "judge=fake",
                 f"judge.base_url={base_url}", "progress=false"]) == 0  # fmt: skip
    write_labels(data, seed=seed, conversations=labelled)
    return data


TRACE_SCRIPT = r"""
import json, sys
import mlflow
from mlflow.tracing.constant import TraceMetadataKey

url, experiment, prefix, n, turns, role = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
texts = json.loads(sys.stdin.read())
mlflow.set_tracking_uri(url)
exp = mlflow.set_experiment(experiment)
ids = {}
for i in range(n):
    history = [{"role": "system", "content": role}]
    for j in range(turns):
        user, assistant = texts[f"{i}/{j}"]
        history.append({"role": "user", "content": user})
        with mlflow.start_span(name="chat", span_type="CHAT_MODEL") as span:
            span.set_inputs({"messages": list(history)})
            span.set_outputs({"choices": [{"message": {"role": "assistant", "content": assistant}}]})
            mlflow.update_current_trace(metadata={TraceMetadataKey.TRACE_SESSION: f"{prefix}-{i:02d}"})
            otel = span._span.get_span_context()
            ids[f"{i}/{j}"] = {"trace_id": format(otel.trace_id, "032x"), "span_id": span.span_id,
                               "mlflow_trace_id": span.trace_id}
        history.append({"role": "assistant", "content": assistant})
mlflow.flush_trace_async_logging()
print(json.dumps({"experiment_id": exp.experiment_id, "ids": ids}))
"""


def mlflow_traces(url: str, experiment: str, *, prefix: str = "sess", n: int = 8, turns: int = 2) -> tuple[str, dict]:
    """Log a chatbot's conversations as MLflow traces (one per user message, a session per conversation) with
    the MLflow client's tracing, in a process of its own: (experiment id, (conversation, turn) -> id fields)."""
    payload = json.dumps({f"{i}/{j}": texts(prefix, i, j) for i in range(n) for j in range(turns)})
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}
    done = subprocess.run(
        [sys.executable, "-c", TRACE_SCRIPT, url, experiment, prefix, str(n), str(turns), ROLE],
        input=payload, capture_output=True, text=True, env=env, timeout=300, check=True,
    )  # fmt: skip
    out = json.loads(done.stdout.strip().splitlines()[-1])
    ids = {tuple(int(x) for x in k.split("/")): v for k, v in out["ids"].items()}
    return out["experiment_id"], ids


def phoenix_traces(endpoint: str, project: str, *, prefix: str = "px", n: int = 4, turns: int = 2) -> dict:
    """Send a chatbot's conversations to Phoenix over OTLP/HTTP as OpenInference LLM spans (one trace per user
    message, `session.id` the conversation), as an instrumented application does: (conversation, turn) -> ids."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = TracerProvider(
        resource=Resource.create({"service.name": "support-bot", "openinference.project.name": project})
    )
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint, timeout=30)))
    tracer = provider.get_tracer("tests.publish")
    ids = {}
    for i in range(n):
        history = [("system", ROLE)]
        for j in range(turns):
            user, assistant = texts(prefix, i, j)
            history.append(("user", user))
            with tracer.start_as_current_span("ChatCompletion") as span:
                span.set_attribute("openinference.span.kind", "LLM")
                span.set_attribute("session.id", f"{prefix}-{i:02d}")
                for k, (role, content) in enumerate(history):
                    span.set_attribute(f"llm.input_messages.{k}.message.role", role)
                    span.set_attribute(f"llm.input_messages.{k}.message.content", content)
                span.set_attribute("llm.output_messages.0.message.role", "assistant")
                span.set_attribute("llm.output_messages.0.message.content", assistant)
                context = span.get_span_context()
                ids[(i, j)] = {"trace_id": format(context.trace_id, "032x"), "span_id": format(context.span_id, "016x")}
            history.append(("assistant", assistant))
    provider.force_flush()
    provider.shutdown()
    return ids
