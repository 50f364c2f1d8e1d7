"""benchmarks/monitor_streams.py: streams of whole real conversations. The fast tests draw streams from a pool
of LLM-Rubric's real conversations and reviewers' rates (imported, no training): a drop scenario's oracle rate
falls by its target, a null scenario's does not. The slow one builds a pool with the cv (a small ensemble)
and reads it back from the cache."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import monitor_pools as mp  # noqa: E402
import monitor_streams as ms  # noqa: E402

needs_anchors = pytest.mark.skipif(not ms.ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")


@pytest.fixture(scope="module")
def pool():
    """The anchors' real conversations with their reviewers' rates; the judge is the reviewers' rate plus a
    fixed noise (no training in the fast tests), its changed copy that lowered by 0.1."""
    from calibration.data.dataset import load_dataset
    from calibration.data.importers import import_llm_rubric

    with tempfile.TemporaryDirectory() as tmp:
        import_llm_rubric(ms.ANCHORS / "llm_evaluations.tsv", ms.ANCHORS / "human_judgments.tsv", tmp)
        ds = load_dataset(tmp)
    ids, oracle = mp.oracle_rates(ds)
    judge = np.clip(oracle + np.random.default_rng(1).normal(0, 0.1, len(oracle)), 0, 1)
    canary = np.zeros(len(ids), bool)
    canary[:40] = True
    role = np.array([c.split("_")[0] for c in ids])
    return ms.Pool("anchors", ids, role, oracle, {"j": judge}, {"j": judge - 0.1}, canary)


def _oracle_change(pool, scenario, streams=300, seed=0):
    """Mean (oracle rate after the change - before it) over streams, and its Monte Carlo standard error."""
    out = ms.achieved_drops(pool, scenario, streams, seed)
    return out["achieved"], out["monte_carlo_se"]


@needs_anchors
@pytest.mark.parametrize("name", ["drop_10", "drop_05"])
def test_a_drop_scenario_lowers_the_reviewers_rate_by_its_target(pool, name):
    achieved, se = _oracle_change(pool, ms.SCENARIOS[name])
    assert abs(achieved + ms.SCENARIOS[name].size) < 4 * se + 0.002, (achieved, se)
    assert se < 0.01


@needs_anchors
@pytest.mark.parametrize("name", ["null_fixed_mix", "null_mix_moving"])
def test_a_null_scenario_leaves_the_reviewers_rate_where_it_was(pool, name):
    achieved, se = _oracle_change(pool, ms.SCENARIOS[name])
    assert abs(achieved) < 4 * se + 0.002, (achieved, se)


@needs_anchors
def test_a_tilt_reaches_its_target_exactly_and_refuses_the_impossible(pool):
    o = pool.oracle[pool.role == "V1"]
    for drop in (0.0, 0.05, 0.1):
        assert ms.tilt(o, drop) @ o == pytest.approx(o.mean() - drop, abs=1e-9)
    with pytest.raises(ValueError, match="below the lowest"):
        ms.tilt(o, o.mean() - o.min() + 0.01)


@needs_anchors
def test_streams_have_52_windows_of_every_role_and_the_truth(pool):
    rng = np.random.default_rng(0)
    s = ms.draw_stream(pool, ms.SCENARIOS["null_small_roles"], rng, "j")
    assert len(s.windows) == 52 and s.change_start is None and not s.judge_changed
    sizes = np.array([[len(w[r]) for r in sorted(w)] for w in s.windows])
    assert sizes.shape[1] == 5 and sizes.min() >= 5 and sizes.max() <= 20
    canary = set(np.flatnonzero(pool.canary))
    assert not canary & {int(i) for w in s.picked for idx in w.values() for i in idx}  # the canary stays out
    big = ms.draw_stream(pool, ms.SCENARIOS["null_large_windows"], rng, "oracle")
    assert {sum(len(v) for v in w.values()) for w in big.windows} == {250}
    assert np.allclose(
        np.concatenate(list(big.windows[3].values())), pool.oracle[np.concatenate(list(big.picked[3].values()))]
    )


@needs_anchors
def test_the_judge_change_switches_to_the_changed_rates_only_from_its_window(pool):
    s = ms.draw_stream(pool, ms.SCENARIOS["judge_change"], np.random.default_rng(3), "j")
    assert s.judge_changed and 13 <= s.judge_from < 40 and s.change_start is None
    for w, (rates, idx) in enumerate(zip(s.windows, s.picked, strict=True)):
        source = pool.changed["j"] if w >= s.judge_from else pool.judges["j"]
        assert all(np.array_equal(rates[r], source[idx[r]]) for r in rates)
    assert not s.target_drop.any()  # no chatbot change


@needs_anchors
def test_the_failing_role_mostly_fails_and_drift_reaches_its_target_at_the_last_window(pool):
    members, shares = ms.stream_roles(pool, ms.SCENARIOS["null_failing_role"])
    worst = min(members, key=lambda r: pool.oracle[members[r]].mean())
    assert pool.oracle[members[worst]].mean() < ms.FAIL_RATE and shares.sum() == pytest.approx(1)
    start, drops = ms.drop_schedule(ms.SCENARIOS["drift_10"], np.random.default_rng(0))
    assert start == 13 and drops[:13].sum() == 0 and drops[-1] == pytest.approx(0.10)
    assert np.all(np.diff(drops[13:]) > 0)


@pytest.mark.slow
@needs_anchors
def test_load_pools_builds_out_of_fold_rates_once_and_reads_the_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(ms, "ENSEMBLE", 2)
    (built,) = ms.load_pools(tmp_path, sources=("anchors",))
    assert built.judges["gpt35"].shape == built.oracle.shape == (223,) and built.canary.sum() == 40
    assert np.corrcoef(built.oracle, built.judges["gpt35"])[0, 1] > 0.2  # out of fold, yet informative
    assert built.changed["gpt35"].mean() < built.judges["gpt35"].mean()  # the harsher judge, same turns
    start = time.perf_counter()
    (cached,) = ms.load_pools(tmp_path, sources=("anchors",))
    assert time.perf_counter() - start < 5
    assert np.array_equal(cached.judges["gpt35"], built.judges["gpt35"]) and np.array_equal(cached.role, built.role)


@needs_anchors
def test_a_one_role_drop_lowers_that_role_alone(pool):
    import dataclasses

    scenario = dataclasses.replace(ms.SCENARIOS["drop_10"], drop_role="V1")
    rng = np.random.default_rng(5)
    change = {"V1": [], "V2": []}
    for _ in range(200):
        s = ms.draw_stream(pool, scenario, rng, "oracle")
        for r in change:
            before = np.concatenate([w[r] for w in s.windows[: s.change_start]]).mean()
            after = np.concatenate([w[r] for w in s.windows[s.change_start :]]).mean()
            change[r].append(after - before)
    v1, v2 = np.array(change["V1"]), np.array(change["V2"])
    assert abs(v1.mean() + 0.10) < 4 * v1.std() / np.sqrt(len(v1)) + 0.003
    assert abs(v2.mean()) < 4 * v2.std() / np.sqrt(len(v2)) + 0.003
    with pytest.raises(KeyError, match="not a role"):
        ms.draw_stream(pool, dataclasses.replace(scenario, drop_role="V9"), rng, "oracle")
