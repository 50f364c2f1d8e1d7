"""Label Studio without its server: the labelling config from rubric.yaml, tasks, and a JSON export read back.

A task is one item to label: its data holds `conversation_id`, `turn`, `chatbot_role` and `messages`, the
conversation so far ending with the reply under review ([{"role", "content"}], what the import checks), and
`dialogue`, the same as HTML (dialogue_html.py: earlier turns folded, the reply under review highlighted;
shown by a `HyperText` tag, which has none of `Paragraphs`' timestamps, region buttons or author filter).
The conversation and the questions sit side by side, so on a 1440x900 screen the reply and every question
are visible without scrolling. The config asks each rubric question with a single-choice `Choices` tag
named by the question id; each option is a `Choice` whose caption is "value: label", whose `alias` (what
Label Studio stores in the result) is the option value, so an answer reads back as the value labels.csv
holds, and whose hotkey is its own (option_hotkeys: Label Studio fires a key in every question that declares it).

Reading an export back is calibration/connectors/label_studio/export.py (re-exported here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

import pandas as pd

from calibration.labelling.dialogue_html import dialogue_html
from calibration.labelling.items import Item, conversation_messages
from rubric.conversations import Conversation
from rubric.errors import InputError
from rubric.schema import Rubric

DIALOGUE = "dialogue"  # the object tag the questions point at
ROLE = "chatbot_role"
RESERVED = {DIALOGUE, ROLE}
# Label Studio 1.23.2 binds every Choice's hotkey to the whole page: a key declared in five questions picks
# that option in all five at once (tests/labelling/test_label_studio_page.py presses them). So each question
# has its own keys, laid out so they read at a glance: question k takes the k-th keyboard row and option j the
# j-th key of it, so an option's keys share a column (1 q a z for the first option); questions 5-8 repeat the
# rows with shift. `u` is Label Studio's own key (unselect region); later questions get Label Studio's keys.
KEY_ROWS = ("1234567890", "qwertyuiop", "asdfghjkl", "zxcvbnm")
KEY_MODIFIERS = ("", "shift+")
TAKEN_KEYS = {"u"}

# Label Studio's own classes, made compact so five questions of four options fit beside the conversation.
STYLE = """
  .rr-dialogue h4, .rr-questions h4 { font-size: 14px; line-height: 1.3; margin: 8px 0 2px 0 !important; }
  .rr-questions .lsf-choices { margin: 0 !important; }
  .rr-questions .lsf-choice__item, .rr-questions .ant-radio-wrapper { font-size: 13px; line-height: 1.35;
    padding: 0 !important; margin: 0 !important; }
  .rr-questions sup { line-height: 0; font-size: 10px; color: #6c757d; }
  .rr-role { max-height: 112px; overflow: auto; border-left: 3px solid #ced4da; padding-left: 8px; }
  .rr-role * { font-size: 13px !important; line-height: 1.4 !important; }
"""


def option_hotkeys(rubric: Rubric) -> dict[str, list[str | None]]:
    """question id -> each option's hotkey (None where the question or option is past the keys above)."""
    keys: dict[str, list[str | None]] = {}
    for k, q in enumerate(rubric.questions):
        row, tier = KEY_ROWS[k % len(KEY_ROWS)], k // len(KEY_ROWS)
        keys[q.id] = [
            KEY_MODIFIERS[tier] + row[j]
            if tier < len(KEY_MODIFIERS) and j < len(row) and row[j] not in TAKEN_KEYS
            else None
            for j in range(len(q.options))
        ]
    return keys


def label_config(rubric: Rubric) -> str:
    """The labelling interface: the conversation (earlier turns folded, the reply under review highlighted)
    beside the questions, one single-choice block per question, each option with its own hotkey."""
    clash = sorted(set(rubric.ids) & RESERVED)
    if clash:
        raise InputError(
            f"the rubric has a question named {clash[0]!r}, a name the labelling interface uses.",
            path=rubric.source,
            fix="rename that question in rubric.yaml (and in labels.csv and llm.csv).",
        )
    hotkeys = option_hotkeys(rubric)
    lines = [
        '<View style="display: flex; gap: 24px; align-items: flex-start;">',
        f"  <Style>{STYLE}  </Style>",
        '  <View className="rr-dialogue" style="flex: 4; min-width: 0;">',
        '    <Header value="The role the chatbot was given" size="6"/>',
        '    <View className="rr-role">',
        f'      <Text name="{ROLE}" value="${ROLE}"/>',
        "    </View>",
        '    <Header value="The conversation: judge the highlighted reply" size="6"/>',
        f'    <HyperText name="{DIALOGUE}" value="${DIALOGUE}" inline="true"/>',
        "  </View>",
        '  <View className="rr-questions" style="flex: 6; min-width: 320px;">',
    ]
    for q in rubric.questions:
        lines.append(f'    <Header value={quoteattr(q.text)} size="6"/>')
        lines.append(f'    <Choices name={quoteattr(q.id)} toName="{DIALOGUE}" choice="single-radio">')
        for o, key in zip(q.options, hotkeys[q.id], strict=True):
            attr = f" hotkey={quoteattr(key)}" if key else ""
            lines.append(f"      <Choice value={quoteattr(f'{o.key}: {o.label}')} alias={quoteattr(o.key)}{attr}/>")
        lines.append("    </Choices>")
    lines += ["  </View>", "</View>"]
    return "\n".join(lines) + "\n"


def config_questions(config: str) -> dict[str, list[str]]:
    """question id -> option aliases of a labelling config (to check an existing project asks our rubric)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.fromstring(config)
    except ET.ParseError:
        return {}
    return {
        c.get("name", ""): [o.get("alias") or o.get("value") or "" for o in c.iter("Choice")]
        for c in root.iter("Choices")
    }


def check_same_questions(theirs: str, ours: str, project: int, url: str) -> None:
    """An existing project (its labelling config `theirs`) must ask exactly this rubric's questions with these
    options (`ours`, from `label_config`), else one clear error naming the project."""
    if config_questions(theirs) != config_questions(ours):
        asked = ", ".join(config_questions(theirs)) or "none"
        raise InputError(
            f"project {project} at {url} asks other questions or options ({asked}) than rubric.yaml.",
            fix="leave out project= to make a new project, or pass data= the dataset it was made from.",
        )


def make_tasks(
    items: list[Item],
    conversations: dict[str, Conversation],
    predictions: dict[Item, dict[str, tuple[str, float]]] | None = None,
    *,
    model_version: str = "role-rubric",
) -> list[dict[str, Any]]:
    """One Label Studio task per item; with `predictions` ((item) -> {question: (option, probability)}) the
    calibrated population prediction rides along as a pre-annotation."""
    tasks = []
    for cid, turn in items:
        conv = conversations[cid]
        messages = conversation_messages(conv, turn)
        data = {
            "conversation_id": cid,
            "turn": int(turn) if turn != "" else "",
            "chatbot_role": conv.chatbot_role,
            "messages": messages,
            DIALOGUE: dialogue_html(messages),
        }
        task: dict[str, Any] = {"data": data}
        guess = (predictions or {}).get((cid, turn))
        if guess:
            task["predictions"] = [
                {
                    "model_version": model_version,
                    "score": round(sum(p for _, p in guess.values()) / len(guess), 6),
                    "result": [
                        {"from_name": qid, "to_name": DIALOGUE, "type": "choices", "value": {"choices": [key]}}
                        for qid, (key, _) in guess.items()
                    ],
                }
            ]
        tasks.append(task)
    return tasks


def read_predictions(path: str | Path, rubric: Rubric) -> dict[Item, dict[str, tuple[str, float]]]:
    """The most probable option of every question per item, from the population rows (empty judge_id) of a
    predictions.csv written by `role-rubric predict`."""
    path = Path(path)
    if not path.exists():
        raise InputError(
            "file not found.", path=path, fix="run `role-rubric predict ... judges=population out=FILE` first."
        )
    frame = pd.read_csv(
        path, dtype={"conversation_id": str, "turn": str, "judge_id": str, "question_id": str}, keep_default_na=False
    )
    need = ["conversation_id", "turn", "judge_id", "question_id"]
    if any(c not in frame.columns for c in need):
        raise InputError(
            "not a predictions.csv (no conversation_id, turn, judge_id, question_id columns).",
            path=path,
            fix="pass predictions= a file written by `role-rubric predict`.",
        )
    population = frame[frame["judge_id"] == ""]
    if population.empty:
        raise InputError(
            "has no population rows (empty judge_id).",
            path=path,
            fix="write it with `role-rubric predict ... judges=population`.",
        )
    out: dict[Item, dict[str, tuple[str, float]]] = {}
    for _, row in population.iterrows():
        qid = row["question_id"]
        if qid not in rubric.ids:
            raise InputError(
                f"question {qid!r} is not in rubric.yaml.",
                path=path,
                fix="pass the predictions of a model trained with this dataset's rubric.",
            )
        probs = {o.key: float(row.get(f"p_{o.key}", "nan") or "nan") for o in rubric.question(qid).options}
        key = max(probs, key=lambda k: probs[k] if probs[k] == probs[k] else -1.0)
        turn = row["turn"][:-2] if row["turn"].endswith(".0") else row["turn"]
        out.setdefault((row["conversation_id"], turn), {})[qid] = (key, probs[key])
    return out
