"""The conversation as a reviewer sees it in Label Studio: earlier turns folded away, the reply under review
highlighted, all short enough to sit beside the questions on a laptop screen.

Label Studio's `Paragraphs` tag shows every message with an audio timestamp, a region button and an author
filter, none of which mean anything here, and cannot mark one message as the one to judge. A `HyperText`
tag showing this HTML does: the last `SHOWN` turns open, the earlier ones in a closed <details> (a click
opens them), then the user message and the reply under review in a highlighted box. Every text is escaped.
"""

from __future__ import annotations

from html import escape

SHOWN = 1  # earlier exchanges shown open above the one under review (the rest fold away)

STYLE = {
    "user": "margin:6px 0;padding:6px 10px;background:#f1f3f5;border-radius:6px;",
    "assistant": "margin:6px 0 6px 24px;padding:6px 10px;background:#eef4ff;border-radius:6px;",
    "review": "margin:10px 0 0 0;padding:8px 12px;border:3px solid #d9480f;background:#fff4e6;border-radius:8px;",
    "who": "font-size:11px;font-weight:600;color:#555;text-transform:uppercase;letter-spacing:.04em;",
}


def _message(role: str, content: str, style: str) -> str:
    who = "User" if role == "user" else "Assistant"
    text = escape(content).replace("\n", "<br/>")
    return f'<div style="{style}"><div style="{STYLE["who"]}">{who}</div>{text}</div>'


def dialogue_html(messages: list[dict[str, str]]) -> str:
    """HTML of the conversation so far ([{"role", "content"}], ending with the reply under review)."""
    *earlier, user, reply = messages
    pairs = [earlier[i : i + 2] for i in range(0, len(earlier), 2)]
    folded, shown = pairs[: max(0, len(pairs) - SHOWN)], pairs[max(0, len(pairs) - SHOWN) :]
    parts = []
    if folded:
        inner = "".join(_message(m["role"], m["content"], STYLE[m["role"]]) for p in folded for m in p)
        parts.append(
            f'<details class="rr-earlier"><summary style="cursor:pointer;color:#555;">'
            f"{len(folded)} earlier exchange{'s' if len(folded) > 1 else ''} (click to show)</summary>"
            f"{inner}</details>"
        )
    parts += [_message(m["role"], m["content"], STYLE[m["role"]]) for p in shown for m in p]
    parts.append(
        f'<div class="rr-review" style="{STYLE["review"]}">'
        f'<div style="{STYLE["who"]}color:#d9480f;">The reply to judge</div>'
        f"{_message(user['role'], user['content'], STYLE['user'])}"
        f"{_message(reply['role'], reply['content'], STYLE['assistant'])}</div>"
    )
    return "".join(parts)
