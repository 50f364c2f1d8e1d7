"""Label Studio without a server: the labelling config, the tasks, and exports read back (the export shapes
are Label Studio 1.23's, as its server writes them: tests/labelling/test_label_studio_server.py checks the same
against a real one)."""

from __future__ import annotations

import json
import re
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from calibration.cli import main
from calibration.connectors.label_studio.export import label_studio_labels
from calibration.connectors.label_studio.tasks import label_config, make_tasks
from calibration.labelling.items import dataset_conversations
from rubric.errors import InputError
from rubric.schema import load_rubric, rubric_from_dict
from tests.labelling.ls_protocol import import_labels

TOKEN = "sekret-token-4242"


def test_the_config_asks_every_question_with_its_own_options():
    rubric = rubric_from_dict(
        {
            "name": "r",
            "target": "overall",
            "questions": [
                {
                    "id": "tone",
                    "text": 'Tone "right" & polite?',
                    "options": [{"value": 1, "label": "no"}, {"value": 2, "label": "yes"}],
                },
                {
                    "id": "overall",
                    "text": "Overall?",
                    "options": [{"value": v, "label": f"o{v}"} for v in (1, 2, 3, 4, 5)],
                },
            ],
        }
    )
    root = ET.fromstring(label_config(rubric))
    dialogue = root.find(".//HyperText")
    assert dialogue.get("value") == "$dialogue" and dialogue.get("inline") == "true"
    choices = {c.get("name"): c for c in root.iter("Choices")}
    assert list(choices) == ["tone", "overall"]
    assert [o.get("alias") for o in choices["tone"]] == [o.get("hotkey") for o in choices["tone"]] == ["1", "2"]
    assert [o.get("hotkey") for o in choices["overall"]] == ["q", "w", "e", "r", "t"]  # its own keys: a row below
    assert [o.get("value") for o in choices["overall"]] == [f"{v}: o{v}" for v in (1, 2, 3, 4, 5)]
    assert all(c.get("toName") == "dialogue" and c.get("choice") == "single-radio" for c in choices.values())
    assert 'Tone "right" & polite?' in [h.get("value") for h in root.iter("Header")]


def test_tasks_carry_the_conversation_so_far_and_a_pre_annotation(labelling_dir):
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    tasks = make_tasks([(cid, "2")], conversations, {(cid, "2"): {"scope": ("4", 0.8), "tone": ("3", 0.6)}})
    data = tasks[0]["data"]
    assert data["turn"] == 2 and [m["role"] for m in data["messages"]] == ["user", "assistant"] * 3
    assert data["messages"][-1]["content"] == conversations[cid].turns[2].assistant
    assert data["dialogue"].count('class="rr-review"') == 1 and "1 earlier exchange (click to show)" in data["dialogue"]
    guess = tasks[0]["predictions"][0]
    assert guess["score"] == pytest.approx(0.7) and guess["result"][0]["value"] == {"choices": ["4"]}


def test_export_to_files_for_all_turns_a_sheet_or_a_sample_plan(labelling_dir, tmp_path, capsys):
    out = tmp_path / "ls"
    assert main(["label-studio", f"data={labelling_dir}", f"out={out}"]) == 0
    tasks = json.loads((out / "tasks.json").read_text())
    assert len(tasks) == 17 and ET.fromstring((out / "label_config.xml").read_text()).tag == "View"
    assert str(out / "tasks.json") in capsys.readouterr().out
    # an estimate sheet: one row per turn and question, judge_id empty
    cids = sorted({t["data"]["conversation_id"] for t in tasks})
    sheet = pd.DataFrame(
        [(cids[0], t, "", q, "") for t in (1, 0, 1) for q in ("scope", "overall")],
        columns=["conversation_id", "turn", "judge_id", "question_id", "answer"],
    )
    sheet.to_csv(tmp_path / "estimate.csv", index=False)
    assert main(["label-studio", f"data={labelling_dir}", f"select={tmp_path / 'estimate.csv'}", f"out={out}"]) == 0
    picked = [(t["data"]["conversation_id"], t["data"]["turn"]) for t in json.loads((out / "tasks.json").read_text())]
    assert picked == [(cids[0], 1), (cids[0], 0)]
    plan = pd.DataFrame({"conversation_id": cids, "inclusion_probability": [0.5] * 3, "sampled": [1, 0, 1]})
    plan.to_csv(tmp_path / "sample_plan.csv", index=False)
    assert main(["label-studio", f"data={labelling_dir}", f"select={tmp_path / 'sample_plan.csv'}", f"out={out}"]) == 0
    picked = {t["data"]["conversation_id"] for t in json.loads((out / "tasks.json").read_text())}
    assert picked == {cids[0], cids[2]}


def test_the_calibrated_prediction_rides_along_as_a_pre_annotation(labelling_dir, tmp_path):
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    rows = [
        (cid, "1", "", "scope", 0.1, 0.2, 0.3, 0.4),
        (cid, "1", "", "overall", 0.5, 0.3, 0.1, 0.1),
        (cid, "1", "J1", "scope", 0.9, 0.1, 0.0, 0.0),
    ]  # a judge's row: not the population's
    pd.DataFrame(
        rows, columns=["conversation_id", "turn", "judge_id", "question_id", "p_1", "p_2", "p_3", "p_4"]
    ).to_csv(tmp_path / "predictions.csv", index=False)
    out = tmp_path / "ls"
    assert (
        main(["label-studio", f"data={labelling_dir}", f"out={out}", f"predictions={tmp_path / 'predictions.csv'}"])
        == 0
    )
    tasks = {(t["data"]["conversation_id"], t["data"]["turn"]): t for t in json.loads((out / "tasks.json").read_text())}
    guess = tasks[(cid, 1)]["predictions"][0]
    assert {r["from_name"]: r["value"]["choices"] for r in guess["result"]} == {"scope": ["4"], "overall": ["1"]}
    assert guess["score"] == pytest.approx(0.45) and "predictions" not in tasks[(cid, 0)]


def _annotation(aid, who, answers, *, cancelled=False, updated="2026-01-01T10:00:00Z"):
    return {
        "id": aid,
        "completed_by": who,
        "was_cancelled": cancelled,
        "updated_at": updated,
        "result": [
            {"from_name": q, "to_name": "dialogue", "type": "choices", "value": {"choices": [a]}}
            for q, a in answers.items()
        ],
    }


def _export(labelling_dir, annotations_of):
    """A JSON export as Label Studio writes it: tasks made by make_tasks, with ids and annotations."""
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    tasks = make_tasks([(cid, "0"), (cid, "1")], conversations)
    for i, task in enumerate(tasks):
        task.update(id=10 + i, drafts=[], annotations=annotations_of(i))
    return cid, tasks


def test_export_reading_skips_cancelled_keeps_the_latest_and_leaves_skipped_questions_missing(labelling_dir):
    a = {"id": 1, "email": "a@x.org"}
    b = {"id": 2, "email": "b@x.org"}
    cid, tasks = _export(
        labelling_dir,
        lambda i: (
            [
                _annotation(1, a, {"scope": "4", "overall": "3"}, updated="2026-01-01T10:00:00Z"),
                _annotation(2, a, {"scope": "2"}, updated="2026-01-02T10:00:00Z"),  # later: replaces the first
                _annotation(3, b, {"tone": "1"}, cancelled=True),
            ]
            if i == 0
            else [_annotation(4, b, {"overall": "2.0"})]
        ),
    )
    labels, counts = label_studio_labels(
        tasks,
        load_rubric(labelling_dir),
        dataset_conversations(labelling_dir),
        path="export.json",
        judge_map={"b@x.org": "reviewer-b"},
    )
    assert sorted(map(tuple, labels.to_numpy())) == [
        (cid, "0", "a@x.org", "scope", "2"),
        (cid, "1", "reviewer-b", "overall", "2"),
    ]
    assert counts["cancelled_skipped"] == 1 and counts["superseded_by_a_later_annotation"] == 1
    assert counts["questions_left_unanswered"] == 8 and counts["annotations"] == 2
    tasks[1]["annotations"] = []
    tasks[1]["data"]["messages"][-1]["content"] = "changed since, but nobody answered it"
    labels, counts = label_studio_labels(
        tasks, load_rubric(labelling_dir), dataset_conversations(labelling_dir), path="export.json"
    )
    assert len(labels) == 1 and counts["tasks"] == 2


@pytest.mark.parametrize(
    "change,message",
    [
        (
            lambda t: t[0]["annotations"][0]["result"][0]["value"].update(choices=["7"]),
            r"1 answer\(s\) not an option of the rubric: task 10 \(a@x.org\): question 'scope' answered \['7'\], not one of 1, 2, 3 or 4",
        ),
        (
            lambda t: t[0]["annotations"][0]["result"][0].update(from_name="politeness"),
            r"task 10: question 'politeness' is not in rubric.yaml .* another rubric",
        ),
        (
            lambda t: t[1]["data"]["messages"][-1].update(content="edited reply"),
            r"task 11 \(conversation .*, turn 1\) no longer matches conversations.jsonl \(message 3 differs\)",
        ),
        (
            lambda t: t[0]["annotations"][0].update(completed_by=5),
            r"task 10, annotation 1: the export names its annotator by user id 5 only",
        ),
        (lambda t: t[0]["data"].pop("messages"), r"task 10 has no messages in its data"),
        (lambda t: t[0]["data"].update(turn="first"), r"task 10 has the turn 'first', not a turn number"),
        (
            lambda t: [a.update(was_cancelled=True) for task in t for a in task["annotations"]],
            r"no answers to import \(2 tasks, 2 cancelled annotations\)",
        ),
    ],
)
def test_bad_exports_are_one_clear_error(labelling_dir, change, message):
    cid, tasks = _export(labelling_dir, lambda i: [_annotation(1 + i, {"id": 1, "email": "a@x.org"}, {"scope": "4"})])
    change(tasks)
    with pytest.raises(InputError, match=message) as info:
        label_studio_labels(tasks, load_rubric(labelling_dir), dataset_conversations(labelling_dir), path="e.json")
    assert "Fix:" in info.value.one_line()


@pytest.mark.parametrize(
    "content,message",
    [
        ("conversation_id,turn\nc,0\n", r"not JSON .* not a Label Studio JSON export"),
        ('{"detail": "x"}', r"not a Label Studio JSON export \(a list of tasks\)"),
        ('[{"id": 1, "annotator": 2, "annotation_id": 3, "scope": "4"}]', r"looks like JSON_MIN"),
    ],
)
def test_a_file_that_is_not_a_label_studio_json_export(labelling_dir, tmp_path, capsys, content, message):
    (tmp_path / "export.json").write_text(content)
    code = import_labels(labelling_dir, tmp_path / "o", f"export={tmp_path / 'export.json'}")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert re.search(message, err), err


def test_url_without_a_token_stops_before_any_work(labelling_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    assert main(["label-studio", f"data={labelling_dir}", "url=http://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert "needs Label Studio's API token in the environment variable LABEL_STUDIO_API_KEY" in err
    assert import_labels(labelling_dir, tmp_path / "o", "url=http://127.0.0.1:9", "project=1") == 2
    assert "LABEL_STUDIO_API_KEY" in capsys.readouterr().err
    assert main(["label-studio", f"data={labelling_dir}", "url=http://127.0.0.1:9", "token_env=my token"]) == 2
    assert "token_env='my token' is not the name of an environment variable" in capsys.readouterr().err


class _Echo(BaseHTTPRequestHandler):
    """A server that refuses every request and echoes the Authorization header back, as a careless proxy
    might: the client must not pass the token on to what it prints."""

    def _reply(self):
        body = json.dumps({"detail": f"bad credentials {self.headers.get('Authorization')}"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _reply

    def log_message(self, *args):
        pass


def test_the_token_is_never_printed_or_written(labelling_dir, tmp_path, monkeypatch, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("LS_TOKEN", TOKEN)
    try:
        runs = [
            ["label-studio", f"data={labelling_dir}", f"url={url}", "token_env=LS_TOKEN", f"out={tmp_path / 'ls'}"],
            [
                "import",
                "source=label-studio",
                f"data={labelling_dir}",
                f"url={url}",
                "project=3",
                "token_env=LS_TOKEN",
                f"out={tmp_path / 'o'}",
            ],
        ]
        for argv in runs:
            assert main(argv) == 2
            captured = capsys.readouterr()
            assert "refused the API token" in captured.err and "***" in captured.err
            assert TOKEN not in captured.out + captured.err
    finally:
        server.shutdown()
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert (tmp_path / "ls" / "tasks.json") in written
    assert not [p for p in written if TOKEN.encode() in p.read_bytes()]


@pytest.mark.parametrize(
    "argv,message",
    [
        (["label-studio", "data=d", "url=ftp://host"], r"url='ftp://host' is not an http\(s\) URL"),
        (["label-studio", "data=d", "url=http://host", "project=0"], r"project=0 is out of range"),
        (["label-studio", "data=d", "out=o", "annotations_per_task=0"], r"annotations_per_task=0 is out of range"),
        (["label-studio", "data=d", "out=o", "timeout=0"], r"timeout=0 is out of range"),
        (["import", "source=labelstudio", "out=o"], r"source='labelstudio' is not one of the choices"),
        (
            ["import", "export=e.json", "out=o"],
            r"source=llm-rubric needs evaluations=.*source=label-studio or source=sheet",
        ),
        (["import", "source=label-studio", "out=o"], r"source=label-studio needs data="),
    ],
)
def test_bad_settings_stop_before_any_work(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert re.search(message, capsys.readouterr().err)


def test_no_place_for_the_tasks(labelling_dir, capsys):
    assert main(["label-studio", f"data={labelling_dir}"]) == 2
    assert "nowhere to put the tasks. Fix: pass out=FOLDER" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        (
            "",
            r"sheet row 3: the turn of conversation '[^']+' is blank, and this dataset is labelled per turn\. "
            r"Fix: write the turn to label \(0 is the first assistant reply\) or delete the row\.",
        ),
        ("9", r"sheet row 3: conversation '[^']+' has no turn '9' \(it has turns 0-\d+\)"),
        ("two", r"sheet row 3: conversation '[^']+' has no turn 'two'"),
    ],
)
def test_a_blank_or_unknown_turn_in_the_selection_is_one_line(labelling_dir, tmp_path, capsys, turn, message):
    """A blank turn in a per-turn dataset used to become a task for the whole conversation."""
    cid = next(iter(dataset_conversations(labelling_dir)))
    sheet = tmp_path / "select.csv"
    pd.DataFrame({"conversation_id": [cid, cid], "turn": ["0", turn]}).to_csv(sheet, index=False)
    out = tmp_path / "ls"
    assert main(["label-studio", f"data={labelling_dir}", f"select={sheet}", f"out={out}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"role-rubric label-studio: error: {sheet}: "), err
    assert re.search(message, err), err
    assert not out.exists()
