"""The benchmarks run end to end in a small configuration and print the JSON the README quotes.

Slow (about a minute in all): they train and gather for real. The figures they print are checked for
sense (a batched run beats one model at a time, the calibrated model beats the constant baseline, a
cached rerun makes no request), not for the README's values, which need the full settings.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.benchmark_runs import run_benchmark

ROOT = Path(__file__).resolve().parents[1]
ANCHORS = ROOT.parent / "shared" / "anchors" / "llm_rubric_synth"

pytestmark = pytest.mark.slow


def _run(script: str, *args: str, **flags: object) -> dict:
    """Run a benchmark with `args` and then `flags` (name=value: `--name value`, the name's underscores as
    dashes; a list: several values); its results file goes to a scratch folder (never over benchmarks/results/)
    and must hold what it printed, with the command and the machine."""
    for name, value in flags.items():
        args += (f"--{name.replace('_', '-')}", *map(str, value if isinstance(value, list) else [value]))
    with tempfile.TemporaryDirectory() as results:
        printed = run_benchmark(script, *args, results=Path(results), timeout=600)
        saved = json.loads((Path(results) / f"{Path(script).stem}.json").read_text())
    assert saved["result"] == printed
    assert saved["command"].startswith(f"python benchmarks/{script}") and saved["machine"]["cores"] >= 1
    assert saved["machine"]["torch"] and saved["machine"]["cpu_model"] and saved["date"].endswith("UTC")
    return printed


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_train_speed_prints_models_per_second_and_the_step_split():
    out = _run("train_speed.py", "--anchors", str(ANCHORS), "--repeats", "1", "--single-models", "1")
    assert out["config"]["batched_models"] == 40
    assert out["speedup"] > 1.5  # 40 models as one computation against one at a time
    step = out["per_model_step_ms"]
    assert 0 < step["batched_adam"] < step["one_at_a_time"]
    assert 0 < step["batched_forward_backward"] < step["one_at_a_time"]
    assert step["budget_for_30x_two_cores"] == pytest.approx(2 * step["budget_for_30x_one_core"], abs=2e-4)


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_llm_rubric_cv_prints_the_table_and_smece():
    out = _run("llm_rubric_cv.py", "--anchors", str(ANCHORS), "--seeds", "0", "--override", "train.ensemble=2")
    assert out["settings"]["ensemble"] == 2
    assert [r["seed"] for r in out["per_seed"]] == [0]
    assert out["calibrated"]["rmse"]["mean"] < out["baselines_seed0"]["constant"]["rmse"]
    assert out["calibrated"]["pearson"]["mean"] > 0.3
    assert set(out["smece_one_vs_rest"]["0"]) == {"1", "2", "3", "4"}
    assert 0 < out["smece_max"] < 0.2


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_shift_prints_every_method_and_the_paired_interval(tmp_path):
    out = _run("shift.py", anchors=ANCHORS, seeds=0, ensemble=2, only="covariate_shift_up,new_judges", work=tmp_path)
    assert out["settings"]["ensemble"] == 2
    for name, folds in (("covariate_shift_up", 1), ("new_judges", 4)):
        bench = out[name]
        assert bench["folds"] == folds and bench["seeds"] == [0] and bench["rows"] > 100
        methods = bench["methods"]
        assert set(methods) == {"calibrated", "network_paper", "linear", "ordinal", "judge_mean"}
        assert all(0.3 < m["rmse"] < 1.5 and -1 <= m["pearson"] <= 1 for m in methods.values())
        vs = bench["vs_best_simple"]
        assert vs["best_simple"] in ("linear", "ordinal")
        low, high = vs["rmse_diff_95"]
        assert low < high and low > -0.5 and high < 0.5
        assert vs["meets_target"] == (
            methods["calibrated"]["rmse"] <= methods[vs["best_simple"]]["rmse"]
            and methods["calibrated"]["pearson"] >= methods[vs["best_simple"]]["pearson"] - 0.005
        )
        each = bench["vs_each_simple"]
        assert each[vs["best_simple"]] == {k: vs[k] for k in each["linear"]}
        for ref in ("linear", "ordinal"):
            diff = round(methods["calibrated"]["rmse"] - methods[ref]["rmse"], 4)
            assert each[ref]["rmse_diff"] == diff and each[ref]["rmse_diff_95"][0] < each[ref]["rmse_diff_95"][1]


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_shift_measures_settings_overrides_and_chosen_methods(tmp_path):
    late = {"base_l2": 0.001, "lr": 0.03}
    out = _run(
        "shift.py",
        anchors=ANCHORS,
        seeds=0,
        ensemble=2,
        only="covariate_shift_up",
        work=tmp_path,
        methods="calibrated,linear,ordinal",
        settings=json.dumps(late),
    )
    assert {k: out["settings"][k] for k in late} == late and out["settings"]["ensemble"] == 2
    bench = out["covariate_shift_up"]
    assert set(bench["methods"]) == {"calibrated", "linear", "ordinal"} and "vs_best_simple" in bench
    out = _run(
        "shift.py", anchors=ANCHORS, seeds=0, ensemble=2, only="covariate_shift_up", work=tmp_path, methods="linear"
    )
    assert set(out["covariate_shift_up"]["methods"]) == {"linear"} and "vs_best_simple" not in out["covariate_shift_up"]


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_scaling_prints_points_slopes_and_the_floor():
    out = _run(
        "scaling.py",
        anchors=ANCHORS,
        rows=[700, 1400],
        judges=[24, 48],
        judge_rows=700,
        cv_max_rows=0,
        override=["train.ensemble=2", "train.pretrain_steps=10", "train.finetune_steps=10"],
    )
    assert [(p["rows"], p["judges"]) for p in out["points"]] == [(700, 48), (700, 24), (1400, 48), (1400, 24)]
    assert all(p["train_s"] > p["train_base_s"] > 0 and p["train_peak_mib"] > 0 for p in out["points"])
    assert out["slope_vs_rows"]["train_s"] is not None and out["slope_vs_judges"]["train_s"] is not None
    assert out["floor"]["step_over_floor"] > 1
    out = _run("gather_throughput.py", "--turns", "40", "--concurrency", "8", "--repeats", "1", "--latency", "0.01")
    [run] = out["runs"]
    assert run["concurrency"] == 8 and run["failures"] == 0
    assert run["ratio"] >= 0.9  # never faster than the server's latency allows
    assert out["cache_rerun"]["requests"] == 0
    assert out["cache_rerun"]["cached"] == out["cache_rerun"]["pairs"] > 0


def test_batch_gather_prints_each_phase_and_the_file_size():
    out = _run("batch_gather.py", "--conversations", "20", "--turns", "2")
    assert out["requests"] == 200 and out["batch_files"] == 1 and out["results_file_llm_csv_identical"]
    assert abs(out["bytes_per_request"] * 200 - out["batch_bytes"]) <= 100  # rounded to whole bytes
    assert set(out["phases"]) == {"write_files", "submit_wait_read", "read_results_file", "rerun_from_cache"}
    assert all(p["wall_s"] >= 0 and p["cpu_s"] >= 0 for p in out["phases"].values())


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_estimate_prints_coverage_width_and_bias(tmp_path):
    out = _run(
        "estimate.py", anchors=ANCHORS, draws=40, n=[10, 20, 200], only="llm_rubric_in_distribution", work=tmp_path
    )
    bench = out["benchmarks"]["llm_rubric_in_distribution"]
    for kind in ("rate", "mean"):
        block = bench[kind]
        assert abs(block["raw_judge_bias"]) > abs(block["calibrator_bias"])  # the judge alone is far off
        assert block["by_n"]["200"] is None  # more than the release has
        for n in ("10", "20"):
            row = block["by_n"][n]
            # ppi is never swapped for humans-only (issue 51): lambda's noise may cost it some width, not much
            assert row["ppi_mean_width"] <= 1.2 * row["humans_mean_width"]
            assert 0.6 <= row["ppi_coverage"] <= 1 and row["effective_labels_median"] >= 0.6 * int(n)
        assert block["by_n"]["10"]["ppi_mean_width"] > block["by_n"]["20"]["ppi_mean_width"]
        assert all(block["by_n"][n]["inside_bounds"] for n in ("10", "20"))
    peek = bench["rate"]["peeking"]["false_decisions"]
    assert peek["sequential"] <= peek["fixed_n"]  # the confidence sequence never decides more often
    worse = bench["rate"]["peeking"]["fail_if_worse"]["false_worse_decisions"]
    assert worse["sequential"] <= worse["fixed_n"]
    planner = bench["rate"]["planner"]
    assert planner["planned"]["n_median"] >= planner["chi2_plan"]["n_median"]  # the pilot's noise costs labels
    assert bench["rate"]["planner"]["planned"]["n_median"] >= 10


def test_estimate_far_shift_releases_have_their_bias_roles_and_paired_cells(tmp_path):
    out = _run("estimate.py", "--draws", "20", "--n", "10", "40", "--only", "far_shift_harder", "--work", str(tmp_path))
    bench = out["benchmarks"]["far_shift_harder"]
    assert bench["rate"]["calibrator_bias"] >= 0.05  # the harder far shift: the calibrator off by 5 points or more
    assert set(bench["roles"]) == {"airline", "fintech", "telehealth", "tutor"}
    for block in (bench, *bench["roles"].values()):
        cell = block["rate"]["by_n"]["10"]
        assert cell["ppi_minus_humans_coverage"] == cell["ppi_coverage"] - cell["humans_coverage"]
        assert cell["ppi_minus_humans_mc_se"] >= 0 and "before_issue_51" in cell
    assert all(r["rate"]["by_n"]["40"] is None for r in bench["roles"].values())  # a role's quarter: 14 conversations


def test_deepeval_overhead_prints_the_three_paths_and_equal_scores():
    pytest.importorskip("deepeval", reason="deepeval is not installed: pip install 'role-rubric[deepeval]'")
    out = _run("deepeval_overhead.py", "--limit", "6", "--repeats", "1")
    assert out["conversations"] == 6 and out["assistant_turns"] >= 6
    assert out["max_score_difference"] < 1e-12  # deepeval reports RoleAdherence's session scores
    assert 0 < out["warm_measure_many_s"] < out["cold_gather_s"]  # the warm cache asks the judge nothing
    assert out["warm_a_measure_per_conversation_s"] > 0 and out["warm_deepeval_evaluate_s"] > 0


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_adapt_prints_every_method_per_k_with_paired_intervals(tmp_path):
    out = _run(
        "adapt.py", anchors=ANCHORS, k=[0, 10], draws=2, ensemble=2, only="covariate_shift_up,new_judges", work=tmp_path
    )
    assert out["k"] == [0, 10] and out["draws"] == 2 and out["settings"]["ensemble"] == 2
    for name, folds in (("covariate_shift_up", 1), ("new_judges", 4)):
        bench = out[name]
        assert bench["folds"] == folds and bench["acceptance_k20"] is None  # no k = 20 in this run
        at0, at10 = bench["by_k"]["0"], bench["by_k"]["10"]
        assert set(at10["methods"]) == {
            "none",
            "network",
            "network_one_directory",
            "network_weighted",
            "linear",
            "ordinal",
        }
        # k = 0 trains on the old side alone, so the weight has nothing to weigh, nor the recalibration a side
        assert (
            at0["methods"]["network"] == at0["methods"]["network_weighted"] == at0["methods"]["network_one_directory"]
        )
        assert at10["test_rows_mean"] < at0["test_rows_mean"]  # the adapted conversations leave the test set
        assert all(0.3 < m["rmse"] < 1.5 and -1 <= m["pearson"] <= 1 for m in at10["methods"].values())
        for ref, key in (("none", "vs_none"), ("linear", "vs_linear")):
            d = at10[key]["network"]
            assert d["rmse_diff"] == round(at10["methods"]["network"]["rmse"] - at10["methods"][ref]["rmse"], 4)
            assert d["rmse_diff_95"][0] < d["rmse_diff_95"][1]


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_overlap_recognition_recognises_regathered_conversations_and_confuses_none():
    out = _run("overlap_recognition.py", "--anchors", str(ANCHORS))
    by_move = {row["move"]: row for row in out["regathered"]}
    assert by_move[1e-3]["tolerant_recognised"] == out["labelled_conversations"] > 100
    assert by_move[1e-3]["exact_hash_recognised"] < out["labelled_conversations"]  # what the old records missed
    assert by_move[1e-2]["tolerant_recognised"] == 0  # a different answer is not the same conversation
    assert out["closest_different_conversations"] > 10 * out["tolerance"]


@pytest.mark.skipif(not ANCHORS.exists(), reason="needs ../shared/anchors/llm_rubric_synth")
def test_deploy_choice_scores_each_rule_on_the_new_releases_test_rows(tmp_path):
    out = _run(
        "deploy_choice.py",
        anchors=ANCHORS,
        k=20,
        draws=1,
        units=1,
        ensemble=2,
        only="covariate_shift_up",
        work=tmp_path,
    )
    at = out["covariate_shift_up"]["by_k"]["20"]
    unit = at["units"][0]
    assert at["n_units"] == 1 and {"network", "linear", "ordinal", "none", "blend"} <= set(unit["test_rmse"])
    chosen = unit["chosen"]
    shipped = {m: unit["cv_new_rmse"][m] for m in ("network", "linear", "ordinal")}
    assert chosen["lowest_new_cv"] == min(shipped, key=shipped.get)  # 20 conversations
    assert chosen["lowest_union_cv"] == min(unit["cv_union_rmse"], key=unit["cv_union_rmse"].get)
    assert chosen["always_network"] == "network"
    best = min(unit["test_rmse"][m] for m in ("network", "linear", "ordinal"))
    for rule, rates in at["rules"].items():
        regret = unit["test_rmse"][chosen[rule]] - best
        assert rates["strict_rate"] == float(regret <= 0)
        assert rates["rate_within_0.01"] == float(regret <= 0.01 + 1e-12) >= rates["strict_rate"]
    assert out["all_benchmarks"]["20"]["n_units"] == 1
    assert 0.3 < unit["test_rmse"]["none"] < 1.5
    # what cv ships: the usual pick where it beats no adaptation out of fold on the new rows, else linear/none
    assert chosen["deployed"] in ("network", "linear", "ordinal", "none")
    if unit["cv_new_rmse"][chosen["network_unless_significant"]] < unit["cv_new_rmse"]["none"]:
        assert chosen["deployed"] == chosen["network_unless_significant"]
    else:
        assert chosen["deployed"] in ("linear", "none")
    deployed = at["rules"]["deployed"]
    assert deployed["vs_none"]["rmse_diff"] == pytest.approx(
        unit["test_rmse"][chosen["deployed"]] - unit["test_rmse"]["none"], abs=2e-4
    )
    low, high = deployed["vs_none"]["rmse_diff_95"]
    assert low <= deployed["vs_none"]["rmse_diff"] + 1e-3 and deployed["vs_none"]["rmse_diff"] - 1e-3 <= high
