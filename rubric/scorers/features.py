"""Deterministic scores as calibration features: `role-rubric gather scorer=NAME` -> a native dataset dir.

Each assistant turn gets one extra rubric question, `ref_<scorer>` ("is the reply close to what the role
would say?", options 0 = no, 1 = yes), whose "distribution" is (1 - score, score): an llm.csv the
calibration network reads like any judge's, alone or beside an LLM judge's distributions
(`scorer.beside=DIR` appends it to a gathered dataset dir: its llm.csv and rubric.yaml). Humans never
answer this question, so it is an input only; the target stays the rubric's.

Distribution scorers and kNN are fitted on every reference of the role in the conversations file (the
references are not labels, so nothing about the humans leaks in).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from rubric.conversations import Conversation, load_conversations, save_conversations
from rubric.errors import InputError
from rubric.files import atomic_to_csv, atomic_write_text, out_lock
from rubric.judge.cache import RequestCache
from rubric.schema import Option, Question, Rubric, load_rubric, save_rubric
from rubric.scorers import EmbeddingStore, Scorer, make_scorer

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def feature_question(scorer: str) -> Question:
    return Question(
        id=f"ref_{scorer}",
        text=f"Is the reply close to a role-adherent reply ({scorer} score against the reference)?",
        options=(Option(0.0, "no: far from what the role would say"), Option(1.0, "yes: close to it")),
    )


def references_by_role(conversations: Sequence[Conversation]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in conversations:
        out.setdefault(c.chatbot_role, []).extend(t.reference for t in c.turns if t.reference)
    return out


def score_turns(conversations: Sequence[Conversation], scorer: Scorer) -> pd.DataFrame:
    """(conversation_id, turn, score) for every assistant turn; the scorer is fitted first if it needs to be."""
    if scorer.needs_fit:
        scorer.fit(references_by_role(conversations))
    rows = [
        (c.conversation_id, i, t.assistant, t.reference, c.chatbot_role)
        for c in conversations
        for i, t in enumerate(c.turns)
    ]
    frame = pd.DataFrame(rows, columns=["conversation_id", "turn", "reply", "reference", "role"])
    scores = scorer.score_batch(frame["reply"].tolist(), frame["reference"].tolist(), frame["role"].tolist())
    return frame[["conversation_id", "turn"]].assign(score=scores)


def feature_rows(scores: pd.DataFrame, question: Question, floor: float = 1e-4) -> pd.DataFrame:
    """llm.csv rows: (1 - score, score) over the options 0 and 1, kept off exact 0 and 1 like a judge's;
    coverage 1 and source "scorer", so they sit beside a judge's rows in one llm.csv."""
    p = scores["score"].clip(floor, 1 - floor)
    base = scores[["conversation_id", "turn"]].assign(question_id=question.id)
    meta = {"coverage": 1.0, "source": "scorer", "model": question.id[len("ref_") :]}
    no, yes = (base.assign(option=o.key, prob=v, **meta) for o, v in zip(question.options, (1 - p, p), strict=True))
    return pd.concat([no, yes]).sort_values(["conversation_id", "turn", "option"], kind="stable").reset_index(drop=True)


def gather_scores(
    conversations: Sequence[Conversation],
    rubric: Rubric,
    scorer: str,
    *,
    params: Mapping[str, Any] | None = None,
    beside: str | Path | None = None,
    cache: str | Path | None = None,
    store: EmbeddingStore | None = None,
) -> tuple[pd.DataFrame, Rubric]:
    """(llm frame, rubric with the feature question appended): the scorer's feature rows, after the rows
    of the dataset dir `beside` (whose rubric.yaml is then the base rubric) if given. `beside` is checked
    before any scoring, and a cache file this call creates is removed again when it stops on an error
    before storing anything (a scorer's bad parameter): no empty cache is left behind."""
    question = feature_question(scorer)
    if beside is not None:  # before the scoring: a wrong folder costs no embedding
        beside = Path(beside)
        llm = beside / "llm.csv"
        if not llm.is_file():
            raise InputError(
                "no llm.csv in the dataset dir to add the scores to.",
                path=beside,
                fix="pass scorer.beside=DIR of a `role-rubric gather` run.",
            )
        rubric = load_rubric(beside / "rubric.yaml")
    own = store is None and not isinstance(cache, RequestCache)  # the cache file is this call's to clean up
    store = store or EmbeddingStore(cache=cache)
    try:
        scored = score_turns(conversations, make_scorer(scorer, store=store, **dict(params or {})))
    except BaseException:
        if own:
            store.cache.discard_if_new()
        raise
    frames = [feature_rows(scored, question)]
    if beside is not None:
        judge = pd.read_csv(beside / "llm.csv", dtype={"conversation_id": str, "option": str})
        frames.insert(0, judge[judge["question_id"] != question.id])
    if question.id in rubric.ids:
        rubric = Rubric(
            rubric.name,
            tuple(q for q in rubric.questions if q.id != question.id),
            rubric.target,
            rubric.description,
        )
    rubric = Rubric(rubric.name, (*rubric.questions, question), rubric.target, rubric.description)
    return pd.concat(frames, ignore_index=True), rubric


def run_scorer_gather(
    conversations: str | Path,
    rubric: Rubric,
    scorer: Mapping[str, Any],
    *,
    out: str | Path,
    cache: str | Path | None = None,
    limit: int | None = None,
) -> pd.DataFrame:
    """`role-rubric gather scorer=NAME conversations=FILE out=DIR [scorer.beside=JUDGE_DIR]`: the scorer's
    features of every turn (granularity turn: the command's rule) as a native dataset dir. rubric: the
    composed one; scorer: the composed `scorer` group, {name, params, beside}."""
    spec = dict(scorer)
    convs = load_conversations(conversations)
    if limit:
        convs = convs[:limit]
    out = Path(out)
    with out_lock(out):  # one run per folder, until the last write
        llm, rubric = gather_scores(
            convs,
            rubric,
            spec["name"],
            params=spec.get("params") or {},
            beside=spec.get("beside"),
            cache=cache,
        )
        atomic_to_csv(llm, out / "llm.csv")
        save_rubric(rubric, out / "rubric.yaml")
        save_conversations(convs, out / "conversations.jsonl")
        summary = {
            "scorer": spec,
            "items": int(llm[["conversation_id", "turn"]].drop_duplicates().shape[0]),
            "questions": rubric.ids,
        }
        atomic_write_text(out / "gather_summary.json", json.dumps(summary, indent=2) + "\n")
    log.info(
        f"gather: {spec['name']} scores for {summary['items']} turns as question ref_{spec['name']}"
        + (f", beside {spec['beside']}" if spec.get("beside") else "")
    )
    for name in ("llm.csv", "rubric.yaml", "conversations.jsonl", "gather_summary.json"):
        log.info(f"gather: wrote {out / name}")
    return llm
