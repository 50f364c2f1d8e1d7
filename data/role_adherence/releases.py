"""The bundled benchmark as a chatbot's releases, and its simulated reviewers standing in for Label Studio.

The release walkthrough (docs/how-to/release-estimates.md, docs/how-to/adapt.md) needs what a team has:
labelled conversations the calibrator was trained on, and new releases with no labels yet. This helper makes
them from the bundled benchmark, and later answers a labelling sheet the way the bundled reviewers did.

    python data/role_adherence/releases.py split --out runs/nova
        -> history.jsonl + history_labels.csv: the three other assistants' 84 conversations, all labelled
           (what the calibrator in use was trained on);
           release-6.jsonl, release-7.jsonl: Nova's (fintech_support) 28 conversations, 14 per release,
           no labels (a release is new to the calibrator: another chatbot, other replies).
    python data/role_adherence/releases.py review --sheet to_label.csv --out answered.csv
        -> the sheet `role-rubric suggest` wrote, one row per bundled reviewer who answered the row's turn
           and question in labels.csv, with judge_id and answer filled: what a reviewer sends back from a
           spreadsheet or Label Studio. Rows nobody answered stay empty (`import` skips them).

Everything here is synthetic (see README.md): the "reviewers" are the simulated judges of judges.csv.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
RELEASED_ROLE = "fintech_support"  # Nova, Brightpay's support assistant: the chatbot being released
PER_RELEASE = 14


def split(out: Path) -> None:
    """history.jsonl + history_labels.csv (the other roles), release-6.jsonl and release-7.jsonl (Nova's)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = (HERE / "conversations.jsonl").read_text(encoding="utf-8").splitlines()
    convs = [json.loads(line) for line in lines if line.strip()]
    nova = [c for c in convs if c["role"] == RELEASED_ROLE]
    parts = {
        "history": [c for c in convs if c["role"] != RELEASED_ROLE],
        "release-6": nova[:PER_RELEASE],
        "release-7": nova[PER_RELEASE : 2 * PER_RELEASE],
    }
    for name, part in parts.items():
        text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in part)
        (out / f"{name}.jsonl").write_text(text, encoding="utf-8")
    labels = pd.read_csv(HERE / "labels.csv", dtype=str, keep_default_na=False)
    history = {c["conversation_id"] for c in parts["history"]}
    labels[labels["conversation_id"].isin(history)].to_csv(out / "history_labels.csv", index=False)
    for name, part in parts.items():
        print(f"releases: wrote {out / (name + '.jsonl')} ({len(part)} conversations)")
    print(f"releases: wrote {out / 'history_labels.csv'} ({labels['conversation_id'].isin(history).sum()} labels)")


def review(sheet: Path, out: Path) -> None:
    """The sheet answered by the bundled reviewers: each row becomes one row per reviewer who answered it."""
    frame = pd.read_csv(sheet, dtype=str, keep_default_na=False)
    labels = pd.read_csv(HERE / "labels.csv", dtype=str, keep_default_na=False)
    keys = ["conversation_id", "turn", "question_id"]
    answered = frame.drop(columns=["judge_id", "answer"]).merge(labels, on=keys, how="left", sort=False)
    answered = answered.fillna("")[list(frame.columns)]
    out.parent.mkdir(parents=True, exist_ok=True)
    answered.to_csv(out, index=False)
    n = int((answered["answer"] != "").sum())
    turns = answered.loc[answered["answer"] != "", ["conversation_id", "turn"]].drop_duplicates()
    print(
        f"releases: wrote {out} ({n} answers by {answered.loc[answered['answer'] != '', 'judge_id'].nunique()} "
        f"reviewers on {len(turns)} turns)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_split = sub.add_parser("split", help="history + release-6 + release-7 from the bundled benchmark")
    p_split.add_argument("--out", required=True, type=Path)
    p_review = sub.add_parser("review", help="answer a labelling sheet as the bundled reviewers did")
    p_review.add_argument("--sheet", required=True, type=Path)
    p_review.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)
    if args.command == "split":
        split(args.out)
    else:
        if not args.sheet.exists():
            print(
                f"releases: error: {args.sheet} does not exist. Fix: pass --sheet the CSV `role-rubric suggest` wrote.",
                file=sys.stderr,
            )
            return 2
        review(args.sheet, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
