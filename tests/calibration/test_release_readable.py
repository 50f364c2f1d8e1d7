"""`estimate`'s rows name roles by a short id and say "all labelled" rather than an infinite count."""

from __future__ import annotations

from calibration.release.roles import role_key
from calibration.release.table import format_table
from rubric.conversations import Conversation

LONG = "You are Ava, the airline's booking assistant. Never discuss refunds before checking the fare rules."


def _conv(role: str, record: dict | None = None) -> Conversation:
    return Conversation("c1", role, (), record=record)


def test_role_rows_use_the_role_field_then_short_prompts_then_a_hash():
    assert role_key(_conv(LONG, {"role": "airline"})) == "airline"
    assert role_key(_conv("tutor")) == "tutor"
    key = role_key(_conv(LONG))
    assert key.startswith("You are Ava, the ...") and len(key) < 50 and "#" in key
    assert key != role_key(_conv(LONG + " Also be brief."))  # prompts that start alike stay apart


def test_a_fully_labelled_scope_reads_all_labelled():
    block = {
        "calibrator": 0.7,
        "humans": {"estimate": 0.7, "low": 0.7, "high": 0.7},
        "ppi": {"estimate": 0.7, "low": 0.7, "high": 0.7},
        "n_labelled_conversations": 5,
        "n_conversations": 5,
        "effective_labels": float("inf"),
    }
    result = {
        "alpha": 0.1,
        "target": "q",
        "adheres_at": 3,
        "sampling": "uniform",
        "note": "",
        "rate": block,
        "mean": block,
        "by_role": {},
        "by_question": {},
    }
    table = format_table(result)
    assert "all labelled" in table and " inf" not in table
    assert table.splitlines()[0].split() == [
        "scope",
        "quantity",
        "calibrator*",
        "humans",
        "90%",
        "CI",
        "ppi",
        "90%",
        "CI",
        "labelled/conv",
        "eff.",
        "labels",
    ]
