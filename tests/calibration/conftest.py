"""Fixtures: a small seeded synthetic native dataset, and the LLM-Rubric reference data imported."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from calibration.data.importers import import_llm_rubric

ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors" / "llm_rubric_synth"
# Tests share 2 cores with nothing else in CI; one thread avoids oversubscription on tiny tensors.
torch.set_num_threads(int(os.environ.get("ROLE_RUBRIC_TEST_THREADS", "1")))

SYNTH_RUBRIC = {
    "name": "synthetic",
    "target": "overall",
    "questions": [
        {"id": "scope", "text": "In scope?", "options": [{"value": v, "label": f"s{v}"} for v in (1, 2, 3, 4)]},
        {"id": "tone", "text": "Tone?", "options": [{"value": v, "label": f"t{v}"} for v in (1, 2, 3)]},
        {"id": "overall", "text": "Overall?", "options": [{"value": v, "label": f"o{v}"} for v in (1, 2, 3, 4)]},
    ],
}


def make_native_dataset(
    path: Path, *, n_conversations: int = 40, turns: int = 2, n_judges: int = 6, seed: int = 0
) -> Path:
    """A native dataset with known structure: a latent quality per turn drives both the LLM judge's
    (noisy, over-confident) distributions and the human answers; each judge has its own offset."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "rubric.yaml").write_text(yaml.safe_dump(SYNTH_RUBRIC, sort_keys=False))
    llm_rows, label_rows = [], []
    offsets = np.linspace(-0.8, 0.8, n_judges)
    for c in range(n_conversations):
        cid = f"c{c:03d}"
        judges = rng.choice(n_judges, size=3, replace=False)
        for t in range(turns):
            quality = rng.uniform(0, 1)
            for q in SYNTH_RUBRIC["questions"]:
                values = np.array([o["value"] for o in q["options"]], dtype=float)
                centre = 1 + quality * (len(values) - 1) + rng.normal(0, 0.6)
                logits = -2.0 * (values - centre) ** 2
                probs = np.exp(logits - logits.max())
                probs /= probs.sum()
                for v, p in zip(values, probs, strict=True):
                    llm_rows.append((cid, t, q["id"], int(v), float(p)))
                for j in judges:
                    if rng.uniform() < 0.05 and q["id"] != "overall":
                        continue  # judges sometimes skip a question
                    answer = np.clip(
                        np.rint(1 + quality * (len(values) - 1) + offsets[j] + rng.normal(0, 0.4)), 1, len(values)
                    )
                    label_rows.append((cid, t, f"j{j}", q["id"], int(answer)))
    pd.DataFrame(llm_rows, columns=["conversation_id", "turn", "question_id", "option", "prob"]).to_csv(
        path / "llm.csv", index=False
    )
    pd.DataFrame(label_rows, columns=["conversation_id", "turn", "judge_id", "question_id", "answer"]).to_csv(
        path / "labels.csv", index=False
    )
    return path


@pytest.fixture(scope="session")
def synthetic_dir(tmp_path_factory) -> Path:
    return make_native_dataset(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture()
def synthetic_copy(tmp_path) -> Path:
    """A fresh synthetic dataset a test may corrupt."""
    return make_native_dataset(tmp_path / "data")


@pytest.fixture(scope="session")
def llm_rubric_dir(tmp_path_factory) -> Path:
    if not (ANCHORS / "llm_evaluations.tsv").exists():
        pytest.skip(f"LLM-Rubric reference data not found at {ANCHORS}")
    out = tmp_path_factory.mktemp("llm_rubric")
    import_llm_rubric(ANCHORS / "llm_evaluations.tsv", ANCHORS / "human_judgments.tsv", out)
    return out


@pytest.fixture(scope="module")
def tiny_model(synthetic_dir, tmp_path_factory) -> Path:
    """A small trained model, one per test module (decide writes its calibration beside it)."""

    out = tmp_path_factory.mktemp("tiny_model")
    assert train_quick(synthetic_dir, out, steps=30, ensemble=2) == 0
    return out


def train_quick(data: Path, out: Path, *, steps: int, ensemble: int = 1, extra: tuple[str, ...] = ()) -> int:
    """`role-rubric train` of DATA into OUT with `steps` pretraining and as many fine-tuning steps, `ensemble`
    members and the `extra` overrides; its exit status."""
    from calibration.cli import main

    steps_keys = [f"train.pretrain_steps={steps}", f"train.finetune_steps={steps}"]
    return main(["train", f"data={data}", f"out={out}", *steps_keys, f"train.ensemble={ensemble}", *extra])


def png_bytes(fig, *, dpi: int) -> bytes:
    """The figure as PNG bytes without the writer's version (so equal figures give equal bytes); closes it."""
    import io

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()
