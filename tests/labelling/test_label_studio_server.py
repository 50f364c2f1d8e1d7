"""The Label Studio round trip against a real server: tasks pushed, three reviewers annotate through the API
(a bad answer, a cancelled annotation, an update, a superseding annotation and a partial one among them),
the labels pulled and imported, compared exactly with what was posted, then trained on.

Marked `labelstudio` (a server start takes ~1 min): `.ci/run` installs Label Studio into its own environment
and runs these; elsewhere `pytest -m labelstudio tests/labelling` runs them where ROLE_RUBRIC_LABEL_STUDIO (or
.venv-label-studio) has it, and they skip with one reason where it cannot start.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calibration.cli import main
from tests.labelling.conftest import TOKEN, make_labelling_dataset
from tests.labelling.ls_protocol import import_labels

pytestmark = pytest.mark.labelstudio

QUESTIONS = ("scope", "tone", "prohibited", "next_step", "overall")
REVIEWERS = ("rev.a@example.com", "rev.b@example.com", "rev.c@example.com")


def _result(answers: dict[str, str]) -> list[dict]:
    return [
        {"from_name": q, "to_name": "dialogue", "type": "choices", "value": {"choices": [a]}}
        for q, a in answers.items()
    ]


def _project_id(server, title: str) -> int:
    reply = server.call("GET", "/api/projects?page_size=1000")
    projects = reply["results"] if isinstance(reply, dict) else reply
    return max(p["id"] for p in projects if p["title"] == title)


def _labels(path) -> set[tuple[str, str, str, str, str]]:
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return set(map(tuple, frame[["conversation_id", "turn", "judge_id", "question_id", "answer"]].to_numpy()))


def _no_token_in(root, token: str, *texts: str) -> None:
    for text in texts:
        assert token not in text
    for path in root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), f"the API token was written into {path}"


def test_round_trip_through_a_real_label_studio(label_studio, tmp_path, monkeypatch, capsys):
    server = label_studio
    data = make_labelling_dataset(tmp_path / "data")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", TOKEN)
    rng = np.random.default_rng(7)
    seen: list[str] = []  # everything the commands printed, checked for the token at the end

    def read():
        captured = capsys.readouterr()
        seen.append(captured.out + captured.err)
        return captured

    # 1. the tasks and the labelling config go into a new project
    title = "round trip"
    assert main(["label-studio", f"data={data}", f"url={server.url}", f"title={title}", "annotations_per_task=3"]) == 0
    project = _project_id(server, title)
    assert server.call("GET", f"/api/projects/{project}")["maximum_annotations"] == 3
    tasks = sorted(server.call("GET", f"/api/tasks?project={project}&page_size=1000")["tasks"], key=lambda t: t["id"])
    assert len(tasks) == 17 and tasks[0]["data"]["messages"][-1]["role"] == "assistant"
    assert main(["label-studio", f"data={data}", f"url={server.url}", f"project={project}"]) == 0  # nothing twice
    assert server.call("GET", f"/api/tasks?project={project}&page_size=1000")["total"] == 17

    # 2. three reviewers, and what each of them answers
    users = {
        email: server.call(
            "POST", "/api/users/", {"email": email, "username": email.split("@")[0], "password": "reviewer-pass-1"}
        )["id"]
        for email in REVIEWERS
    }
    expected: dict[tuple[str, str, str, str], str] = {}

    def annotate(task, email, answers, *, cancelled=False, record=True):
        ann = server.call(
            "POST",
            f"/api/tasks/{task['id']}/annotations",
            {"result": _result(answers), "completed_by": users[email], "was_cancelled": cancelled},
        )
        if record:
            key = (task["data"]["conversation_id"], str(task["data"]["turn"]), email)
            for q in QUESTIONS:
                expected.pop((*key, q), None)
            expected.update({(*key, q): a for q, a in answers.items()})
        return ann

    def full():
        return {q: str(rng.integers(1, 5)) for q in QUESTIONS}

    six = tasks[:6]
    for task in six:
        annotate(task, REVIEWERS[0], full())
    annotate(six[0], REVIEWERS[1], {"scope": "4", "overall": "3"})  # partial: three questions stay missing
    annotate(six[1], REVIEWERS[1], full(), cancelled=True, record=False)  # skipped by the reviewer
    for task in six[2:]:
        annotate(task, REVIEWERS[1], full())
    first = annotate(six[0], REVIEWERS[2], full())
    bad = annotate(six[1], REVIEWERS[2], {**full(), "tone": "7"}, record=False)  # the server takes it
    annotate(six[2], REVIEWERS[2], full(), record=False)
    annotate(six[2], REVIEWERS[2], full())  # a later annotation of the same task replaces the earlier one
    for task in six[3:]:
        annotate(task, REVIEWERS[2], full())
    updated = full()  # the reviewer changes their answers
    server.call("PATCH", f"/api/annotations/{first['id']}", {"result": _result(updated)})
    expected.update({(six[0]["data"]["conversation_id"], "0", REVIEWERS[2], q): a for q, a in updated.items()})

    # 3. the bad answer stops the import, naming the task and the options
    out = tmp_path / "labelled"
    pull = ["import", "source=label-studio", f"data={data}", f"url={server.url}", f"project={project}", f"out={out}"]
    assert main(pull) == 2
    err = read().err
    assert f"task {six[1]['id']} ({REVIEWERS[2]}): question 'tone' answered ['7'], not one of 1, 2, 3 or 4" in err
    assert err.count("\n") == 1

    # 4. corrected in Label Studio: the labels come back exactly as posted
    fixed = {**{r["from_name"]: r["value"]["choices"][0] for r in bad["result"]}, "tone": "2"}
    server.call("PATCH", f"/api/annotations/{bad['id']}", {"result": _result(fixed)})
    expected.update(
        {(six[1]["data"]["conversation_id"], str(six[1]["data"]["turn"]), REVIEWERS[2], q): a for q, a in fixed.items()}
    )
    assert main(pull) == 0
    printed = read()
    want = {(*k, v) for k, v in expected.items()}
    assert _labels(out / "labels.csv") == want and len(want) == 6 * 5 + 2 + 4 * 5 + 6 * 5
    assert "cancelled_skipped=1" in printed.out and "superseded_by_a_later_annotation=1" in printed.out
    assert "questions_left_unanswered=3" in printed.out and str(out / "labels.csv") in printed.out

    # 5. the same from export files: the saved pull, and Label Studio's own export (user ids only)
    again = tmp_path / "again"
    assert import_labels(data, again, f"export={out / 'label-studio-export.json'}") == 0
    assert _labels(again / "labels.csv") == want
    raw = tmp_path / "export.json"
    raw.write_text(json.dumps(server.call("GET", f"/api/projects/{project}/export?exportType=JSON")))
    assert import_labels(data, tmp_path / "ids", f"export={raw}") == 2
    assert "names its annotator by user id" in read().err
    names = tmp_path / "judges.csv"
    pd.DataFrame({"annotator": [str(users[e]) for e in REVIEWERS], "judge_id": ["A", "B", "C"]}).to_csv(
        names, index=False
    )
    assert import_labels(data, tmp_path / "mapped", f"export={raw}", f"judge_map={names}") == 0
    renamed = {(c, t, "ABC"[REVIEWERS.index(j)], q, a) for c, t, j, q, a in want}
    assert _labels(tmp_path / "mapped" / "labels.csv") == renamed

    # 5b. a personal access token (a JWT refresh token) works as well as the legacy token
    pat = server.call("POST", "/api/token/", {})["token"]
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", pat)
    assert main([*pull[:-1], f"out={tmp_path / 'pat'}"]) == 0
    assert _labels(tmp_path / "pat" / "labels.csv") == want

    # 6. train on them
    model = tmp_path / "model"
    assert (
        main(
            [
                "train",
                f"data={out}",
                f"out={model}",
                "train.ensemble=1",
                "train.pretrain_steps=20",
                "train.finetune_steps=20",
            ]
        )
        == 0
    )
    assert set(json.loads((model / "model.json").read_text())["judges"]) == set(REVIEWERS)

    read()
    _no_token_in(tmp_path, TOKEN, *seen)
    _no_token_in(tmp_path, pat, *seen)


def test_a_project_with_another_rubric_is_refused(label_studio, tmp_path, monkeypatch, capsys):
    server = label_studio
    data = make_labelling_dataset(tmp_path / "data")
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", TOKEN)
    other = tmp_path / "other"
    make_labelling_dataset(other)
    (other / "rubric.yaml").write_text((other / "rubric.yaml").read_text().replace("id: tone", "id: manner"))
    assert main(["label-studio", f"data={other}", f"url={server.url}", "title=other rubric"]) == 0
    project = _project_id(server, "other rubric")
    task = server.call("GET", f"/api/tasks?project={project}&page_size=1")["tasks"][0]
    server.call("POST", f"/api/tasks/{task['id']}/annotations", {"result": _result({"manner": "3"})})
    capsys.readouterr()
    assert main(["label-studio", f"data={data}", f"url={server.url}", f"project={project}"]) == 2
    assert "asks other questions or options" in capsys.readouterr().err
    assert import_labels(data, tmp_path / "o", f"url={server.url}", f"project={project}") == 2
    err = capsys.readouterr().err
    assert "question 'manner' is not in rubric.yaml" in err and "Fix:" in err
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", "not-the-token")
    assert import_labels(data, tmp_path / "o", f"url={server.url}", f"project={project}") == 2
    assert "refused the API token" in capsys.readouterr().err
