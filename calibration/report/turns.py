"""The report's per-turn drill-down: every turn with its text, the judge's answers, the calibrated
distribution and the human answers, in a sortable, filterable table inside the self-contained page.

`prepare_turns(...)` returns one row per item (the data); `turns_html(...)` renders the section: the rows
and the conversations go into the page as JSON, and a small script draws one page of the table at a time,
so 5,000 turns open and filter fast (measured in tests/calibration/test_report_turns.py). Clicking a row
shows the conversation so far; `report.html#turn=CONVERSATION/TURN` opens a turn directly.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from calibration.evaluation.cv_predictions import KEYS, REFERENCE, option_values


def read_conversations(path: str | Path) -> dict[str, dict[str, Any]]:
    """conversation_id -> {role, chatbot_role, turns: [[user, assistant], ...]} from a conversations.jsonl,
    or {} when there is none. `role` is the record's short role name if it has one (the bundled data does),
    else the start of its role description."""
    from rubric.conversations import load_conversations

    path = Path(path)
    if not path.exists():
        return {}
    names: dict[str, str] = {}
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("role"), str):
                names[str(rec.get("conversation_id"))] = rec["role"]
    out = {}
    for conv in load_conversations(path):
        short = re.sub(r"^you are\s+", "", conv.chatbot_role.split(".")[0].strip(), flags=re.I)[:40]
        out[conv.conversation_id] = {
            "role": names.get(conv.conversation_id, short),
            "chatbot_role": conv.chatbot_role,
            "turns": [[t.user, t.assistant] for t in conv.turns],
        }
    return out


def prepare_turns(
    ds: Any,
    predictions: pd.DataFrame | None,
    conversations: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    adheres_at: float | None = None,
    method: str = REFERENCE,
) -> pd.DataFrame:
    """One row per item of `ds`: ids, role, the judge's expected answer per question (`judge <q>`), the
    calibrated (out-of-fold) target distribution averaged over the item's labelled judges (`p_<value>`,
    `calibrated`, `adherence` = P(answer >= adheres_at)), the human answers (`humans`, `human mean`) and
    `disagreement` = RMSE over the item's judges between each human answer and the calibrated expected
    answer for that judge. Items without out-of-fold predictions (no labels) have NaN there.
    """
    conversations = conversations or {}
    items = ds.items[["conversation_id", "turn"]].astype(str).reset_index(drop=True)
    values = ds.option_values()
    frame = items.copy()
    frame["role"] = [conversations.get(c, {}).get("role", "") for c in items["conversation_id"]]
    expected = (ds.probs * values[None]).sum(axis=2)  # (N, Q) judge's expected answer per question
    for q, qid in enumerate(ds.rubric.ids):
        frame[f"judge {qid}"] = np.where(ds.present[:, q], expected[:, q], np.nan)
    t = ds.target_index
    at = float(np.median(ds.rubric.questions[t].values) if adheres_at is None else adheres_at)
    frame["judge adherence"] = (ds.probs[:, t] * (values[t] >= at)[None]).sum(axis=1)
    if predictions is None or predictions.empty:
        for column in ("calibrated", "adherence", "human mean", "human adherence", "disagreement"):
            frame[column] = np.nan
        frame["humans"] = ""
        return frame
    rows = predictions[predictions["method"] == method]
    p_cols = [c for c in rows.columns if c.startswith("p_")]
    target_values = np.asarray(option_values(predictions))
    keys = rows[KEYS[:2]].astype(str)
    err = (rows["answer"].to_numpy(float) - rows["expected"].to_numpy(float)) ** 2
    per_item = (
        rows[p_cols + ["expected", "answer"]]
        .assign(
            conversation_id=keys["conversation_id"].to_numpy(),
            turn=keys["turn"].to_numpy(),
            sq=err,
            up=(rows["answer"].to_numpy(float) >= at).astype(float),
        )
        .groupby(["conversation_id", "turn"], sort=False)
        .agg(
            {**{c: "mean" for c in p_cols}, "expected": "mean", "answer": "mean", "sq": "mean", "up": "mean"}
        )
    )
    humans = (
        rows.assign(
            label=rows["judge_id"].astype(str) + ": " + rows["answer"].map(lambda v: f"{v:g}"),
            conversation_id=keys["conversation_id"].to_numpy(),
            turn=keys["turn"].to_numpy(),
        )
        .groupby(["conversation_id", "turn"], sort=False)["label"]
        .agg(", ".join)
    )
    joined = frame.join(per_item, on=["conversation_id", "turn"]).join(humans, on=["conversation_id", "turn"])
    frame[p_cols] = joined[p_cols].to_numpy(float)
    frame["calibrated"] = joined["expected"].to_numpy(float)
    above = [c for c, v in zip(p_cols, target_values, strict=True) if v >= at]
    frame["adherence"] = joined[above].sum(axis=1, min_count=1).to_numpy(float)
    frame["human mean"] = joined["answer"].to_numpy(float)
    frame["human adherence"] = joined["up"].to_numpy(float)
    frame["humans"] = joined["label"].fillna("").to_numpy()
    frame["disagreement"] = np.sqrt(joined["sq"].to_numpy(float))
    return frame


def per_role_table(frame: pd.DataFrame) -> pd.DataFrame | None:
    """Per role: turns, labelled turns, the humans' adherence rate, the calibrated and the raw judge's mean
    adherence probability, and the calibrated model's RMSE against the humans; None for a single role."""
    if frame["role"].nunique() < 2:
        return None
    labelled = frame[frame["disagreement"].notna()]
    grouped = frame.groupby("role")
    out = pd.DataFrame(
        {
            "turns": grouped.size(),
            "labelled": labelled.groupby("role").size(),
            "human adherence rate": labelled.groupby("role")["human adherence"].mean(),
            "calibrated adherence": labelled.groupby("role")["adherence"].mean(),
            "raw judge adherence": labelled.groupby("role")["judge adherence"].mean(),
            "calibrated RMSE": labelled.groupby("role")["disagreement"].apply(
                lambda d: float(np.sqrt((d**2).mean()))
            ),
        }
    )
    out["labelled"] = out["labelled"].fillna(0).astype(int)
    return out.reset_index()


def violation_table(frame: pd.DataFrame, designs: pd.DataFrame) -> pd.DataFrame:
    """AUC of telling adherent turns from each violation type (turn_designs.csv's `design`), for the
    calibrated adherence (labelled turns, out of fold) and the raw judge's on the same turns."""
    from calibration.evaluation.adherence import violation_aucs

    labelled = frame[frame["adherence"].notna()]
    cal = violation_aucs(labelled, designs, column="adherence")
    raw = violation_aucs(labelled, designs, column="judge adherence")
    return pd.DataFrame(
        [
            {"violation": kind, "adherent turns": v["n_adherent"], "violating turns": v["n_violation"],
             "AUC calibrated": v["auc"], "AUC raw judge": raw[kind]["auc"]}
            for kind, v in cal.items()
        ]
    )  # fmt: skip


def read_designs(data_dir: str | Path) -> pd.DataFrame | None:
    """turn_designs.csv of a benchmark dir (what each turn was built to be), or None."""
    path = Path(data_dir) / "turn_designs.csv"
    if not path.exists():
        return None
    return pd.read_csv(path, dtype={"conversation_id": str, "turn": str})


def _num(value: Any, digits: int = 2) -> float | None:
    """JSON-safe rounded number (None for NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else round(value, digits)


def turns_payload(
    frame: pd.DataFrame,
    conversations: Mapping[str, Mapping[str, Any]],
    *,
    questions: Sequence[str],
    target: str,
    adheres_at: float | None,
) -> dict[str, Any]:
    """What the page's script reads: rows as arrays (columns named once) and the conversations' text."""
    p_cols = [c for c in frame.columns if c.startswith("p_")]
    columns = [
        "conversation_id", "turn", "role", *[f"judge {q}" for q in questions],
        "calibrated", "adherence", "human mean", "disagreement", "humans", "p",
    ]  # fmt: skip
    rows = []
    for rec in frame.to_dict(orient="records"):
        turn = rec["turn"]
        rows.append(
            [
                rec["conversation_id"],
                int(turn) if str(turn).isdigit() else None,
                rec["role"],
                *[_num(rec[f"judge {q}"]) for q in questions],
                _num(rec["calibrated"]),
                _num(rec["adherence"], 3),
                _num(rec["human mean"]),
                _num(rec["disagreement"], 3),
                rec["humans"],
                [_num(rec[c], 3) for c in p_cols],
            ]
        )
    used = set(frame["conversation_id"])
    return {
        "columns": columns,
        "rows": rows,
        "questions": list(questions),
        "target": target,
        "values": [float(c[2:]) for c in p_cols],
        "adheres_at": adheres_at,
        "conversations": {c: dict(v) for c, v in conversations.items() if c in used},
    }


def turns_html(payload: Mapping[str, Any]) -> str:
    """The drill-down section: controls, an empty table the script fills, the JSON data and the script."""
    data = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    n = len(payload["rows"])
    texts = (
        "with their text"
        if payload["conversations"]
        else "(no conversations.jsonl in the data dir: ids only)"
    )
    at = payload.get("adheres_at")
    adherence = f"P({html.escape(payload['target'])} &ge; {at:g})" if at is not None else "adherence"
    note = (
        f"All {n} turns {texts}. <b>judge q</b>: the judge's expected answer to each question; "
        f"<b>calibrated</b>: the calibrated model's expected {html.escape(payload['target'])} answer, out of "
        "fold, averaged over the turn's human judges; <b>adherence</b>: "
        f"{adherence} under that distribution; <b>disagreement</b>: RMSE between the humans' answers and the "
        "calibrated prediction for each of them. Sorted worst disagreement first; click a column to sort, a "
        "row to read the conversation so far."
    )
    return f"""<h2 id="turns">Every turn: where the calibrator and the humans disagree</h2>
<p class="note">{note}</p>
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


TURNS_CSS = """
.rr-controls { display: flex; flex-wrap: wrap; gap: 0.4em 1em; align-items: center; font-size: 0.9em;
  padding: 0.4em 0; }
#rr-turns { width: 100%; table-layout: fixed; }
#rr-turns th { position: sticky; top: 0; background: #fff; z-index: 1; cursor: pointer; user-select: none;
  white-space: normal; overflow-wrap: break-word; vertical-align: bottom; font-size: 0.85em; }
#rr-turns th.rr-text-head { text-align: left; }
#rr-turns th.rr-sorted { background: #eef; }
#rr-turns td { white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
#rr-turns td.rr-text { text-align: left; }
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
  const cols = [
    {key: "conversation_id", label: "conversation", w: "9%"}, {key: "turn", label: "turn", w: "3%"},
    {key: "role", label: "role", w: "10%"},
    {key: "user", label: "user", w: "16%", text: true, get: r => text(r, 0)},
    {key: "assistant", label: "assistant", w: "20.5%", text: true, get: r => text(r, 1)},
    ...qs.map(q => ({key: "judge " + q, label: "judge " + q, head: "judge<br>" + esc(q), w: "4.5%"})),
    {key: "calibrated", label: "calibrated", head: "calib-<br>rated", w: "5%"},
    {key: "adherence", label: "adherence", head: "adher-<br>ence", w: "5%"},
    {key: "humans", label: "humans", w: "8%", text: true}, {key: "disagreement", label: "disagreement", head: "disagree-<br>ment", w: "6.5%"},
  ];
  cols.forEach(c => { if (!c.get) { const i = C[c.key]; c.get = r => r[i]; } });
  const state = {sort: "disagreement", desc: true, page: 0, open: null};
  const table = document.getElementById("rr-turns"), tbody = table.tBodies[0];
  const $ = id => document.getElementById(id);
  table.tHead.rows[0].innerHTML = cols.map(c => `<th style="width:${c.w}"${c.text ? ' class="rr-text-head"' : ""} data-key="${c.key}" title="sort by ${esc(c.label)}">${c.head || esc(c.label)}</th>`).join("");
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


def turn_sections(
    data_dir: str | Path, ds: Any, predictions: pd.DataFrame, *, adheres_at: float | None
) -> tuple[dict[str, Any], list[str], str]:
    """The report's per-turn parts: (results for metrics.json, sections per role and per violation type
    (when the data has roles / turn_designs.csv), the drill-down section)."""
    from calibration.report.page import html_table, section_html

    conversations = read_conversations(Path(data_dir) / "conversations.jsonl")
    designs = read_designs(data_dir)
    if designs is not None and "role" in designs.columns:  # the benchmark's short role names
        for cid, role in designs.drop_duplicates("conversation_id")[["conversation_id", "role"]].itertuples(
            index=False
        ):
            if cid in conversations:
                conversations[cid]["role"] = role
    frame = prepare_turns(ds, predictions, conversations, adheres_at=adheres_at)
    target = ds.rubric.target
    at = "the adherence threshold" if adheres_at is None else f"{adheres_at:g}"
    results: dict[str, Any] = {}
    sections = []
    roles = per_role_table(frame)
    if roles is not None:
        results["per_role"] = roles.to_dict(orient="records")
        sections.append(
            section_html(
                "Per role",
                f"Adherence = P({html.escape(target)} &ge; {at}). Human adherence rate: the share of the human "
                f"answers at or above {at}; calibrated and raw judge: the mean predicted probability (calibrated out "
                "of fold, averaged over each turn's judges); calibrated RMSE against the human answers. Labelled "
                "turns only.",
                None,
                html_table(roles),
            )
        )
    if designs is not None and "design" in designs.columns:
        violations = violation_table(frame, designs)
        results["violation_auc"] = violations.to_dict(orient="records")
        sections.append(
            section_html(
                "Adherent turns against each violation type",
                "AUC = the probability that an adherent turn (as designed in turn_designs.csv) gets a higher adherence "
                "than a violating turn of that type (0.5 = chance, 1 = perfect); calibrated (out of fold) against "
                "the raw judge on the same labelled turns.",
                None,
                html_table(violations),
            )
        )
    payload = turns_payload(
        frame, conversations, questions=ds.rubric.ids, target=target, adheres_at=adheres_at
    )
    return results, sections, turns_html(payload)
