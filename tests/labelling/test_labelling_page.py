"""The labelling config generated from the bundled rubric.yaml, read as Label Studio reads it (fast, no server):
the conversation as HTML (no Paragraphs: no timestamps, region buttons or author filter), one single-choice
block per question, and hotkeys that are each one option's alone, laid out by keyboard row.

How that config looks and behaves on Label Studio's own page (reply and questions on screen at 1440x900, the
keys pressed, Skip) is checked in a real browser against a real server: test_label_studio_page.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path

from calibration.connectors.label_studio.tasks import label_config, option_hotkeys
from rubric.schema import load_rubric, rubric_from_dict
from tests.labelling.test_label_studio_page import ten_message_task

ROOT = Path(__file__).resolve().parents[2]


def test_the_config_shows_html_and_gives_every_option_its_own_key():
    rubric = load_rubric(ROOT / "data" / "role_adherence" / "rubric.yaml")
    root = ET.fromstring(label_config(rubric))
    assert root.find(".//Paragraphs") is None  # its timestamps, region button and author filter
    assert root.find(".//HyperText").get("value") == "$dialogue"
    assert root.find(".//Style") is not None and root.find(".//View[@className='rr-questions']") is not None
    keys = [[c.get("hotkey") for c in choices] for choices in root.iter("Choices")]
    assert keys == [
        ["1", "2", "3", "4"],
        ["q", "w", "e", "r"],
        ["a", "s", "d", "f"],
        ["z", "x", "c", "v"],
        ["shift+1", "shift+2", "shift+3", "shift+4"],
    ]
    assert all(len(set(k)) == len(k) for k in [sum(keys, [])])  # Label Studio fires a key in every question
    assert [[c.get("alias") for c in choices] for choices in root.iter("Choices")] == [["1", "2", "3", "4"]] * 5
    task, reply = ten_message_task()
    assert escape(reply) in task["data"]["dialogue"] and "<script" not in task["data"]["dialogue"]


def test_keys_run_out_cleanly_on_a_large_rubric():
    questions = [
        {"id": f"q{k}", "text": f"Q{k}?", "options": [{"value": v, "label": f"o{v}"} for v in range(1, 12)]}
        for k in range(9)
    ]
    rubric = rubric_from_dict({"name": "r", "target": "q0", "questions": questions})
    keys = option_hotkeys(rubric)
    assert keys["q0"] == [*"1234567890", None]  # an 11th option has no key of its row
    assert keys["q1"][6] is None  # `u` is Label Studio's own key (unselect region)
    assert keys["q4"][:3] == ["shift+1", "shift+2", "shift+3"] and keys["q8"] == [None] * 11
    given = [k for ks in keys.values() for k in ks if k]
    assert len(given) == len(set(given))
