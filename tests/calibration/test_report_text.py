"""The report's words read as text: no literal backticks, headers that wrap between words, ids shown whole,
one short name per role, and the Deploy line of a `report model=` page (calibration/report/)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pandas as pd
import pytest

from calibration.pages.parts import prose_html
from calibration.report.page import PAGE
from calibration.report.reviewers import reviewer_section
from calibration.report.turns import read_conversations, turns_html
from calibration.report.turns_html import TURNS_CSS
from calibration.report.verdict import prepare_verdict, verdict_html
from tests.calibration.test_report_turns import _page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_code_spans_render_as_code_and_the_rest_is_escaped():
    assert prose_html("run `cv target=scope` to test <it>") == "run <code>cv target=scope</code> to test &lt;it&gt;"
    block = {
        "epsilon": 0.1,
        "questions": {
            "scope": {
                "alt_test": None,
                "calibrated": None,
                "reviewers": {"pearson": 0.5, "rmse": 0.7, "kappa": 0.4},
                "verdict": "scope: not tested (run `cv target=scope` to test it).",
            }
        },
    }
    page = reviewer_section(block)
    assert "`" not in page and "<code>cv target=scope</code>" in page


def test_roles_have_one_short_name_in_the_turns_table(tmp_path):
    long = "You are Nova, the customer-support assistant of Brightpay, a retail banking app. Scope: cards."
    lines = [
        {
            "conversation_id": "a",
            "role": "fintech_support",
            "chatbot_role": long,
            "turns": [{"user": "u", "assistant": "x"}],
        },
        {"conversation_id": "b", "chatbot_role": long, "turns": [{"user": "u", "assistant": "x"}]},
    ]
    path = tmp_path / "conversations.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    convs = read_conversations(path)
    assert convs["a"]["role"] == "fintech_support" and convs["a"]["chatbot_role"] == long
    assert re.fullmatch(r"You are Nova, the \.\.\. #[0-9a-f]{6}", convs["b"]["role"])  # as estimate's rows name it


def _table(rmse: dict[str, float]) -> pd.DataFrame:
    rows = []
    for method, value in rmse.items():
        for metric in ("rmse", "pearson"):
            v = value if metric == "rmse" else 0.4
            rows.append(
                {"method": method, "metric": metric, "value": v, "low": v - 0.05, "high": v + 0.05, "p_value": 0.3}
            )
    return pd.DataFrame(rows)


def _shipped_verdict(rmse: dict[str, float], kind: str) -> str:
    verdict = prepare_verdict(_table(rmse), [], judge=None, size={}, data="runs/tiny")
    verdict["shipped"] = {"dir": "runs/tiny/model", "kind": kind}  # calibration/report/shipped.py shipped_verdict
    return verdict_html(verdict), verdict["deploy"]


def test_a_model_page_says_whether_its_model_is_the_one_to_deploy():
    # a page of an ordinal model: its rows are `calibrated`, the network's `network` (report/shipped.py as_shipped)
    page, deploy = _shipped_verdict(
        {"calibrated": 0.79, "network": 0.80, "linear": 0.82, "judge_mean": 0.78}, "ordinal"
    )
    assert deploy["model"] == "ordinal" and deploy["rmse"] == 0.79
    assert "<b>Deploy</b>: this page's model, the ordinal model, has the lowest RMSE" in page
    page, deploy = _shipped_verdict(
        {"calibrated": 0.81, "network": 0.80, "linear": 0.82, "judge_mean": 0.78}, "ordinal"
    )
    assert deploy["model"] == "network" and deploy["rmse"] == 0.80
    assert "the calibration network has the lowest RMSE of the models you can train (0.800)" in page
    assert "not this page's ordinal model" in page and "role-rubric train data=runs/tiny out=MODEL_DIR" in page


def test_a_network_page_deploys_as_cv_does():
    rmse = {"calibrated": 0.80, "linear": 0.82, "ordinal": 0.79, "judge_mean": 0.78}
    page, deploy = _shipped_verdict(rmse, "network")
    assert deploy["model"] == "ordinal" and "not this page's network model" in page and "model=ordinal" in page


PROBE = """<script>
window.addEventListener("load", () => {
  const broken = [], overflowing = [];
  document.querySelectorAll("#rr-turns th").forEach(th => {
    if (th.scrollWidth > th.clientWidth + 1) overflowing.push(th.textContent);
    const walk = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
        if (range.getClientRects().length > 1) broken.push(m[0]);  // a word over two lines
      }
    }
  });
  const ids = Array.from(document.querySelectorAll("#rr-turns td.rr-id"));
  const out = {broken, overflowing, heads: document.querySelectorAll("#rr-turns th").length,
               cut: ids.filter(td => td.scrollWidth > td.clientWidth + 1).map(td => td.textContent),
               ids: Array.from(document.querySelectorAll("#rr-turns tr.rr-row > td:first-child")).map(td => td.textContent)};
  const pre = document.createElement("pre"); pre.id = "rr-check"; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`)")
@pytest.mark.parametrize("width", [1000, 1400])
def test_headers_wrap_between_words_and_ids_are_whole_in_chromium(tmp_path, width):
    _, payload = _page(tmp_path, n_conversations=6)
    long_id = {cid: f"history/telecom-support-{cid}" for cid in payload["conversations"]}
    payload["rows"] = [[long_id[r[0]], *r[1:]] for r in payload["rows"]]
    payload["conversations"] = {long_id[c]: v for c, v in payload["conversations"].items()}
    payload["questions"] = ["prohibited" if q == "scope" else q for q in payload["questions"]]
    payload["columns"] = ["judge prohibited" if c == "judge scope" else c for c in payload["columns"]]
    page = PAGE.format(title="overall", intro="", sections=turns_html(payload)).replace(
        "</style>", TURNS_CSS + "</style>", 1
    )
    path = tmp_path / "page.html"
    path.write_text(page.replace("</body>", PROBE + "</body>", 1), encoding="utf-8")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [CHROMIUM, *flags, f"--window-size={width},900", "--dump-dom", path.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'<pre id="rr-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, dom.stderr[-2000:]
    check = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert check["heads"] > 8 and check["broken"] == [] and check["overflowing"] == []
    assert check["cut"] == [] and check["ids"] and all(i.startswith("history/telecom-support-c") for i in check["ids"])
