"""The labelling sheet: a CSV a reviewer fills in a spreadsheet, and `import source=sheet` reading it back.

One row per (turn, reviewer, question). A reviewer sees what the LLM judge saw: the chatbot's role, the
earlier turns of the conversation, the user message and the reply under review; then the question and its
options ("value: label", joined by " | "), and writes an option value into `answer`. Rows left without an
answer are not labels: they are counted and skipped, so a half-filled sheet can be imported as it stands.
Errors name the sheet's own row numbers, as a spreadsheet shows them (the header is row 1).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd

from calibration.labelling.answers import option_key, options_text
from calibration.labelling.cells import check_reviewer_id, neutralise_frame
from calibration.labelling.items import (
    SHEET_ROW_OFFSET,
    Item,
    check_item,
    earlier_turns_text,
    read_csv,
    turn_text,
)
from rubric.conversations import Conversation
from rubric.errors import InputError
from rubric.ids import clean_id
from rubric.schema import Rubric

NEEDED = ("conversation_id", "turn", "judge_id", "question_id", "answer")


def sheet_frame(
    items: list[Item],
    judge_ids: list[str],
    rubric: Rubric,
    conversations: dict[str, Conversation],
    *,
    questions: str = "all",
    scores: list[float] | None = None,
) -> pd.DataFrame:
    """The sheet: one row per (item, judge, question) in the given order, ranked from 1. `scores` adds a
    `score` column (leave it out where it means nothing to a reviewer, e.g. a random order). Text cells that
    a spreadsheet would run as a formula are quoted (calibration/labelling/cells.py); reading restores them."""
    if questions not in ("all", "target"):
        raise InputError(f"questions={questions!r}.", fix="use questions=all or questions=target.")
    asked = [q for q in rubric.questions if questions == "all" or q.id == rubric.target]
    rows = []
    for rank, ((cid, turn), judge_id) in enumerate(zip(items, judge_ids, strict=True), start=1):
        conv = conversations.get(cid)
        role = earlier = user = assistant = ""
        if conv is not None:
            role, earlier = conv.chatbot_role, earlier_turns_text(conv, turn)
            if turn != "" and int(turn) < len(conv.turns):
                user, assistant = conv.turns[int(turn)].user, conv.turns[int(turn)].assistant
        for q in asked:
            row = {"rank": rank, "conversation_id": cid, "turn": turn, "judge_id": judge_id}
            if scores is not None:
                row["score"] = float(scores[rank - 1])
            row.update(
                {
                    "question_id": q.id,
                    "question": q.text,
                    "options": " | ".join(f"{o.key}: {o.label}" for o in q.options),
                    "chatbot_role": role,
                    "earlier_turns": earlier,
                    "user": user,
                    "assistant": assistant,
                    "answer": "",
                }
            )
            rows.append(row)
    return neutralise_frame(pd.DataFrame(rows))  # the chatbot's users wrote some of this: no formulas


def sheet_labels(
    path: str | Path,
    rubric: Rubric,
    *,
    conversations: dict[str, Conversation] | None = None,
    known: set[Item] | None = None,
    whole_conversations: bool = False,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """labels.csv rows from the answered rows of a filled sheet, each checked; counts of what was skipped.

    conversations: check each row's turn exists and its user message and reply still read as in the sheet;
    known: without conversations, the items the dataset has (from llm.csv); whole_conversations: the
    dataset judges whole conversations, so a blank turn is one (otherwise a blank turn is a mistake)."""
    path = Path(path)
    frame = read_csv(path)
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; is this a labelling sheet?",
            path=path,
            fix="pass sheet= the CSV written by `role-rubric suggest`, filled in.",
        )
    filled = frame["answer"].str.strip() != ""
    counts = Counter(sheet_rows=len(frame), rows_without_answer_skipped=int((~filled).sum()))
    rows: dict[tuple[str, str, str, str], tuple[str, int]] = {}
    for i in frame.index[filled]:
        n = int(i) + SHEET_ROW_OFFSET
        key, answer = _checked_row(frame.loc[i], n, path, rubric, conversations, known, whole_conversations)
        if key in rows:
            earlier, first = rows[key]
            if earlier != answer:
                raise InputError(
                    f"sheet row {n} answers {key[3]!r} for {key[0]!r} turn {key[1]} as {key[2]} again "
                    f"({answer}; row {first} says {earlier}).",
                    path=path,
                    fix="keep one answer per turn, judge and question.",
                )
            counts["repeated_rows_merged"] += 1
            continue
        rows[key] = (answer, n)
    if not rows:
        raise InputError(
            "no row has an answer.",
            path=path,
            fix="write an option value into the answer column of the rows you labelled.",
        )
    labels = pd.DataFrame([(*k, a) for k, (a, _) in rows.items()], columns=list(NEEDED))
    counts.update(labels=len(labels), judges=labels["judge_id"].nunique())
    return labels, dict(counts)


def _checked_row(row, n, path, rubric, conversations, known, whole) -> tuple[tuple[str, str, str, str], str]:
    where = f"sheet row {n}"
    cid, turn = clean_id(row["conversation_id"]), turn_text(row["turn"])  # one rule for ids (rubric/ids.py)
    judge, qid = clean_id(row["judge_id"]), clean_id(row["question_id"])
    if not judge:
        raise InputError(
            f"{where} has an answer but no judge_id.",
            path=path,
            fix="write your reviewer id in judge_id on every row you answer (the same id each time).",
        )
    if not cid:
        raise InputError(
            f"{where} has an answer but no conversation_id.",
            path=path,
            fix="restore the conversation_id the sheet was written with (or delete the row).",
        )
    if turn == "" and not whole:
        raise InputError(
            f"{where} has an answer but a blank turn, and this dataset is labelled per turn (conversation {cid!r}).",
            path=path,
            fix="restore the turn number the sheet was written with (0 is the first assistant reply).",
        )
    check_reviewer_id(judge, where, path)
    if qid not in rubric.ids:
        raise InputError(
            f"{where}: question {qid!r} is not in rubric.yaml ({', '.join(rubric.ids)}).",
            path=path,
            fix="pass data= the dataset the sheet was made from.",
        )
    question = rubric.question(qid)
    answer = option_key(question, row["answer"])
    if answer is None:
        raise InputError(
            f"{where}: answer {row['answer'].strip()!r} to {qid!r} is not one of {options_text(question)}.",
            path=path,
            fix="write one of the option values listed in the options column.",
        )
    if conversations is not None:
        check_item((cid, turn), conversations, where=where, path=path)
        _same_text(row, conversations[cid], turn, where, path)
    elif known is not None and (cid, turn) not in known:
        raise InputError(
            f"{where}: conversation {cid!r} turn {turn!r} is not in the dataset.",
            path=path,
            fix="pass data= the dataset the sheet was made from.",
        )
    return (cid, turn, judge, qid), answer


def _same_text(row, conv: Conversation, turn: str, where: str, path) -> None:
    """The sheet's user message and reply are the dataset's (spacing aside: spreadsheets rewrite line ends)."""
    if turn == "":
        return
    t = conv.turns[int(turn)]
    for column, text in (("user", t.user), ("assistant", t.assistant)):
        shown = row.get(column, "")
        if shown and _squash(shown) != _squash(text):
            raise InputError(
                f"{where}: the {column} text no longer matches conversations.jsonl "
                f"(conversation {conv.conversation_id!r}, turn {turn}): the reviewer judged other text.",
                path=path,
                fix="pass data= the dataset the sheet was made from, or relabel the changed turn.",
            )


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()
