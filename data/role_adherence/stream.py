"""The bundled benchmark as a chatbot in production: weeks of conversations with their start times, and a week
from which the chatbot gets worse, for the monitor walkthrough (docs/how-to/monitor.md).

    python data/role_adherence/stream.py --gathered runs/monitor/bundled --out runs/monitor/stream
        [--weeks 12] [--per-week 80] [--worse-from 9] [--seed 0]
    -> OUT/conversations.jsonl (each conversation with `started_at`, as an import of traces writes it),
       OUT/llm.csv (the judge's distributions, as gather wrote them), rubric.yaml and gather_summary.json.

Each week's conversations are drawn with replacement from the gathered bundled conversations (new ids, a
start time in that week, from 2026-01-05, a Monday). From week --worse-from on, the draw favours the
conversations the judge found less adherent (weight exp(-3 z), z the conversation's standardised mean expected
`overall` answer): the chatbot's behaviour got worse, as after a bad prompt change. Everything is synthetic
(see README.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
TILT = 3.0


def write_stream(gathered: Path, out: Path, *, weeks: int, per_week: int, worse_from: int | None, seed: int) -> int:
    """Write the stream; returns how many conversations it holds."""
    out.mkdir(parents=True, exist_ok=True)
    for name in ("rubric.yaml", "gather_summary.json"):
        if (gathered / name).exists():
            (out / name).write_bytes((gathered / name).read_bytes())
    llm = pd.read_csv(gathered / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    by_conv = dict(tuple(llm.groupby("conversation_id", sort=True)))
    ids = sorted(by_conv)
    lines = (gathered / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    records = {r["conversation_id"]: r for r in map(json.loads, filter(str.strip, lines))}
    overall = llm[llm.question_id == "overall"]
    expected = (overall.option.astype(float) * overall.prob).groupby(overall.conversation_id).sum()
    per_conv = expected.groupby(level=0).mean().reindex(ids).to_numpy()
    z = (per_conv - per_conv.mean()) / per_conv.std()
    worse = np.exp(-TILT * z)
    rng = np.random.default_rng(seed)
    frames, written = [], []
    for week in range(weeks):
        p = worse / worse.sum() if worse_from is not None and week >= worse_from else None
        for i, k in enumerate(rng.choice(len(ids), size=per_week, replace=True, p=p)):
            new = f"w{week:02d}-{i:03d}"
            frames.append(by_conv[ids[k]].assign(conversation_id=new))
            when = START + dt.timedelta(weeks=week, seconds=int(rng.integers(0, 7 * 86400)))
            written.append(
                {**records[ids[k]], "conversation_id": new, "started_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")}
            )
    pd.concat(frames).to_csv(out / "llm.csv", index=False)
    (out / "conversations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in written), encoding="utf-8")
    return len(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gathered", type=Path, required=True, help="the bundled benchmark, gathered")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--weeks", type=int, default=12)
    parser.add_argument("--per-week", type=int, default=80)
    parser.add_argument("--worse-from", type=int, default=9, help="the week the chatbot gets worse (none: -1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if not (args.gathered / "llm.csv").exists():
        print(
            f"{args.gathered}: no llm.csv: gather the bundled benchmark first (docs/how-to/monitor.md)", file=sys.stderr
        )
        return 2
    worse = None if args.worse_from < 0 else args.worse_from
    n = write_stream(
        args.gathered, args.out, weeks=args.weeks, per_week=args.per_week, worse_from=worse, seed=args.seed
    )
    print(f"stream: {n} conversations over {args.weeks} weeks from {START:%Y-%m-%d}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
