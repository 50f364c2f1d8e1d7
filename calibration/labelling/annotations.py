"""Reviewers' annotations stored beside the traces -> labels.csv rows, each checked against the rubric.

An annotation is a label when its name is a rubric question's id, `role_rubric/QUESTION`, or a name that
label_map= (CSV `name,question_id`) maps to one; other annotations (a team's own "helpfulness", say) are
counted by name and left out (`unmapped_names`: the import lists them on screen with the label_map= that maps
them). Each label goes to one turn:

- on a span: the turn that span's LLM call belongs to (the reply it wrote, or the reply its tool step led to);
- on a trace: the one turn of that trace (a trace holding several turns is refused: which one is meant?);
- on a session (a whole conversation): refused. role-rubric asks its questions of each reply, and a verdict on
  a whole conversation is not a verdict on its last reply; annotate the reply's span instead.

Answers are checked as a labelling sheet's are (calibration/labelling/answers.py `option_key`): an option
value (3, "3", "3.0", "3: Fully in scope"); a boolean answers a yes/no question (two options) with its
higher option for true and its lower for false. The reviewer (MLflow source_id, Phoenix identifier or user)
is the row's judge_id, every reviewer kept apart; one reviewer answering one question about one turn twice,
differently, is refused.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubric.errors import InputError, read_text_file
from rubric.ids import clean_id
from rubric.schema import Question, Rubric
from rubric.traces.assemble import TraceImport
from rubric.traces.spans import Annotation

PREFIX = "role_rubric/"
COLUMNS = ("conversation_id", "turn", "judge_id", "question_id", "answer")


def read_label_map(path: str | Path, rubric: Rubric) -> dict[str, str]:
    """label_map=: CSV rows `name,question_id` (a header row naming them is skipped); each question must be
    the rubric's."""
    rows = list(csv.reader(read_text_file(path).splitlines()))
    mapping: dict[str, str] = {}
    for n, row in enumerate(rows, start=1):
        if not row or not "".join(row).strip():
            continue
        if n == 1 and [c.strip().lower() for c in row[:2]] == ["name", "question_id"]:
            continue
        if len(row) != 2 or not row[0].strip() or not row[1].strip():
            raise InputError(
                f"expected two cells, name,question_id; got {row!r}.",
                path=path,
                row=n,
                fix="write one annotation name and the rubric question it answers per line.",
            )
        name, qid = row[0].strip(), row[1].strip()
        if qid not in rubric.ids:
            raise InputError(
                f"question {qid!r} is not in the rubric ({', '.join(rubric.ids)}).",
                path=path,
                row=n,
                fix="map each name to one of the rubric's question ids (rubric_file= chooses the rubric).",
            )
        mapping[name] = qid
    return mapping


def annotation_labels(
    annotations: Iterable[Annotation], imported: TraceImport, rubric: Rubric, *, label_map: dict[str, str] | None = None
) -> tuple[list[tuple[str, str, str, str, str]], dict[str, Any]]:
    """labels.csv rows (conversation_id, turn, judge_id, question_id, answer) and counts of what was read
    and left out, with `unmapped_names` ({name: count} of the annotations whose name maps to no question,
    most first). Annotations of conversations the import left out (since=, sample=) are counted, not
    refused."""
    counts: Counter[str] = Counter()
    unmapped: Counter[str] = Counter()
    rows: dict[tuple[str, str, str, str], tuple[str, str]] = {}
    kept = {r["conversation_id"] for r in imported.records}
    for note in annotations:
        counts["annotations"] += 1
        qid = _question_id(note.name, rubric, label_map)
        if qid is None:
            counts["annotations_not_rubric_questions"] += 1
            unmapped[note.name] += 1
            continue
        where = note.where or f"annotation {note.name!r}"
        turn = _turn(note, imported, where)
        if turn is None:
            counts["annotations_of_conversations_not_imported"] += 1
            continue
        cid, index = turn
        if cid not in kept:
            counts["annotations_of_conversations_not_imported"] += 1
            continue
        from calibration.labelling.answers import option_key, options_text  # here: most imports have no labels
        from calibration.labelling.cells import check_reviewer_id

        question = rubric.question(qid)
        answer = _answer(question, note.value, option_key)
        if answer is None:
            raise InputError(
                f"{where}: answer {note.value!r} to {qid!r} (annotation {note.name!r} by {note.reviewer!r}) is not "
                f"one of {options_text(question)}.",
                fix="correct the annotation, or map its name to the question it answers with label_map=.",
            )
        judge = clean_id(note.reviewer) if note.reviewer is not None else ""
        if not judge:
            raise InputError(
                f"{where}: annotation {note.name!r} has no reviewer.",
                fix="keep who gave each annotation (MLflow source_id, Phoenix identifier or user).",
            )
        check_reviewer_id(judge, where, None)
        key = (cid, str(index), judge, qid)
        if key in rows and rows[key][0] != answer:
            raise InputError(
                f"{where}: reviewer {judge!r} answers {qid!r} for conversation {cid!r} turn {index} twice, "
                f"differently ({rows[key][0]} at {rows[key][1]}, {answer} here).",
                fix="keep one answer per reviewer, turn and question (delete the older annotation).",
            )
        if key in rows:
            counts["repeated_annotations_merged"] += 1
        rows[key] = (answer, where)
    labels = [(*k, a) for k, (a, _) in rows.items()]
    counts["labels"] = len(labels)
    counts["judges"] = len({r[2] for r in labels})
    return labels, {**counts, "unmapped_names": dict(unmapped.most_common())}


def unmapped_notice(unmapped: dict[str, int], rubric: Rubric) -> str | None:
    """The line saying which annotation names were left out (names and counts) and how to map them, or None.

    >>> from rubric.schema import rubric_from_dict
    >>> yes_no = [{"value": 0, "label": "no"}, {"value": 1, "label": "yes"}]
    >>> rubric = rubric_from_dict({"name": "r", "questions": [
    ...     {"id": "overall", "text": "Adheres?", "options": yes_no}, {"id": "tone", "text": "Tone?", "options": yes_no}]})
    >>> print(unmapped_notice({"helpfulness": 5, "tone_ok": 2}, rubric))
    7 annotations left out: their names are no rubric question: helpfulness (5), tone_ok (2). Map them with label_map=FILE.csv, rows name,question_id (e.g. helpfulness,overall; the questions: overall, tone).
    """
    if not unmapped:
        return None
    shown = ", ".join(f"{name} ({n:,})" for name, n in list(unmapped.items())[:8])
    more = f" and {len(unmapped) - 8} more names" if len(unmapped) > 8 else ""
    first = next(iter(unmapped))
    return (
        f"{sum(unmapped.values()):,} annotations left out: their names are no rubric question: {shown}{more}. "
        f"Map them with label_map=FILE.csv, rows name,question_id (e.g. {first},{rubric.questions[0].id}; the "
        f"questions: {', '.join(rubric.ids)})."
    )


def _question_id(name: str, rubric: Rubric, label_map: dict[str, str] | None) -> str | None:
    if label_map is not None and name in label_map:
        return label_map[name]
    bare = name[len(PREFIX) :] if name.startswith(PREFIX) else name
    return bare if bare in rubric.ids else None


def _turn(note: Annotation, imported: TraceImport, where: str) -> tuple[str, int] | None:
    """(conversation_id, turn) the annotation is about; None: a span or trace the import did not keep."""
    if note.span_id:
        return imported.turn_of_span.get(note.span_id.lower())
    if note.trace_id:
        turns = imported.turns_of_trace.get(note.trace_id.lower())
        if turns is None:
            return None
        if len(turns) > 1:
            listed = ", ".join(f"turn {t}" for _, t in sorted(turns))
            raise InputError(
                f"{where}: annotation {note.name!r} by {note.reviewer!r} is on trace {note.trace_id}, which holds "
                f"{len(turns)} turns of conversation {next(iter(turns))[0]!r} ({listed}): which reply does it judge?",
                fix="annotate the span of the LLM call that wrote the reply (its span_id is the turn's in "
                "conversations.jsonl).",
            )
        return next(iter(turns))
    raise InputError(
        f"{where}: annotation {note.name!r} by {note.reviewer!r} is on a whole conversation"
        + (f" ({note.session_id!r})" if note.session_id else "")
        + "; role-rubric's questions are asked of each reply.",
        fix="annotate the span (or the trace) of the reply it judges instead.",
    )


def _answer(question: Question, value: Any, option_key: Any) -> str | None:
    """The answer as labels.csv writes it; a boolean answers a two-option (yes/no) question."""
    if isinstance(value, bool) or (isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no")):
        if len(question.options) != 2:
            return None
        yes = value if isinstance(value, bool) else value.strip().lower() in ("true", "yes")
        low, high = sorted(question.options, key=lambda o: o.value)
        return (high if yes else low).key
    return option_key(question, value)
