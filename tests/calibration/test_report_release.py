"""The report's "The release as a whole" on a synthetic out-of-fold predictions frame."""

from __future__ import annotations

import pytest

from calibration.evaluation.adherence import item_adherence
from calibration.report.release import release_section, release_summary
from tests.calibration.test_report import _predictions


def test_release_summary_rates_and_simulated_estimates():
    predictions = _predictions(conversations=60)
    summary = release_summary(predictions, 0.9, adheres_at=3.0, draws=100)
    items = item_adherence(predictions, "calibrated", adheres_at=3.0)
    assert summary["humans"] == pytest.approx(items["human"].mean())
    assert summary["calibrator"] == pytest.approx(items["adherence"].mean())
    assert summary["raw_judge"] == 0.9 and summary["n_conversations"] == 60
    assert [r["n"] for r in summary["by_n"]] == [10, 20, 40]  # 80 needs more than 60 conversations
    widths = [r["ppi_width"] for r in summary["by_n"]]
    assert widths == sorted(widths, reverse=True)  # more labels, narrower
    for row in summary["by_n"]:
        assert row["ppi_width"] <= row["humans_width"] + 1e-9  # power tuning never widens
        assert row["effective_labels"] >= row["n"] - 1e-6
        assert 0.75 <= row["ppi_coverage"] <= 1.0
    page = release_section(summary)
    assert "The release as a whole" in page and "role-rubric estimate" in page and page.count("<table>") == 2
