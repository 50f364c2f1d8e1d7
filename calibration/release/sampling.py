"""`role-rubric suggest purpose=estimate`: the conversations to label for a release estimate.

A simple random sample of `budget` conversations (seeded), written as a labelling sheet (every assistant
turn of each sampled conversation, one row per question, judge_id left for the reviewer to fill in) and a
sampling plan, `sample_plan.csv` beside it, which `role-rubric estimate` reads for the inclusion
probabilities (calibration/release/plan.py).
"""

from __future__ import annotations

import time
from pathlib import Path

from calibration.release.plan import PLAN_FILE, uniform_plan


def run_estimate_plan(cfg) -> Path:
    from calibration import load_dataset
    from calibration.labelling.items import dataset_conversations
    from calibration.labelling.sheet import sheet_frame
    from rubric.files import atomic_write_text

    start = time.perf_counter()
    ds = load_dataset(cfg.data, require_labels=False)
    plan = uniform_plan(ds.items["conversation_id"], int(cfg.budget), seed=int(cfg.seed))
    chosen = set(plan.loc[plan["sampled"] == 1, "conversation_id"])
    keys = [(str(c), str(t)) for c, t in ds.items.itertuples(index=False) if c in chosen]
    frame = sheet_frame(keys, [""] * len(keys), ds.rubric, dataset_conversations(cfg.data),
                        questions=str(cfg.get("questions", "all")), scores=None)
    out = Path(cfg.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, frame.to_csv(index=False))
    plan_path = out.parent / PLAN_FILE
    atomic_write_text(plan_path, plan.to_csv(index=False))
    print(f"suggest: {len(chosen)} of {plan.shape[0]} conversations drawn uniformly at random (seed {int(cfg.seed)}; "
          f"budget counts conversations; each has inclusion probability {len(chosen) / plan.shape[0]:.4g}) "
          f"in {time.perf_counter() - start:.1f}s")
    print(f"suggest: wrote {out} ({len(frame)} rows: every assistant turn of those conversations x question; "
          f"fill in judge_id and answer) and {plan_path}")
    print(f"suggest: copy {PLAN_FILE} into the release folder (or pass plan=) when you run `role-rubric estimate`")
    return out
