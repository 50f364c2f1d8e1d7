"""A scored import, as `import source=otel` -> `gather judge=fake` -> `train` -> `score` leave it: the
conversations carry each turn's trace and span ids (the trace-import contract), the project's fake judge is
the only LLM, and the calibrator is trained on reviewers' labels drawn from the judge's own distributions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

ROLE = "Customer-support agent for a bank: account inquiries, transactions and cards only; never investment advice."


def hex_id(text: str, n: int) -> str:
    """A deterministic id of n hex digits (32 for a trace, 16 for a span)."""
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def write_conversations(path: Path, *, n: int = 8, turns: int = 2, prefix: str = "sess") -> Path:
    """conversations.jsonl as an import from OTLP JSON writes it: one trace per turn, its LLM span the reply."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            cid = f"{prefix}-{i:02d}"
            record = {
                "conversation_id": cid,
                "chatbot_role": ROLE,
                "started_at": f"2026-11-29T02:{i:02d}:00.000000Z",
                "source": {"kind": "otel", "files": "traces.jsonl"},
                "turns": [
                    {
                        "user": f"Question {j} of {cid}: can you check my card {i}-{j}?",
                        "assistant": f"Reply {j}: card {i}-{j} is active; anything else about it?",
                        "trace_id": hex_id(f"{cid}/{j}", 32),
                        "span_id": hex_id(f"{cid}/{j}/llm", 16),
                    }
                    for j in range(turns)
                ],
            }
            f.write(json.dumps(record) + "\n")
    return path


def write_labels(data: Path, *, reviewers: int = 3, seed: int = 0) -> Path:
    """labels.csv: each reviewer's answer near the judge's expected answer, with a reviewer's own offset."""
    rng = np.random.default_rng(seed)
    llm = pd.read_csv(data / "llm.csv")
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


def make_scored(root: Path, base_url: str, *, n: int = 8, turns: int = 2) -> dict[str, Path]:
    """gather (fake judge) -> labels -> train (tiny) -> score: the paths of every output."""
    from calibration.cli import main

    conversations = write_conversations(root / "import" / "conversations.jsonl", n=n, turns=turns)
    data, model, scores = root / "data", root / "model", root / "scores" / "scores.csv"
    judge = ["judge=fake", f"judge.base_url={base_url}", "progress=false"]
    assert main(["gather", f"conversations={conversations}", f"out={data}", *judge]) == 0
    write_labels(data)
    train = ["train.ensemble=2", "train.pretrain_steps=30", "train.finetune_steps=30"]
    assert main(["train", f"data={data}", f"out={model}", *train]) == 0
    assert main(["score", f"conversations={conversations}", f"calibrator={model}", f"out={scores}", *judge]) == 0
    return {"conversations": conversations, "data": data, "model": model, "scores": scores}
