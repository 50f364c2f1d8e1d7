"""A Label Studio JSON export read back into labels (the tasks and config are label_studio.py).

Reading an export (a list of tasks with their `annotations`, Label Studio's JSON export format):
- an annotation marked `was_cancelled` (the reviewer pressed Skip) is skipped and counted;
- a reviewer's latest annotation of a task (by updated_at, then id) replaces their earlier ones;
- a question the reviewer left out stays missing (no row, never a sentinel);
- an answer that is not an option of its question, a question the rubric lacks, and a task whose
  conversation no longer reads as it did when it was exported, each stop the import with one line.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.connectors.label_studio.export_shape import check_export
from calibration.labelling.answers import option_key, options_text
from calibration.labelling.cells import check_reviewer_id
from calibration.labelling.items import Item, check_item, conversation_messages, read_csv
from rubric.conversations import Conversation
from rubric.errors import InputError, read_text_file
from rubric.ids import clean_id, clean_id_columns
from rubric.schema import Rubric

__all__ = ["TASK_FIELDS", "label_studio_labels", "read_export", "read_judge_map", "with_emails"]

TASK_FIELDS = ("conversation_id", "turn", "chatbot_role", "messages")


def read_export(path: str | Path) -> list[dict[str, Any]]:
    """A Label Studio JSON export (a list of tasks, each with data and annotations), or one clear error."""
    path = Path(path)
    if not path.exists():
        raise InputError(
            "file not found.", path=path, fix="export the project as JSON in Label Studio and pass that file."
        )
    try:
        tasks = json.loads(read_text_file(path))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not JSON ({exc.msg}, line {exc.lineno}); not a Label Studio JSON export.",
            path=path,
            fix="in Label Studio choose Export -> JSON (not CSV or TSV) and pass that file.",
        ) from None
    return check_export(tasks, path)  # the same checks as an export pulled with url= (export_shape.py)


def with_emails(tasks: list[dict], users: dict[int, str]) -> list[dict]:
    """The export with each completed_by id as {id, email}, as Label Studio writes it when asked to, so the
    saved file imports again on its own (changed in place, and returned)."""
    for task in tasks:
        for ann in task.get("annotations") or []:
            uid = ann.get("completed_by")
            if isinstance(uid, int) and uid in users:
                ann["completed_by"] = {"id": uid, "email": users[uid]}
    return tasks


def label_studio_labels(
    tasks: list[dict[str, Any]],
    rubric: Rubric,
    conversations: dict[str, Conversation],
    *,
    path: str | Path,
    users: dict[int, str] | None = None,
    judge_map: dict[str, str] | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """labels.csv rows (one per task, annotator and answered question) and counts of what was skipped."""
    counts: Counter[str] = Counter()
    rows: list[tuple[str, str, str, str, str]] = []
    bad: list[tuple[Any, str]] = []  # (task id, what is wrong)
    answered_in: dict[Item, Any] = {}  # item -> the task whose answers it has
    for task in tasks:
        item = _task_item(task, path)
        counts["tasks"] += 1
        counts["drafts_not_submitted"] += len(task.get("drafts") or [])
        latest = _latest_per_annotator(task, counts, users, judge_map, path)
        if latest:  # a turn nobody answered may have changed since: nothing of it is imported
            _check_same_text(task, item, conversations, path)
            _check_one_task_per_turn(task, item, answered_in, path)
        for judge, ann in latest.items():
            counts["annotations"] += 1
            answered = _answers(ann, item, judge, task, rubric, rows, bad, counts, path)
            counts["questions_left_unanswered"] += len(rubric.ids) - answered
    if bad:
        others = list(dict.fromkeys(str(t) for t, _ in bad[1:]))[:10]
        more = f"; {len(bad) - 1} more, in tasks {', '.join(others)}" if len(bad) > 1 else ""
        raise InputError(
            f"{len(bad)} answer(s) not an option of the rubric: task {bad[0][0]} {bad[0][1]}{more}.",
            path=path,
            fix="correct them in Label Studio (or change rubric.yaml to match) and export again.",
        )
    if not rows:
        raise InputError(
            f"no answers to import ({counts['tasks']} tasks, {counts['cancelled_skipped']} cancelled annotations).",
            path=path,
            fix="submit annotations in Label Studio, then export again.",
        )
    labels = clean_id_columns(
        pd.DataFrame(rows, columns=["conversation_id", "turn", "judge_id", "question_id", "answer"])
    )
    counts["labels"] = len(labels)
    counts["annotators"] = labels["judge_id"].nunique()
    return labels, dict(counts)


def _task_item(task: dict[str, Any], path: str | Path) -> Item:
    """The (conversation_id, turn) of a task made by `role-rubric label-studio`."""
    data, tid = task["data"], task.get("id", "?")
    missing = [f for f in TASK_FIELDS if f not in data]
    if missing:
        raise InputError(
            f"task {tid} has no {', '.join(missing)} in its data; it was not made by `role-rubric label-studio`.",
            path=path,
            fix="export the project whose tasks role-rubric made (role-rubric label-studio ...).",
        )
    turn = str(data["turn"] if data["turn"] is not None else "").strip()
    if not (turn == "" or turn.isdigit()):
        raise InputError(
            f"task {tid} has the turn {data['turn']!r}, not a turn number.",
            path=path,
            fix="export the project whose tasks role-rubric made (role-rubric label-studio ...).",
        )
    return (clean_id(data["conversation_id"]), turn)  # one rule for ids (rubric/ids.py)


def _check_one_task_per_turn(task: dict[str, Any], item: Item, answered_in: dict[Item, Any], path) -> None:
    """Two answered tasks for one turn (tasks imported twice): whose answer counts cannot be told."""
    tid = task.get("id", "?")
    if item in answered_in:
        raise InputError(
            f"tasks {answered_in[item]} and {tid} are both conversation {item[0]!r} turn {item[1] or 'all'}, and both "
            "have answers: the project holds this turn twice.",
            path=path,
            fix="delete one of the two tasks in Label Studio (after moving its answers to the other), then import "
            "again; `role-rubric label-studio project=ID` adds only the turns a project lacks.",
        )
    answered_in[item] = tid


def _check_same_text(task: dict[str, Any], item: Item, conversations: dict[str, Conversation], path) -> None:
    """The task shows the dataset's conversation as it is now: otherwise its labels judge other text."""
    data, tid = task["data"], task.get("id", "?")
    check_item(item, conversations, where=f"task {tid}", path=path)
    conv = conversations[item[0]]
    expected = conversation_messages(conv, item[1])
    if data["messages"] != expected or data["chatbot_role"] != conv.chatbot_role:
        shown = data["messages"] if isinstance(data["messages"], list) else []
        differs = next(
            (i for i, (a, b) in enumerate(zip(shown, expected, strict=False)) if a != b), min(len(shown), len(expected))
        )
        what = "the role" if data["chatbot_role"] != conv.chatbot_role else f"message {differs}"
        raise InputError(
            f"task {tid} (conversation {item[0]!r}, turn {item[1] or 'all'}) no longer matches conversations.jsonl "
            f"({what} differs): the reviewers judged other text.",
            path=path,
            fix="pass data= the dataset the tasks were made from, or export the changed turns again and relabel them.",
        )


def _annotator(
    ann: dict[str, Any], users: dict[int, str] | None, judge_map: dict[str, str] | None, tid: Any, path: str | Path
) -> str:
    """judge_id of an annotation: the annotator's email (renamed by judge_map), or a mapped user id."""
    who = ann.get("completed_by")
    if isinstance(who, dict):
        uid, email = who.get("id"), who.get("email")
    else:
        uid, email = who, None
    if email is None and users is not None and isinstance(uid, int):
        email = users.get(uid)
    judge_map = judge_map or {}
    where = f"task {tid}, annotation {ann.get('id', '?')}"
    for key in (email, None if uid is None else str(uid)):
        if key is not None and key in judge_map:
            check_reviewer_id(judge_map[key], where, path)
            return judge_map[key]
    if email:
        check_reviewer_id(str(email), where, path)
        return str(email)
    raise InputError(
        f"task {tid}, annotation {ann.get('id', '?')}: the export names its annotator by user id {uid!r} only.",
        path=path,
        fix="import with url= and project= (the server tells the emails), or pass judge_map= a CSV "
        "with columns annotator,judge_id that names each user id.",
    )


def _latest_per_annotator(task, counts, users, judge_map, path) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for ann in task.get("annotations") or []:
        if ann.get("was_cancelled"):
            counts["cancelled_skipped"] += 1
            continue
        judge = _annotator(ann, users, judge_map, task.get("id", "?"), path)
        if judge in latest:
            counts["superseded_by_a_later_annotation"] += 1
            if _when(ann) < _when(latest[judge]):
                continue
        latest[judge] = ann
    return latest


def _when(ann: dict[str, Any]) -> tuple[str, int]:
    return (str(ann.get("updated_at") or ann.get("created_at") or ""), int(ann.get("id") or 0))


def _answers(ann, item, judge, task, rubric, rows, bad, counts, path) -> int:
    """Append the annotation's valid answers to rows (bad ones to `bad`); returns how many questions it answered."""
    tid, answered = task.get("id", "?"), set()
    for result in ann.get("result") or []:
        name, kind = result.get("from_name"), result.get("type")
        if name not in rubric.ids:
            if kind == "choices":
                raise InputError(
                    f"task {tid}: question {name!r} is not in rubric.yaml (its questions: {', '.join(rubric.ids)}); "
                    "the project asks another rubric.",
                    path=path,
                    fix="pass data= the dataset whose rubric.yaml made this project.",
                )
            counts["other_fields_ignored"] += 1
            continue
        question = rubric.question(name)
        choices = (result.get("value") or {}).get("choices")
        key = option_key(question, choices[0]) if isinstance(choices, list) and len(choices) == 1 else None
        if key is None or name in answered:
            bad.append((tid, f"({judge}): question {name!r} answered {choices!r}, not one of {options_text(question)}"))
            continue
        answered.add(name)
        rows.append((item[0], item[1], judge, name, key))
    return len(answered)


def read_judge_map(path: str | Path) -> dict[str, str]:
    """annotator (email or Label Studio user id) -> judge_id, from a CSV with columns annotator,judge_id."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found.", path=path, fix="pass judge_map= a CSV with columns annotator,judge_id.")
    frame = read_csv(path)  # a folder, not UTF-8, empty or not CSV: one line naming the file
    if not {"annotator", "judge_id"} <= set(frame.columns):
        raise InputError(
            "needs the columns annotator,judge_id.",
            path=path,
            fix="write one row per reviewer: their Label Studio email (or user id), the judge_id to use.",
        )
    out: dict[str, str] = {}
    for i, (who, judge) in enumerate(zip(frame["annotator"].str.strip(), frame["judge_id"].str.strip(), strict=True)):
        if not who or not judge:
            raise InputError("an empty annotator or judge_id.", path=path, row=i + 1, fix="fill in both columns.")
        if who in out and out[who] != judge:
            raise InputError(
                f"annotator {who!r} is mapped twice.", path=path, row=i + 1, fix="keep one row per annotator."
            )
        out[who] = judge
    return out
