"""The labelling page a reviewer sees, in headless Chromium at 1440x900: the reply under review highlighted
and, with every question, visible without scrolling on a 10-message task; no timestamps, region or author
controls; each option's hotkey its value.

No Label Studio server runs here, so the page is the config's HTML equivalent, made below from the config
Label Studio reads (label_config.xml) and a task (tasks.json): each <View> is a <div> with the config's
style, <Header> a heading, <Text> the task's text, <HyperText inline> the task's HTML, <Choices> a list of
radio buttons captioned as Label Studio captions them, with the hotkey Label Studio shows beside each. It
checks the layout the config asks for, not Label Studio's own chrome (its toolbar and panels)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path

import pytest

from calibration.labelling.items import conversation_messages
from calibration.labelling.label_studio import label_config, make_tasks
from rubric.conversations import conversations_from_records
from rubric.schema import load_rubric

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _task(n_turns: int = 5) -> tuple[dict, str]:
    """A 10-message task (5 exchanges, the last reply under review) of the bundled benchmark's longest texts."""
    lines = (ROOT / "data" / "role_adherence" / "conversations.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    record = max((r for r in records if len(r["turns"]) >= n_turns),
                 key=lambda r: sum(len(t["assistant"]) + len(t["user"]) for t in r["turns"][:n_turns]))
    record = {**record, "turns": record["turns"][:n_turns]}
    (conv,) = conversations_from_records([record])
    task = make_tasks([(conv.conversation_id, str(n_turns - 1))], {conv.conversation_id: conv})[0]
    assert len(conversation_messages(conv, n_turns - 1)) == 10
    return task, conv.turns[-1].assistant


def render(config: str, data: dict) -> str:
    """The config's HTML equivalent for one task (see the module docstring)."""
    def node(el: ET.Element) -> str:
        value = el.get("value", "")
        field = data.get(value[1:], "") if value.startswith("$") else value
        if el.tag == "View":
            return f'<div style="{escape(el.get("style", ""))}">' + "".join(node(c) for c in el) + "</div>"
        if el.tag == "Header":
            return f'<h{el.get("size", "4")} style="margin:10px 0 4px">{escape(field)}</h{el.get("size", "4")}>'
        if el.tag == "Text":
            return f'<div class="ls-text" data-name="{el.get("name")}">{escape(str(field))}</div>'
        if el.tag == "HyperText":
            return f'<div class="ls-hypertext" data-name="{el.get("name")}">{field}</div>'
        if el.tag == "Choices":
            inline = "display:inline-block;margin-right:14px" if el.get("showInline") == "true" else "display:block"
            opts = "".join(
                f'<label style="{inline}"><input type="radio" name="{el.get("name")}" value="{escape(c.get("alias", ""))}"/>'
                f' {escape(c.get("value", ""))}'
                + (f' <kbd class="hotkey">{escape(c.get("hotkey"))}</kbd>' if c.get("hotkey") else "") + "</label>"
                for c in el)
            return f'<div class="ls-choices" data-name="{el.get("name")}">{opts}</div>'
        raise AssertionError(f"the check does not know the tag <{el.tag}>: teach render() what Label Studio shows")

    page = node(ET.fromstring(config))
    return ("<!doctype html><html><head><meta charset='utf-8'><style>body{font-family:sans-serif;font-size:14px;"
            "margin:16px}</style></head><body>" + page + PROBE + "</body></html>")


# Writes into the DOM, which --dump-dom returns: where the reply under review and each question block end.
PROBE = """<script>
const box = (el) => { const r = el.getBoundingClientRect(); return [r.top, r.bottom, r.left, r.right]; };
document.body.insertAdjacentHTML('beforeend', '<pre id="rr-check">' + JSON.stringify({
  viewport: [innerWidth, innerHeight],
  review: box(document.querySelector('.rr-review')),
  questions: Array.from(document.querySelectorAll('.ls-choices')).map(c => [c.dataset.name, box(c)]),
  folded: document.querySelectorAll('details.rr-earlier:not([open])').length,
}) + '</pre>');
</script>"""


def _chromium(*args: str, user_dir: Path) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={user_dir}",
             "--window-size=1440,900", "--virtual-time-budget=5000"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def test_the_config_has_no_paragraphs_and_hotkeys_equal_to_the_values():
    rubric = load_rubric(ROOT / "data" / "role_adherence" / "rubric.yaml")
    root = ET.fromstring(label_config(rubric))
    assert root.find(".//Paragraphs") is None  # its timestamps, region button and author filter
    assert root.find(".//HyperText").get("value") == "$dialogue"
    for choices in root.iter("Choices"):
        assert [c.get("hotkey") for c in choices] == [c.get("alias") for c in choices] == ["1", "2", "3", "4"]
    task, reply = _task()
    assert escape(reply) in task["data"]["dialogue"] and "<script" not in task["data"]["dialogue"]


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`)")
def test_reply_and_every_question_are_visible_at_1440x900(tmp_path):
    rubric = load_rubric(ROOT / "data" / "role_adherence" / "rubric.yaml")
    task, _ = _task()
    page = tmp_path / "page.html"
    page.write_text(render(label_config(rubric), task["data"]), encoding="utf-8")
    dom = _chromium("--dump-dom", page.as_uri(), user_dir=tmp_path / "a")
    found = re.search(r'<pre id="rr-check">(\{.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    check = json.loads(found.group(1).replace("&quot;", "\"").replace("&amp;", "&"))
    width, height = check["viewport"]
    assert width == 1440 and 700 < height <= 900  # the window less the browser's own bars
    top, bottom, left, right = check["review"]
    assert top >= 0 and bottom <= height and right <= width, check  # the reply under review, whole, on screen
    assert [name for name, _ in check["questions"]] == rubric.ids
    for name, (q_top, q_bottom, q_left, _) in check["questions"]:
        assert q_top >= 0 and q_bottom <= height, (name, check)
        assert q_left > right - 1, (name, check)  # beside the conversation, not under it
    assert check["folded"] == 1  # the three earlier exchanges folded away
    shot = tmp_path / "labelling_page_1440x900.png"
    page.write_text(render(label_config(rubric), task["data"]).replace(PROBE, ""), encoding="utf-8")
    _chromium(f"--screenshot={shot}", page.as_uri(), user_dir=tmp_path / "b")
    assert shot.stat().st_size > 20_000
    print(f"screenshot saved to {shot}")
