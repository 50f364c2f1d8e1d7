"""The report's per-turn drill-down: the data (prepare_turns) and the page in real headless Chromium with
5,000 turns (DOM checks, no console errors, a screenshot; open and filter times printed, not asserted)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration.data.dataset import load_dataset
from calibration.report.page import PAGE
from calibration.report.turns import prepare_turns, turns_html, turns_payload
from calibration.report.turns_html import TURNS_CSS

from .browser import chromium, console, dom_check, needs_chromium
from .conftest import make_native_dataset

ROLES = ["fintech_support", "maths_tutor", "telehealth_intake", "airline_booking"]


def _oof_predictions(ds, seed: int = 0) -> pd.DataFrame:
    """A stand-in for cv's out-of-fold predictions: one row per label row of the target."""
    rng = np.random.default_rng(seed)
    t = ds.target_index
    rows = []
    for r, (i, j) in enumerate(zip(ds.label_item, ds.label_judge, strict=True)):
        p = rng.dirichlet(np.ones(4))
        answer = ds.answers[r, t]
        rows.append(
            {
                "conversation_id": ds.items["conversation_id"].iloc[i],
                "turn": ds.items["turn"].iloc[i],
                "judge_id": ds.judges[j],
                "question_id": "overall",
                "method": "calibrated",
                **{f"p_{v}": p[k] for k, v in enumerate((1, 2, 3, 4))},
                "expected": float(p @ np.arange(1, 5)),
                "answer": float(answer + 1) if answer >= 0 else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _conversations(ds) -> dict[str, dict]:
    out = {}
    for n, (cid, part) in enumerate(ds.items.groupby("conversation_id", sort=False)):
        turns = [
            [f"user message {t} of {cid}: <b>not bold</b>", f"reply {t} of {cid} " + "lorem " * 20]
            for t in range(len(part))
        ]
        out[cid] = {
            "role": ROLES[n % 4],
            "chatbot_role": f"You are the {ROLES[n % 4]} assistant.",
            "turns": turns,
        }
    return out


def test_prepare_turns_has_one_row_per_item_with_disagreement(tmp_path):
    ds = load_dataset(make_native_dataset(tmp_path / "d", n_conversations=10))
    predictions = _oof_predictions(ds)
    frame = prepare_turns(ds, predictions, _conversations(ds), adheres_at=3)
    assert len(frame) == len(ds.items) and frame["role"].isin(ROLES).all()
    assert {"judge scope", "judge tone", "judge overall", "calibrated", "adherence", "disagreement"} <= set(frame)
    first = frame.iloc[0]
    mine = predictions[(predictions.conversation_id == first.conversation_id) & (predictions.turn == first.turn)]
    expected = np.sqrt(((mine["answer"] - mine["expected"]) ** 2).mean())
    assert first["disagreement"] == pytest.approx(expected)
    assert first["adherence"] == pytest.approx(mine[["p_3", "p_4"]].sum(axis=1).mean())
    assert all(j in first["humans"] for j in mine["judge_id"])
    assert frame["judge overall"].between(1, 4).all()
    unlabelled = prepare_turns(ds, None, {})
    assert unlabelled["calibrated"].isna().all() and len(unlabelled) == len(ds.items)


def _page(tmp_path: Path, n_conversations: int) -> tuple[Path, dict]:
    ds = load_dataset(make_native_dataset(tmp_path / "d", n_conversations=n_conversations, turns=5))
    convs = _conversations(ds)
    frame = prepare_turns(ds, _oof_predictions(ds), convs, adheres_at=3)
    payload = turns_payload(frame, convs, questions=ds.rubric.ids, target="overall", adheres_at=3)
    page = PAGE.format(title="overall", intro="drill-down test", sections=turns_html(payload))
    page = page.replace("</style>", TURNS_CSS + "</style>", 1)
    path = tmp_path / "turns.html"
    path.write_text(page, encoding="utf-8")
    return path, payload


# Runs after the page's own script: times the open (navigation start to here) and each interaction,
# forcing layout (offsetHeight) so the time includes drawing the rows, and writes what it saw into the DOM.
PROBE = """<script>
window.__errors = window.__errors || [];
window.addEventListener("load", () => {
  const out = {open_ms: performance.now(), errors: window.__errors};
  const $ = id => document.getElementById(id), rows = () => document.querySelectorAll("#rr-turns tr.rr-row");
  const time = f => { const t = performance.now(); f(); document.body.offsetHeight; return performance.now() - t; };
  out.first_rows = rows().length;
  out.first_sorted_desc = Array.from(rows()).slice(0, 5).map(r => parseFloat(r.lastChild.textContent));
  out.filter_role_ms = time(() => { $("rr-role").value = "maths_tutor"; $("rr-role").dispatchEvent(new Event("input")); });
  out.roles_after = new Set(Array.from(rows()).map(r => r.children[2].textContent)).size;
  out.count_after_role = $("rr-count").textContent;
  out.filter_question_ms = time(() => { $("rr-q").value = "scope"; $("rr-qmax").value = "2"; $("rr-qmax").dispatchEvent(new Event("input")); });
  out.count_after_question = $("rr-count").textContent;
  out.filter_text_ms = time(() => { $("rr-role").value = ""; $("rr-q").value = ""; $("rr-text").value = "c007"; $("rr-text").dispatchEvent(new Event("input")); });
  out.text_rows = rows().length;
  out.sort_ms = time(() => { $("rr-text").value = ""; $("rr-text").dispatchEvent(new Event("input")); document.querySelector('#rr-turns th[data-key="adherence"]').click(); });
  const adh = Array.from(rows()).map(r => parseFloat(r.children[r.children.length - 3].textContent)).filter(v => !isNaN(v));
  out.sorted_by_adherence = adh.every((v, i) => i === 0 || adh[i - 1] <= v);
  out.click_ms = time(() => rows()[0].click());
  const open = document.querySelector("#rr-turns tr.rr-open");
  out.detail = open ? {messages: open.querySelectorAll(".rr-msg").length, focus: open.querySelectorAll(".rr-focus").length, html: open.innerHTML.includes("<b>not bold</b>")} : null;
  const pre = document.createElement("pre"); pre.id = "rr-check"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
ERRORS = '<script>window.__errors = []; window.addEventListener("error", e => window.__errors.push(String(e.message)), true);</script>'


@needs_chromium
def test_drilldown_with_5000_turns_in_headless_chromium(tmp_path):
    path, payload = _page(tmp_path, n_conversations=1000)
    assert len(payload["rows"]) == 5000
    page = path.read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(
        page.replace("<head>", "<head>" + ERRORS, 1).replace("</body>", PROBE + "</body>", 1),
        encoding="utf-8",
    )
    dom = chromium("--dump-dom", probe.as_uri(), user_dir=tmp_path / "profile-a", virtual_time=False)
    check = dom_check(dom)
    assert check["errors"] == []
    assert not console(dom.stderr)
    assert check["first_rows"] == 50  # one page drawn, not 5,000 rows
    assert check["first_sorted_desc"] == sorted(check["first_sorted_desc"], reverse=True)  # worst first
    assert check["roles_after"] == 1 and "of 1250" in check["count_after_role"]
    assert "of 5000" not in check["count_after_question"]
    assert check["text_rows"] == 5 and check["sorted_by_adherence"]
    assert check["detail"] is not None and check["detail"]["focus"] == 1 and check["detail"]["messages"] >= 2
    assert check["detail"]["html"] is False  # conversation text is escaped, never markup
    timings = {k: round(v, 1) for k, v in check.items() if k.endswith("_ms")}
    print(f"drill-down, 5000 turns, {path.stat().st_size / 1e6:.1f} MB page, headless Chromium (ms): {timings}")

    first = payload["rows"][0]
    shot = tmp_path / "drilldown.png"
    taken = chromium(
        f"--screenshot={shot}",
        "--window-size=1400,1100",
        f"{path.as_uri()}#turn={first[0]}/{first[1]}",
        user_dir=tmp_path / "profile-b",
        virtual_time=False,
    )
    assert shot.exists() and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    print(f"screenshot saved to {shot}")
