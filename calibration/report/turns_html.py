"""The report's "Every turn" section as HTML: the controls, an empty table, the rows and conversations as
JSON, and the small script that draws one page of the table at a time (sorting, filtering, opening a turn's
conversation, `#turn=CONVERSATION/TURN` links), with its CSS (TURNS_CSS, which the page adds to its style).

The data comes from calibration/report/turns.py (`turns_payload`), which re-exports `turns_html` and
TURNS_CSS; keeping the page's markup and script here leaves turns.py about the numbers only.
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any


def turns_html(payload: Mapping[str, Any]) -> str:
    """The drill-down section: controls, an empty table the script fills, the JSON data and the script."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    return f"""<h2 id="turns">Every turn: where the calibrator and the humans disagree</h2>
<p class="note">{_note(payload)}</p>
<div class="rr-controls">
<label>role <select id="rr-role"><option value="">all</option></select></label>
<label>question <select id="rr-q"><option value="">any</option></select></label>
<label>judge answer &le; <input id="rr-qmax" type="number" step="0.5" min="0" style="width:4em"></label>
<label>text <input id="rr-text" type="search" placeholder="conversation id or words"></label>
<label><input id="rr-labelled" type="checkbox"> labelled only</label>
<span id="rr-count"></span>
<button id="rr-prev">&lsaquo; prev</button><button id="rr-next">next &rsaquo;</button>
</div>
<table id="rr-turns"><thead><tr></tr></thead><tbody></tbody></table>
<script type="application/json" id="rr-turns-data">{data}</script>
<script>{_SCRIPT}</script>
"""


def _note(payload: Mapping[str, Any]) -> str:
    """The paragraph above the table: how many turns, whether their text is there, what each column means."""
    n = len(payload["rows"])
    texts = "with their text" if payload["conversations"] else "(no conversations.jsonl in the data dir: ids only)"
    at = payload.get("adheres_at")
    adherence = f"P({html.escape(payload['target'])} &ge; {at:g})" if at is not None else "adherence"
    return (
        f"All {n} turns {texts}. <b>judge q</b>: the judge's expected answer to each question; "
        f"<b>calibrated</b>: the calibrated model's expected {html.escape(payload['target'])} answer, out of "
        "fold, averaged over the turn's human judges; <b>adherence</b>: "
        f"{adherence} under that distribution; <b>disagreement</b>: RMSE between the humans' answers and the "
        "calibrated prediction for each of them. Sorted worst disagreement first; click a column to sort, a "
        "row to read the conversation so far."
    )


TURNS_CSS = """
.rr-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1em; align-items: center; font-size: 0.9em;
  padding: 0.4em 0; }
#rr-turns { width: 100%; table-layout: fixed; }
#rr-turns th { position: sticky; top: 0; background: #fff; z-index: 1; cursor: pointer; user-select: none;
  white-space: normal; overflow-wrap: normal; word-break: normal; vertical-align: bottom; font-size: 0.85em; }
#rr-turns th.rr-text-head { text-align: left; }
#rr-turns th.rr-sorted { background: #eef; }
#rr-turns td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#rr-turns td.rr-text { text-align: left; }
#rr-turns td.rr-id { white-space: normal; overflow-wrap: anywhere; text-overflow: clip; text-align: left; }
#rr-turns tbody tr.rr-row { cursor: pointer; } #rr-turns tbody tr.rr-row:hover { background: #f6f6ff; }
#rr-turns tr.rr-open > td { white-space: normal; background: #fafafa; text-align: left; }
.rr-conv { max-height: 32em; overflow-y: auto; padding: 0.3em 0.6em; }
.rr-msg { margin: 0.3em 0; padding: 0.3em 0.6em; border-radius: 4px; white-space: pre-wrap; }
.rr-user { background: #eef3ff; } .rr-assistant { background: #f3f3f3; }
.rr-focus { outline: 2px solid #c33; background: #fff3f0; }
.rr-bad { color: #b00; font-weight: 600; }
"""

_SCRIPT = r"""
(function () {
  const data = JSON.parse(document.getElementById("rr-turns-data").textContent);
  const C = Object.fromEntries(data.columns.map((c, i) => [c, i]));
  const convs = data.conversations, qs = data.questions, PAGE = 50;
  const esc = s => String(s).replace(/[&<>"]/g, ch => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[ch]));
  const text = (r, k) => { const c = convs[r[0]]; return c && r[1] !== null && c.turns[r[1]] ? c.turns[r[1]][k] : ""; };
  // Headers wrap between words only: a column is as wide as its longest header word (ch of the header's font,
  // plus room for the padding); a wider window shares its extra width over the columns, a narrower one
  // scrolls rather than squeeze a column under its header; ids and roles wrap inside the cell.
  const fit = words => Math.max(5, ...words.map(w => w.length)) + 1.5 + "ch";
  const cols = [
    {key: "conversation_id", label: "conversation", w: fit(["conversation"]), id: true}, {key: "turn", label: "turn", w: fit(["turn"])},
    {key: "role", label: "role", w: "12ch", id: true},
    {key: "user", label: "user", w: "16ch", text: true, get: r => text(r, 0)},
    {key: "assistant", label: "assistant", w: "24ch", text: true, get: r => text(r, 1)},
    ...qs.map(q => ({key: "judge " + q, label: "judge " + q, head: "judge " + esc(q), w: fit(["judge", q])})),
    {key: "calibrated", label: "calibrated", w: fit(["calibrated"])},
    {key: "adherence", label: "adherence", w: fit(["adherence"])},
    {key: "humans", label: "humans", w: "10ch", text: true}, {key: "disagreement", label: "disagreement", w: fit(["disagreement"])},
  ];
  cols.forEach(c => { if (!c.get) { const i = C[c.key]; c.get = r => r[i]; } });
  const state = {sort: "disagreement", desc: true, page: 0, open: null};
  const table = document.getElementById("rr-turns"), tbody = table.tBodies[0];
  const $ = id => document.getElementById(id);
  table.tHead.rows[0].innerHTML = cols.map(c => `<th style="width:${c.w}"${c.text || c.id ? ' class="rr-text-head"' : ""} data-key="${c.key}" title="sort by ${esc(c.label)}">${c.head || esc(c.label)}</th>`).join("");
  const roles = [...new Set(data.rows.map(r => r[C.role]).filter(Boolean))].sort();
  $("rr-role").insertAdjacentHTML("beforeend", roles.map(r => `<option>${esc(r)}</option>`).join(""));
  $("rr-q").insertAdjacentHTML("beforeend", qs.map(q => `<option>${esc(q)}</option>`).join(""));
  let shown = data.rows;
  function filter() {
    const role = $("rr-role").value, q = $("rr-q").value, qmax = parseFloat($("rr-qmax").value);
    const words = $("rr-text").value.trim().toLowerCase(), labelled = $("rr-labelled").checked;
    const qi = q ? C["judge " + q] : -1;
    let rows = data.rows.filter(r =>
      (!role || r[C.role] === role) && (!labelled || r[C.disagreement] !== null) &&
      (qi < 0 || isNaN(qmax) || (r[qi] !== null && r[qi] <= qmax)) &&
      (!words || (r[0] + " " + text(r, 0) + " " + text(r, 1)).toLowerCase().includes(words)));
    const col = cols.find(c => c.key === state.sort) || cols[0], sign = state.desc ? -1 : 1;
    const keyed = rows.map(r => [col.get(r), r]);
    keyed.sort((a, b) => {
      const x = a[0], y = b[0];
      if (x === null || x === "") return (y === null || y === "") ? 0 : 1;  // missing values last
      if (y === null || y === "") return -1;
      return (x < y ? -1 : x > y ? 1 : 0) * sign;
    });
    shown = keyed.map(k => k[1]);
    state.page = Math.min(state.page, Math.max(0, Math.ceil(shown.length / PAGE) - 1));
    render();
  }
  const fmt = v => v === null || v === undefined ? "–" : (typeof v === "number" ? String(v) : esc(v));
  function cell(c, r) {
    const v = c.get(r);
    if (c.text) return `<td class="rr-text" title="${esc(v)}">${esc(v)}</td>`;
    if (c.id) return `<td class="rr-id">${fmt(v).replace(/([/_.-])/g, "$1<wbr>")}</td>`;  // break after / _ . -
    const bad = c.key === "adherence" && v !== null && v < 0.5;
    return `<td${bad ? ' class="rr-bad"' : ""}>${fmt(v)}</td>`;
  }
  function render() {
    const start = state.page * PAGE, page = shown.slice(start, start + PAGE);
    const parts = [];
    for (const r of page) {
      const id = r[0] + "/" + r[1];
      parts.push(`<tr class="rr-row" data-id="${esc(id)}">` + cols.map(c => cell(c, r)).join("") + "</tr>");
      if (state.open === id) parts.push(detail(r));
    }
    tbody.innerHTML = parts.join("");
    $("rr-count").textContent = shown.length ? `turns ${start + 1}–${start + page.length} of ${shown.length} (${data.rows.length} in all)` : `no turn matches (${data.rows.length} in all)`;
    table.tHead.querySelectorAll("th").forEach(th => th.classList.toggle("rr-sorted", th.dataset.key === state.sort));
  }
  function detail(r) {
    const c = convs[r[0]], turn = r[1];
    let body = "";
    if (c) {
      body += `<p><b>role</b>: ${esc(c.chatbot_role)}</p><div class="rr-conv">`;
      c.turns.slice(0, turn === null ? c.turns.length : turn + 1).forEach((t, i) => {
        const focus = i === turn ? " rr-focus" : "";
        body += `<div class="rr-msg rr-user"><b>user (turn ${i})</b>: ${esc(t[0])}</div>`;
        body += `<div class="rr-msg rr-assistant${focus}"><b>assistant (turn ${i})</b>${focus ? " — the turn under review" : ""}: ${esc(t[1])}</div>`;
      });
      body += "</div>";
    } else body += "<p>(no text for this conversation)</p>";
    const p = r[C.p] || [];
    if (p.some(v => v !== null)) body += `<p><b>calibrated ${esc(data.target)} distribution</b>: ` + data.values.map((v, i) => `${v}: ${fmt(p[i])}`).join(", ") + "</p>";
    body += `<p><b>human answers</b>: ${esc(r[C.humans] || "none")}; <b>judge</b>: ` + qs.map(q => `${esc(q)} ${fmt(r[C["judge " + q]])}`).join(", ") + "</p>";
    return `<tr class="rr-open"><td colspan="${cols.length}">${body}</td></tr>`;
  }
  table.tHead.addEventListener("click", e => {
    const th = e.target.closest("th"); if (!th) return;
    state.desc = state.sort === th.dataset.key ? !state.desc : ["disagreement", "humans"].includes(th.dataset.key);
    state.sort = th.dataset.key; filter();
  });
  tbody.addEventListener("click", e => {
    const tr = e.target.closest("tr.rr-row"); if (!tr) return;
    state.open = state.open === tr.dataset.id ? null : tr.dataset.id; render();
  });
  ["rr-role", "rr-q", "rr-qmax", "rr-text", "rr-labelled"].forEach(id => $(id).addEventListener("input", () => { state.page = 0; filter(); }));
  $("rr-prev").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); render(); });
  $("rr-next").addEventListener("click", () => { if ((state.page + 1) * PAGE < shown.length) { state.page++; render(); } });
  function openFromHash() {
    // report.html#turn=CONVERSATION/TURN: that conversation's turns, the chosen one open
    const m = decodeURIComponent(location.hash).match(/^#turn=(.*)\/(\d+)$/); if (!m) return;
    $("rr-text").value = m[1]; state.page = 0; state.open = m[1] + "/" + m[2]; filter();
    document.getElementById("turns").scrollIntoView();
  }
  window.addEventListener("hashchange", openFromHash);
  window.rrTurns = {filter, state, shown: () => shown};
  filter(); openFromHash();
})();
"""
