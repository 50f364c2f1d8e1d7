"""Gather health: fallback share and coverage quantiles in the summary; `role-rubric gather` fails loudly
on a judge that mostly names no option, unless judge.allow_low_coverage=true."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from conftest import make_conversations
from openai_server import FakeOpenAI

from calibration.cli import main
from rubric.conversations import save_conversations
from rubric.judge.gather import gather
from rubric.judge.health import health_of, health_of_llm
from rubric.notices import cli_notices


class ShyServer(FakeOpenAI):
    """A judge that puts only 5% of its mass on the options (the rest on "Okay")."""

    def _top(self, prompt, fault, k):
        return [
            (t, lp + math.log(0.05)) if t.strip().isdigit() else (t, lp) for t, lp in super()._top(prompt, fault, k)
        ][:k]


@pytest.fixture
def shy():
    with ShyServer() as srv:
        yield srv


def cli(server, tmp_path, *extra):
    save_conversations(make_conversations(2, 2), tmp_path / "conversations.jsonl")
    return main(
        [
            "gather",
            f"conversations={tmp_path / 'conversations.jsonl'}",
            f"out={tmp_path / 'out'}",
            "judge=llamacpp",
            f"judge.base_url={server.base_url}",
            "progress=false",
            *extra,
        ]
    )


def test_summary_gives_fallback_share_and_coverage_quantiles(server, judge, rubric):
    server.faults.extend(["no_option"] * 2)  # one pair: asked, re-asked, then a fallback
    res = gather(make_conversations(2, 2), rubric, {**judge, "concurrency": 1})
    s = res.summary
    assert s.fallbacks == 1 and s.fallback_share == pytest.approx(1 / 20)
    assert s.coverage["median"] == pytest.approx(0.9) and s.coverage["p10"] <= s.coverage["median"]
    assert s.warning is None  # 5% is the limit, not over it
    assert "fallbacks 5.0%; coverage p10" in s.line() and "median 0.9" in s.line()


def test_a_low_coverage_gather_fails_loudly_and_keeps_its_output(shy, tmp_path, capsys):
    assert cli(shy, tmp_path) == 4
    err = capsys.readouterr().err.strip().splitlines()
    assert "WARNING: unreliable judge output: median coverage 0.0" in err[-2]
    assert "judge.allow_low_coverage=true" in err[-1]
    summary = json.loads((tmp_path / "out/gather_summary.json").read_text())
    assert summary["coverage"]["median"] < 0.1 and summary["warning"].startswith("WARNING")
    assert len(pd.read_csv(tmp_path / "out/llm.csv")) == 20 * 4
    # accepted on request: exit 0, the warning still printed; the rerun comes from the cache
    assert cli(shy, tmp_path, "judge.allow_low_coverage=true") == 0
    assert "WARNING: unreliable judge output" in capsys.readouterr().err


def test_too_many_fallbacks_fail_too(server, tmp_path, capsys):
    server.modes.add("no_option")
    assert cli(server, tmp_path) == 4
    assert "100.0% fallbacks > 5%" in capsys.readouterr().err


def test_a_healthy_gather_exits_0(server, tmp_path, capsys):
    assert cli(server, tmp_path) == 0
    assert "WARNING" not in capsys.readouterr().err


def test_health_of_an_llm_csv_counts_pairs_not_rows():
    rows = [("c", 0, "q", opt, 0.25, cov, src) for (cov, src) in [(0.9, "logprobs")] for opt in "1234"] + [
        ("c", 1, "q", opt, 0.25, 0.0, "fallback") for opt in "1234"
    ]
    llm = pd.DataFrame(rows, columns=["conversation_id", "turn", "question_id", "option", "prob", "coverage", "source"])
    h = health_of_llm(llm)
    assert h.pairs == 2 and h.fallback_share == 0.5 and h.coverage["median"] == pytest.approx(0.45)
    assert len(h.problems) == 2
    assert health_of_llm(llm.drop(columns=["coverage", "source"])) is None
    assert health_of([], []).warning() is None


def test_training_data_from_an_unreliable_judge_is_flagged_on_load(shy, tmp_path, capsys):
    from calibration.data.dataset import load_dataset

    assert cli(shy, tmp_path, "judge.allow_low_coverage=true") == 0
    llm = pd.read_csv(tmp_path / "out/llm.csv")
    items = llm[["conversation_id", "turn"]].drop_duplicates()
    labels = items.assign(judge_id="J1", question_id="overall", answer=3)
    labels.to_csv(tmp_path / "out/labels.csv", index=False)
    capsys.readouterr()
    with cli_notices():  # the warning on stderr, as the command line prints it
        ds = load_dataset(tmp_path / "out")
    err = capsys.readouterr().err
    assert "llm.csv: WARNING: unreliable judge output: median coverage" in err and len(ds.items) == 4
    llm.assign(coverage=0.9).to_csv(tmp_path / "out/llm.csv", index=False)
    with cli_notices():
        load_dataset(tmp_path / "out")
    assert capsys.readouterr().err == ""
