"""The labelling page a reviewer sees, on a real Label Studio server in headless Chromium at 1440x900.

A project made from the bundled rubric.yaml's labelling config, with a 10-message task, opened as a reviewer
opens it (logged in through the login form): in the labelling stream (Label All Tasks) and in the quick view
of the task (a click on it in the table). On both, and on the stream in a 1440x900 window too (its page ~110
px shorter), the reply under review is highlighted and, with every question, on screen without scrolling;
no timestamps or Paragraphs controls; a click unfolds the earlier turns. Each option's hotkey picks that
option and no other question's (Label Studio binds a key page-wide: one key in five questions would answer
all five). Skip is in the stream when the project allows it, and gone when it does not.

Marked `labelstudio` (run by .ci/run's Label Studio step); skipped where Chromium is missing. The screenshots
go to ROLE_RUBRIC_SCREENSHOTS if set (a folder), else to the test's temporary folder; the path is printed.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from calibration.connectors.label_studio.api import LabelStudio
from calibration.connectors.label_studio.tasks import label_config, make_tasks, option_hotkeys
from calibration.labelling.items import conversation_messages
from rubric.conversations import conversations_from_records
from rubric.schema import load_rubric
from tests.labelling.cdp import CHROMIUM, chromium_page
from tests.labelling.conftest import ADMIN_EMAIL, ADMIN_PASSWORD, TOKEN

pytestmark = [
    pytest.mark.labelstudio,
    pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`)"),
]

ROOT = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 1440, 900
BROWSER_BARS = 110  # a 1440x900 browser window's tabs and address bar: its page is ~1440x790


def ten_message_task(n_turns: int = 5) -> tuple[dict, str]:
    """A 10-message task (5 exchanges, the last reply under review) of the bundled benchmark's longest texts,
    as `role-rubric label-studio` makes it."""
    lines = (ROOT / "data" / "role_adherence" / "conversations.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    record = max(
        (r for r in records if len(r["turns"]) >= n_turns),
        key=lambda r: sum(len(t["assistant"]) + len(t["user"]) for t in r["turns"][:n_turns]),
    )
    (conv,) = conversations_from_records([{**record, "turns": record["turns"][:n_turns]}])
    task = make_tasks([(conv.conversation_id, str(n_turns - 1))], {conv.conversation_id: conv})[0]
    assert len(conversation_messages(conv, n_turns - 1)) == 10
    return task, conv.turns[-1].assistant


# Where the page stands: each thing is "seen" when the four corners of its box (3 px in) are in the window
# and the element drawn there is the thing itself (not a toolbar over it, not scrolled out of its panel).
LAYOUT = """(() => {
  const seen = (el) => { if (!el) return false; const r = el.getBoundingClientRect();
    return r.width > 6 && r.height > 6 && [[r.left + 3, r.top + 3], [r.right - 3, r.top + 3], [r.left + 3, r.bottom - 3],
      [r.right - 3, r.bottom - 3]].every(([x, y]) => x >= 0 && y >= 0 && x < innerWidth && y < innerHeight
      && el.contains(document.elementFromPoint(x, y))); };
  const review = document.querySelector('.rr-review');
  return {
    viewport: [innerWidth, innerHeight],
    review: {seen: seen(review), text: review ? review.innerText : '',
             border: review ? getComputedStyle(review).borderTopWidth : ''},
    questions: Array.from(document.querySelectorAll('.rr-questions h4')).map(h => [h.innerText.trim(), seen(h)]),
    choices: Array.from(document.querySelectorAll('.rr-questions .lsf-choices')).map(c => ({seen: seen(c),
      hints: Array.from(c.querySelectorAll('.lsf-choice')).map(o => (o.querySelector('sup') || {}).innerText || '')})),
    folded: document.querySelectorAll('details.rr-earlier:not([open])').length,
    paragraphs: document.querySelectorAll('[class*="paragraphs"]').length,
    timestamps: (document.body.innerText.match(/\\d\\d:\\d\\d:\\d\\d/g) || []).length,
    buttons: Array.from(document.querySelectorAll('button')).map(b => b.innerText.trim()).filter(Boolean),
  };
})()"""
CHECKED = (
    "Array.from(document.querySelectorAll('.rr-questions .lsf-choices')).map(c => "
    "Array.from(c.querySelectorAll('input')).findIndex(i => i.checked))"
)


async def _log_in(page, url: str) -> None:
    await page.goto(url + "/user/login/")
    await page.wait_for("document.querySelector('#login-form input[name=email]')")
    await page.js(f"""(() => {{ const form = document.querySelector('#login-form');
        form.querySelector('input[name=email]').value = {json.dumps(ADMIN_EMAIL)};
        form.querySelector('input[name=password]').value = {json.dumps(ADMIN_PASSWORD)};
        form.submit(); }})()""")
    await page.wait_for("document.readyState === 'complete' && !location.pathname.startsWith('/user/login')")


async def _open(page, url: str, n_questions: int) -> dict:
    """Open a labelling page and wait for Label Studio to draw every question; where everything stands."""
    await page.goto(url)
    await page.wait_for(
        f"document.querySelectorAll('.rr-questions .lsf-choices').length === {n_questions} "
        "&& document.querySelector('.rr-review')"
    )
    await asyncio.sleep(1.0)  # the side panels settle after the first draw
    return await page.js(LAYOUT)


def _check_layout(layout: dict, rubric, reply: str, where: str, height: int = HEIGHT) -> None:
    assert layout["viewport"] == [WIDTH, height], where
    assert layout["review"]["seen"], (where, layout)  # the reply under review, whole, on screen
    assert reply in layout["review"]["text"].replace("\n", " ") and layout["review"]["border"] == "3px", where
    assert [text for text, _ in layout["questions"]] == [q.text for q in rubric.questions], where
    unseen = [text for text, seen in layout["questions"] if not seen]
    unseen += [q.id for q, c in zip(rubric.questions, layout["choices"], strict=True) if not c["seen"]]
    assert not unseen, f"{where}: not on screen without scrolling: {unseen}"
    assert layout["folded"] == 1, where  # the three earlier exchanges folded away
    assert layout["paragraphs"] == 0 and layout["timestamps"] == 0, (where, layout)


async def _press_every_hotkey(page, rubric) -> None:
    """Each option's key, question by question: that question takes the option, the others keep theirs."""
    keys = option_hotkeys(rubric)
    state = [-1] * len(rubric.questions)
    for j in range(max(len(q.options) for q in rubric.questions)):
        for k, q in enumerate(rubric.questions):
            if j >= len(q.options) or keys[q.id][j] is None:
                continue
            await page.press(keys[q.id][j])
            state[k] = j
            for _ in range(40):
                now = await page.js(CHECKED)
                if now == state:
                    break
                await asyncio.sleep(0.1)
            assert now == state, f"key {keys[q.id][j]!r} ({q.id} option {j + 1}) left the answers {now}, not {state}"


def test_the_labelling_page_on_label_studio(label_studio, tmp_path):
    server = label_studio
    rubric = load_rubric(ROOT / "data" / "role_adherence" / "rubric.yaml")
    client = LabelStudio(server.url, TOKEN)
    project = client.create_project("labelling page", label_config(rubric))  # as `role-rubric label-studio` does
    task, reply = ten_message_task()
    assert client.add_tasks(project, [task]) == 1
    (task_id,) = [t["id"] for t in client.tasks(project)]
    shots = Path(os.environ.get("ROLE_RUBRIC_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    n = len(rubric.questions)

    async def browse() -> None:
        async with chromium_page(tmp_path / "chromium", width=WIDTH, height=HEIGHT) as page:
            await _log_in(page, server.url)
            stream = f"{server.url}/projects/{project}/data?labeling=1"  # Label All Tasks
            layout = await _open(page, stream, n)
            await page.screenshot(shots / "labelling_page_1440x900.png")
            _check_layout(layout, rubric, reply, "the labelling stream")
            assert "Skip" in layout["buttons"] and "Submit" in layout["buttons"], layout["buttons"]
            shown = [c["hints"] for c in layout["choices"]]
            assert shown == [[f"[{key}]" for key in keys] for keys in option_hotkeys(rubric).values()]
            await _press_every_hotkey(page, rubric)
            box = await page.js(
                "(() => { const r = document.querySelector('details.rr-earlier summary')"
                ".getBoundingClientRect(); return [r.left + 20, (r.top + r.bottom) / 2]; })()"
            )
            await page.click(*box)  # a reviewer's click unfolds the earlier exchanges
            await page.wait_for("document.querySelector('details.rr-earlier').open", timeout=10)

            await page.resize(WIDTH, HEIGHT - BROWSER_BARS)  # the stream fits a 1440x900 window as well
            layout = await _open(page, stream, n)
            _check_layout(layout, rubric, reply, "the labelling stream in a 1440x900 window", HEIGHT - BROWSER_BARS)
            await page.resize(WIDTH, HEIGHT)

            layout = await _open(page, f"{server.url}/projects/{project}/data?task={task_id}", n)  # the quick view
            await page.screenshot(shots / "labelling_quick_view_1440x900.png")
            _check_layout(layout, rubric, reply, "the quick view")

            server.call("PATCH", f"/api/projects/{project}", {"show_skip_button": False})
            layout = await _open(page, stream, n)
            assert "Skip" not in layout["buttons"] and "Submit" in layout["buttons"], layout["buttons"]

    asyncio.run(browse())
    print(
        f"screenshots saved to {shots / 'labelling_page_1440x900.png'} and {shots / 'labelling_quick_view_1440x900.png'}"
    )
