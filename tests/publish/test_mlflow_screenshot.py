"""The published feedback where MLflow users look: MLflow's own trace view, opened in a real headless Chromium
(tests/labelling/cdp.py), shows a turn's role_rubric/adherence with its value, source and rationale. The
screenshot goes to $ROLE_RUBRIC_SCREENSHOTS (docs/img/mlflow-trace-feedback.png is one), else the test's folder;
skipped where Chromium is missing."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pandas as pd
import pytest

from calibration.cli import main
from tests.labelling.cdp import CHROMIUM, chromium_page

CLICK = "(() => {{ const b = [...document.querySelectorAll('button')].find(b => {cond}); if (b) b.click(); return !!b; }})()"
VALUE_AT = (
    "(() => {{ const el = [...document.querySelectorAll('*')].find(e => e.childElementCount === 0 && "
    "(e.innerText || '').trim() === '{value}'); if (!el) return null; const r = el.getBoundingClientRect(); "
    "return [r.left, r.top, r.height]; }})()"
)


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_mlflow_trace_view_shows_the_turns_feedback(mlflow_scored, tmp_path):
    run = mlflow_scored
    assert main(["publish", "target=mlflow", f"scores={run['scores']}", f"tracking_uri={run['url']}"]) == 0
    turns = pd.read_csv(run["scores"].with_name("scores_turns.csv"), dtype={"conversation_id": str})
    row = turns[turns["turn"] == 1].iloc[0]
    record = next(
        json.loads(line)
        for line in run["conversations"].read_text().splitlines()
        if json.loads(line)["conversation_id"] == row["conversation_id"]
    )
    trace_id = record["turns"][1]["mlflow_trace_id"]
    shots = Path(os.environ.get("ROLE_RUBRIC_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / "mlflow-trace-feedback.png"
    text = asyncio.run(_open(run["url"], run["experiment_id"], trace_id, f"{row['adherence']:g}", tmp_path, shot))
    assert "role-rubric/model-" in text and "adherence" in text
    assert f"Calibrated P(overall >= 3) = {row['adherence']:.3f}" in text  # the rationale, expanded
    assert shot.stat().st_size > 20_000


async def _open(url: str, experiment_id: str, trace_id: str, value: str, tmp: Path, shot: Path) -> str:
    """The trace in MLflow's trace view, full screen, its assessments open and the feedback expanded: the
    page's text, after the screenshot."""
    async with chromium_page(tmp / "chromium", width=1440, height=900) as page:
        await page.goto(f"{url}/#/experiments/{experiment_id}/traces?selectedEvaluationId={trace_id}")
        assess = "(b.getAttribute('aria-label') || '').startsWith('Assess trace')"
        await page.wait_for(f"[...document.querySelectorAll('button')].some(b => {assess})", timeout=120)
        for cond in ("b.innerText.trim() === 'Got it'", "b.getAttribute('aria-label') === 'Close'",
                     "b.getAttribute('aria-label') === 'Full screen'", assess):  # fmt: skip
            await page.js(CLICK.format(cond=cond))  # a guidance popup and the assistant panel, where shown
            await asyncio.sleep(1.0)
        await page.wait_for(VALUE_AT.format(value=value), timeout=60)
        left, top, height = await page.js(VALUE_AT.format(value=value))
        await page.click(left - 18, top + height / 2)  # the chevron before the value: source and rationale
        await page.wait_for("document.body.innerText.includes('Rationale')", timeout=30)
        await page.screenshot(shot)
        return await page.js("document.body.innerText")
