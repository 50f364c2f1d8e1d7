"""The report's decision and labelling sections from frames: turn votes, the risk-coverage table, the plots."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from calibration.report.decisions import (
    plot_decisions,
    plot_labelling,
    prepare_decisions,
    prepare_labelling,
    turn_table,
)


def _rows(n_turns: int = 120, seed: int = 0) -> pd.DataFrame:
    """Three reviewers per turn, whose answers follow the predicted distribution (calibrated by design)."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_turns):
        p_high = rng.beta(0.5, 0.5)
        probs = np.array([(1 - p_high) / 2, (1 - p_high) / 2, p_high / 2, p_high / 2])
        for j in range(3):
            rows.append(
                {
                    "conversation_id": f"c{i // 2}",
                    "turn": str(i % 2),
                    "judge_id": f"j{j}",
                    **{f"p_{v}": probs[v - 1] for v in (1, 2, 3, 4)},
                    "answer": rng.choice(4, p=probs) + 1,
                }
            )
    return pd.DataFrame(rows)


def test_turn_table_counts_each_turns_votes():
    table = turn_table(_rows(10), adheres_at=3)
    assert len(table) == 10 and (table["n_reviewers"] == 3).all()
    assert table["n_adheres"].between(0, 3).all() and table["p_adheres"].between(0, 1).all()


def test_decisions_table_and_plot():
    table = prepare_decisions(turn_table(_rows(), adheres_at=3), splits=5, levels=(0.1, 0.3))
    assert table["risk"].tolist() == [0.1, 0.3]
    assert table["coverage_mean"].is_monotonic_increasing
    fig, ax = plot_decisions(table)
    assert len(ax.lines) == 3


def test_labelling_section_reads_the_benchmark_json(tmp_path):
    curve = {
        "share": [0.1, 0.5, 1.0],
        "rmse_mean": [0.9, 0.8, 0.75],
        "rmse_ci95_half": [0.01, 0.01, 0.0],
        "nll_mean": [1.2, 1.1, 1.0],
        "label_saving": None,
        "share_to_reach_random_full_rmse": 1.0,
    }
    path = tmp_path / "al.json"
    path.write_text(
        json.dumps(
            {
                "dataset": "x",
                "seeds": [0, 1],
                "random_full_rmse": 0.75,
                "strategies": {"random": curve, "bald": {**curve, "label_saving": 0.3}},
            }
        )
    )
    labelling = prepare_labelling(path)
    assert labelling["table"].set_index("strategy").loc["bald", "label_saving"] == pytest.approx(0.3)
    fig, ax = plot_labelling(labelling)
    assert len(ax.lines) == 3  # two strategies and random's level at 100%
