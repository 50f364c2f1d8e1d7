"""A Label Studio export with values of the wrong JSON type, a task without data or one turn held by two
answered tasks is one line naming the task, at import, the same whether the export is a file (export=) or
pulled from a server (url= project=, against a server speaking the protocol); nothing is written."""

from __future__ import annotations

import copy
import json
import re

import pytest

from calibration.cli import main
from tests.labelling.ls_protocol import LEGACY, LabelStudioLike, annotated_tasks, import_labels, serve


def _ann(tasks, i=0):
    return tasks[i]["annotations"][0]


CASES = [
    (
        "annotations-object",
        lambda t: t[0].update(annotations={"id": 1}),
        r"task 10 has annotations that are not a list",
    ),
    (
        "annotation-text",
        lambda t: t[0].update(annotations=["scope=3"]),
        r"task 10: an annotation is 'scope=3', not an object",
    ),
    ("result-text", lambda t: _ann(t).update(result="3"), r"task 10, annotation 1: result is '3', not a list"),
    (
        "result-item-list",
        lambda t: _ann(t).update(result=[["scope", "3"]]),
        r"task 10, annotation 1: a result is a JSON list, not an object",
    ),
    (
        "value-list",
        lambda t: _ann(t)["result"][0].update(value=["3"]),
        r"the value of 'scope' is a JSON list, not an object",
    ),
    (
        "choices-text",
        lambda t: _ann(t)["result"][0]["value"].update(choices="3"),
        r"the choices of 'scope' is '3', not a list",
    ),
    ("drafts-number", lambda t: t[1].update(drafts=2), r"task 11: drafts is 2, not a list"),
    (
        "cancelled-text",
        lambda t: _ann(t, 1).update(was_cancelled="no"),
        r"task 11, annotation 2: was_cancelled is 'no', not true or false",
    ),
    ("id-text", lambda t: _ann(t).update(id="first"), r"task 10, annotation first: id is 'first', not a number"),
    (
        "completed-by-list",
        lambda t: _ann(t).update(completed_by=[1]),
        r"completed_by is a JSON list, not a user id or object",
    ),
    (
        "updated-at-number",
        lambda t: _ann(t).update(updated_at=1767261600),
        r"updated_at is 1767261600, not a date text",
    ),
    ("no-data", lambda t: t[1].pop("data"), r"task 11 has no data; not a Label Studio JSON export"),
    (
        "conversation-id-object",
        lambda t: t[0]["data"].update(conversation_id={"id": "c"}),
        r"task 10: data.conversation_id is a JSON object, not a text",
    ),
    (
        "one-turn-twice",
        lambda t: t.append({**copy.deepcopy(t[0]), "id": 12}),
        r"tasks 10 and 12 are both conversation '.*' turn 0, and both have answers",
    ),
]


@pytest.mark.parametrize("route", ["file", "url"])
@pytest.mark.parametrize("name,change,message", CASES, ids=[c[0] for c in CASES])
def test_a_bad_export_is_one_line_naming_the_task(
    labelling_dir, tmp_path, monkeypatch, capsys, route, name, change, message
):
    tasks = annotated_tasks(labelling_dir)
    change(tasks)
    out = tmp_path / "o"
    argv = ["import", "source=label-studio", f"data={labelling_dir}", f"out={out}"]
    if route == "file":
        (tmp_path / "export.json").write_text(json.dumps(tasks))
        code = main([*argv, f"export={tmp_path / 'export.json'}"])
    else:
        monkeypatch.setenv("LABEL_STUDIO_API_KEY", LEGACY)
        server = serve(LabelStudioLike(tasks))
        try:
            code = main([*argv, f"url={server.url}", "project=1"])
        finally:
            server.shutdown()
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert re.search(message, err) and "Fix:" in err, err
    where = str(tmp_path / "export.json") if route == "file" else "project 1 at http://127.0.0.1:"
    assert where in err
    assert not out.exists()


def test_the_good_export_imports_by_both_routes(labelling_dir, tmp_path, monkeypatch):
    tasks = annotated_tasks(labelling_dir)
    tasks.append({**copy.deepcopy(tasks[0]), "id": 12, "annotations": []})  # one turn twice, answered once: fine
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    argv = ["import", "source=label-studio", f"data={labelling_dir}"]
    assert (
        main(
            [
                *argv,
                f"export={tmp_path / 'export.json'}",
                "judge_map=" + str(_judges(tmp_path)),
                f"out={tmp_path / 'a'}",
            ]
        )
        == 0
    )
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", LEGACY)
    server = serve(LabelStudioLike(tasks))
    try:
        assert main([*argv, f"url={server.url}", "project=1", f"out={tmp_path / 'b'}"]) == 0
    finally:
        server.shutdown()
    a = (tmp_path / "a" / "labels.csv").read_text().replace("reviewer-a", "a@x.org")
    assert a == (tmp_path / "b" / "labels.csv").read_text() and a.count("\n") == 3


def _judges(tmp_path):
    path = tmp_path / "judges.csv"
    path.write_text("annotator,judge_id\n1,reviewer-a\n")
    return path


@pytest.mark.parametrize("who", ['=HYPERLINK("http://x")', "+1", "-rm", "@SUM(A1)", "\tx"])
def test_a_reviewer_id_that_starts_like_a_formula_is_refused(labelling_dir, tmp_path, capsys, who):
    tasks = annotated_tasks(labelling_dir)
    for task in tasks:
        task["annotations"][0]["completed_by"] = {"id": 1, "email": who}
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    assert import_labels(labelling_dir, tmp_path / "o", f"export={tmp_path / 'export.json'}") == 2
    err = capsys.readouterr().err
    assert "task 10, annotation 1: the reviewer id" in err and "starts like a spreadsheet formula" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("users", [{"detail": "x"}, "a@x.org", [{"id": "1", "email": "a@x.org"}]])
def test_a_server_reply_of_the_wrong_shape_is_one_line(labelling_dir, tmp_path, monkeypatch, capsys, users):
    tasks = annotated_tasks(labelling_dir)
    for task in tasks:
        task["annotations"][0]["completed_by"] = 1  # named by id only: the users list tells the email
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", LEGACY)
    server = serve(LabelStudioLike(tasks))
    server.users = users
    try:
        code = import_labels(labelling_dir, tmp_path / "o", f"url={server.url}", "project=1")
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert ("sent no list for users" in err) or ("names its annotator by user id 1 only" in err), err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("content", [b"", b"\xff\xfe", b"annotator;judge_id\n1;A\n"])
def test_a_judge_map_that_cannot_be_read_is_one_line(labelling_dir, tmp_path, capsys, content):
    (tmp_path / "export.json").write_text(json.dumps(annotated_tasks(labelling_dir)))
    (tmp_path / "judges.csv").write_bytes(content)
    assert (
        import_labels(
            labelling_dir, tmp_path / "o", f"export={tmp_path / 'export.json'}", f"judge_map={tmp_path / 'judges.csv'}"
        )
        == 2
    )
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "judges.csv") in err and "Fix:" in err, err
