"""The shape of a Label Studio JSON export, checked before any of it is read: the same checks whether the
export was read from a file (`import export=FILE`) or pulled from a server (`import url=... project=...`).

An export edited by hand, written by another tool or cut short by a proxy can hold a value of the wrong
JSON type anywhere (annotations as an object, a result as a string, a choice's value as a list); each is
one line naming the task (its id, or its place in the list) and the field, never a traceback one stage
later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric.errors import InputError

FIX = (
    "export the project again as JSON (Export -> JSON in Label Studio, or import with url= and project=); "
    "an export edited by hand must keep Label Studio's shapes."
)


def check_export(tasks: Any, path: str | Path) -> list[dict[str, Any]]:
    """`tasks` if it has the shapes role-rubric reads, else InputError naming the first wrong value."""
    if not isinstance(tasks, list) or not all(isinstance(t, dict) for t in tasks):
        raise InputError(
            "not a Label Studio JSON export (a list of tasks).",
            path=path,
            fix="in Label Studio choose Export -> JSON and pass that file.",
        )
    for i, task in enumerate(tasks):
        where = _task_name(task, i)
        if not isinstance(task.get("data"), dict) or not isinstance(task.get("annotations", []), list):
            hint = " (this looks like JSON_MIN)" if "annotator" in task or "annotation_id" in task else ""
            what = "no data" if not isinstance(task.get("data"), dict) else "annotations that are not a list"
            raise InputError(
                f"{where} has {what}{hint}; not a Label Studio JSON export.",
                path=path,
                fix="in Label Studio choose Export -> JSON (the full format, not JSON_MIN).",
            )
        _need(task.get("drafts"), (list, type(None)), f"{where}: drafts", "a list", path)
        cid = task["data"].get("conversation_id")
        if isinstance(cid, bool) or not isinstance(cid, (str, int, type(None))):
            _wrong(f"{where}: data.conversation_id", cid, "a text", path)
        for ann in task.get("annotations") or []:
            _annotation(ann, where, path)
    return tasks


def _annotation(ann: Any, where: str, path: str | Path) -> None:
    _need(ann, dict, f"{where}: an annotation", "an object", path)
    where = f"{where}, annotation {ann.get('id', '?')}"
    aid = ann.get("id")
    if isinstance(aid, bool) or not isinstance(aid, (int, type(None))):
        _wrong(f"{where}: id", aid, "a number", path)
    _need(ann.get("was_cancelled"), (bool, type(None)), f"{where}: was_cancelled", "true or false", path)
    for stamp in ("updated_at", "created_at"):
        _need(ann.get(stamp), (str, type(None)), f"{where}: {stamp}", "a date text", path)
    _need(ann.get("completed_by"), (int, dict, type(None)), f"{where}: completed_by", "a user id or object", path)
    _need(ann.get("result", []), (list, type(None)), f"{where}: result", "a list", path)
    for result in ann.get("result") or []:
        _need(result, dict, f"{where}: a result", "an object", path)
        _need(result.get("from_name"), (str, type(None)), f"{where}: a result's from_name", "a text", path)
        _need(
            result.get("value", {}),
            (dict, type(None)),
            f"{where}: the value of {result.get('from_name')!r}",
            "an object",
            path,
        )
        choices = (result.get("value") or {}).get("choices")
        _need(choices, (list, type(None)), f"{where}: the choices of {result.get('from_name')!r}", "a list", path)


def _task_name(task: dict[str, Any], i: int) -> str:
    tid = task.get("id")
    return f"task {tid}" if isinstance(tid, int) and not isinstance(tid, bool) else f"task number {i + 1} in the list"


def _need(value: Any, kinds: type | tuple[type, ...], what: str, want: str, path: str | Path) -> None:
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        _wrong(what, value, want, path)


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)


def _wrong(what: str, value: Any, want: str, path: str | Path) -> None:
    shown = f"a JSON {_json_kind(value)}" if isinstance(value, (dict, list)) else f"{value!r}"[:40]
    raise InputError(f"{what} is {shown}, not {want}.", path=path, fix=FIX)


def _json_kind(value: Any) -> str:
    return "object" if isinstance(value, dict) else "list"
