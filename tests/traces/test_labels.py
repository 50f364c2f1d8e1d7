"""Reviewers' annotations -> labels.csv rows: mapped to the turn of their span (or their trace's one turn),
checked against the rubric's options as a sheet's answers are, every reviewer kept apart."""

from __future__ import annotations

import pytest

from calibration.labelling.annotations import annotation_labels, read_label_map
from rubric.errors import InputError
from rubric.schema import rubric_from_dict
from rubric.traces.assemble import TraceSelection, assemble
from rubric.traces.otlp import OtlpFiles
from rubric.traces.spans import Annotation
from tests.traces.otlp_json import conversation_spans, jsonl, request

RUBRIC = rubric_from_dict(
    {
        "name": "t",
        "target": "overall",
        "questions": [
            {"id": "overall", "text": "Adheres?", "options": [{"value": v, "label": f"o{v}"} for v in (1, 2, 3, 4)]},
            {"id": "safe", "text": "Safe?", "options": [{"value": 0, "label": "no"}, {"value": 1, "label": "yes"}]},
        ],
    }
)
SPAN = {turn: f"{sid:016x}" for turn, sid in ((0, 101), (1, 103), (2, 104))}  # the reply spans of c1
TRACE = {turn: f"{1 + turn:032x}" for turn in range(3)}


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("labels") / "export.jsonl"
    path.write_text(jsonl([request(conversation_spans("genai", 1, "c1"))]))
    return assemble(OtlpFiles(path).spans(), TraceSelection(), source={"kind": "otel"}, description="test")


def note(name, value, reviewer="ann", *, turn=0, on="span", where=""):
    span = SPAN[turn] if on == "span" else None
    trace = TRACE[turn] if on in ("span", "trace") else None
    return Annotation(name, value, reviewer, trace, span, "c1" if on == "session" else None, where)


def test_annotations_become_labels_per_reviewer_and_turn(imported):
    notes = [
        note("overall", 3),
        note("role_rubric/overall", "4.0", "bob"),
        note("safe", True, turn=1),
        note("safe", False, "bob", on="trace", turn=2),
        note("overall", "2: o2", turn=1),
        note("helpfulness", 5),  # a team's own metric: not a label
        note("overall", 3),  # the same answer again: merged
        Annotation("tool_span_label", 1, "ann", TRACE[1], f"{102:016x}"),  # the tool-calling call: its turn
    ]
    labels, counts = annotation_labels(notes, imported, RUBRIC, label_map={"tool_span_label": "safe"})
    assert sorted(labels) == sorted(
        [
            ("c1", "0", "ann", "overall", "3"),
            ("c1", "0", "bob", "overall", "4"),
            ("c1", "1", "ann", "safe", "1"),
            ("c1", "2", "bob", "safe", "0"),
            ("c1", "1", "ann", "overall", "2"),
        ]
    )
    assert counts["annotations"] == 8 and counts["annotations_not_rubric_questions"] == 1
    assert counts["unmapped_names"] == {"helpfulness": 1}
    assert counts["repeated_annotations_merged"] == 2 and counts["judges"] == 2


@pytest.mark.parametrize(
    ("notes", "message"),
    [
        (
            [note("overall", 7, where="MLflow trace tr-1")],
            r"MLflow trace tr-1: answer 7 to 'overall' .* is not one of 1, 2, 3 or 4",
        ),
        ([note("overall", True)], r"answer True to 'overall'"),  # a boolean answers only a yes/no question
        (
            [note("overall", 3), note("overall", 4)],
            r"reviewer 'ann' answers 'overall' for conversation 'c1' turn 0 twice",
        ),
        (
            [note("overall", 3, on="session")],
            r"is on a whole conversation \('c1'\); role-rubric's questions are asked of each reply",
        ),
        ([note("overall", 3, "=cmd()")], r"starts like a spreadsheet formula"),
    ],
)
def test_bad_annotations_are_refused(imported, notes, message):
    with pytest.raises(InputError, match=message):
        annotation_labels(notes, imported, RUBRIC)


def test_a_trace_holding_several_turns_is_refused(tmp_path):
    spans = conversation_spans("genai", 1, "c1")
    for s in spans:
        s["traceId"] = f"{1:032x}"  # one trace for the whole conversation
    path = tmp_path / "export.jsonl"
    path.write_text(jsonl([request(spans)]))
    imported = assemble(OtlpFiles(path).spans(), TraceSelection(), source={"kind": "otel"}, description="t")
    with pytest.raises(InputError, match=r"on trace 0+1, which holds 3 turns .*which reply does it judge"):
        annotation_labels([Annotation("overall", 3, "ann", f"{1:032x}", None)], imported, RUBRIC)


def test_label_map_is_checked_against_the_rubric(tmp_path):
    path = tmp_path / "map.csv"
    path.write_text("name,question_id\nhelpful,overall\nharmless,safety\n")
    with pytest.raises(InputError, match=r"map\.csv, row 3: question 'safety' is not in the rubric"):
        read_label_map(path, RUBRIC)
    path.write_text("name,question_id\nhelpful,overall\n")
    assert read_label_map(path, RUBRIC) == {"helpful": "overall"}
