"""The report: prepare/plot pairs on a synthetic predictions frame, the command end to end on a tiny
dataset (twice, for repeatability), and the page opened in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from calibration import report
from calibration.schema.build import command_config
from rubric.errors import InputError
from tests.calibration.browser import chromium, console, dom_check, load_check, needs_chromium
from tests.calibration.conftest import png_bytes

VALUES = [1, 2, 3, 4]
ANCHORS = Path(__file__).resolve().parents[3] / "shared" / "anchors" / "llm_rubric_synth"


def _distribution(center: np.ndarray, sharpness: float) -> np.ndarray:
    logits = -sharpness * (np.asarray(VALUES)[None, :] - center[:, None]) ** 2
    p = np.exp(logits)
    return p / p.sum(axis=1, keepdims=True)


def _predictions(seed: int = 0, conversations: int = 60) -> pd.DataFrame:
    """Long-form out-of-fold predictions as `role-rubric cv` writes them: three judges per conversation."""
    rng = np.random.default_rng(seed)
    quality = rng.uniform(1, 4, conversations)
    rows = []
    for c in range(conversations):
        for j in rng.choice(6, size=3, replace=False):
            answer = float(np.clip(np.round(quality[c] + rng.normal(0, 0.6) + (1.2 if j == 0 else 0)), 1, 4))
            rows.append((f"c{c}", "", str(j), quality[c], answer))
    keys = pd.DataFrame(rows, columns=["conversation_id", "turn", "judge_id", "quality", "answer"])
    methods = {
        "calibrated": _distribution(keys["quality"].to_numpy(), 1.0),
        "constant": np.tile(np.bincount(keys["answer"].astype(int), minlength=5)[1:] / len(keys), (len(keys), 1)),
        "judge_mean": _distribution(np.full(len(keys), 2.5) + rng.normal(0, 0.3, len(keys)), 0.5),
        "expected_llm": _distribution(np.clip(keys["quality"].to_numpy() + 1.0, 1, 4), 3.0),
    }
    frames = []
    for method, probs in methods.items():
        frame = keys.drop(columns="quality").assign(question_id="overall", method=method, fold=0)
        for k, v in enumerate(VALUES):
            frame[f"p_{v}"] = probs[:, k]
        frame["expected"] = probs @ np.asarray(VALUES, float)
        frames.append(frame)
    columns = [
        "conversation_id",
        "turn",
        "judge_id",
        "question_id",
        "method",
        "fold",
        "p_1",
        "p_2",
        "p_3",
        "p_4",
        "expected",
        "answer",
    ]
    return pd.concat(frames, ignore_index=True)[columns]


# ----------------------------------------------------------------------------- prepare / plot pairs


def test_metrics_table_has_intervals_and_tests_against_the_calibrated_model() -> None:
    table = report.prepare_metrics_table(_predictions(), seed=0, n_boot=200, n_perm=200)
    assert len(table) == 4 * 4
    ours = table[table["method"] == "calibrated"]
    assert ours["p_value"].isna().all() and (ours["difference"] == 0).all()
    constant = table[table["method"] == "constant"].set_index("metric")
    assert np.isnan(constant.loc["pearson", "value"]) and np.isnan(constant.loc["pearson", "p_value"])
    assert constant.loc["rmse", "p_value"] < 0.01 and constant.loc["rmse", "difference"] > 0
    finite = table.dropna(subset=["value"])
    assert ((finite["low"] <= finite["value"]) & (finite["value"] <= finite["high"])).all()
    again = report.prepare_metrics_table(_predictions(), seed=0, n_boot=200, n_perm=200)
    pd.testing.assert_frame_equal(table, again)
    fig, axes = report.plot_metrics_table(table)
    assert len(axes) == 4 and axes[1].get_title() == "pearson"
    assert png_bytes(fig, dpi=50) == png_bytes(report.plot_metrics_table(again)[0], dpi=50)


def test_methods_on_different_rows_are_refused() -> None:
    predictions = _predictions()
    shifted = predictions[~((predictions["method"] == "constant") & (predictions["conversation_id"] == "c0"))]
    with pytest.raises(ValueError, match="same \\(conversation, turn, judge\\) rows"):
        report.prepare_metrics_table(shifted, n_boot=10, n_perm=10)
    with pytest.raises(ValueError, match="no predictions for method 'calibrated'"):
        report.prepare_metrics_table(predictions[predictions["method"] != "calibrated"], n_boot=10, n_perm=10)


def test_distributions_observed_predicted_and_llm() -> None:
    predictions = _predictions()
    data = report.prepare_distributions(predictions, max_judges=4)
    assert data["values"] == [1.0, 2.0, 3.0, 4.0]
    pooled, *judges = data["panels"]
    assert pooled["judge_id"] == "all judges" and pooled["n"] == 180 and len(judges) == 4
    for panel in data["panels"]:
        for key in ("observed", "predicted", "llm"):
            assert sum(panel[key]) == pytest.approx(1.0)
    calibrated = predictions[predictions["method"] == "calibrated"]
    assert pooled["observed"][3] == pytest.approx((calibrated["answer"] == 4).mean())
    assert [p["n"] for p in judges] == sorted((p["n"] for p in judges), reverse=True)
    fig, axes = report.plot_distributions(data)
    assert sum(a.get_visible() for a in axes) == 5
    plt.close(fig)


def test_per_judge_metrics_worst_first() -> None:
    frame = report.prepare_per_judge(_predictions())
    ours = frame[frame["method"] == "calibrated"]
    assert ours["rmse"].is_monotonic_decreasing
    assert ours["n"].sum() == 180 and set(frame["method"]) == {"calibrated", "judge_mean", "expected_llm"}
    # Judge 0 answers a point higher than everyone else, so the population-like synthetic model misses it most.
    assert ours["judge_id"].iloc[0] == "0"
    fig, ax = report.plot_per_judge(frame)
    assert len(ax.get_yticklabels()) == 6
    plt.close(fig)


def test_learning_curve_and_targets_plots_from_frames() -> None:
    curve = pd.DataFrame(
        {
            "fraction": [0.5, 0.5, 1.0, 1.0],
            "repeat": [0, 1, 0, 1],
            "rmse": [0.9, 0.8, 0.7, 0.72],
            "pearson": [0.2, 0.3, 0.4, 0.41],
        }
    )
    fig, axes = report.plot_learning_curve(curve, reference={"rmse": 0.78, "pearson": 0.34})
    assert [a.get_title() for a in axes] == ["rmse", "pearson"] and len(axes[0].lines) >= 3
    plt.close(fig)
    scored = {f"{m}{s}": v for m in ("rmse", "pearson") for s, v in (("", 0.5), ("_low", 0.4), ("_high", 0.6))}
    targets = pd.DataFrame(
        [{"question": q, "method": m, **scored} for q in ("A", "B") for m in ("expected_llm", "calibrated")]
    )
    fig, axes = report.plot_targets(targets)
    assert [t.get_text() for t in axes[0].get_xticklabels()] == ["A", "B"]
    plt.close(fig)


def test_ablation_variants_cover_the_paper_table() -> None:
    from calibration.model.settings import Settings

    names = [name for name, _ in report.ablation_variants(Settings(), ["Q0", "Q1", "Q2"], "Q0")]
    assert names == ["no pretraining", "no fine-tuning", "no personalisation", "without Q1", "without Q2"]
    variants = dict(report.ablation_variants(Settings(), ["Q0", "Q1", "Q2"], "Q0"))
    assert variants["no pretraining"].pretrain_steps == 0 and variants["without Q2"].drop_questions == ("Q2",)
    # trained from scratch, so at the pretraining rate (the fine-tune rate would under-train it)
    assert variants["no pretraining"].finetune_lr == Settings().lr != Settings().finetune_lr
    assert variants["no personalisation"].personalised is False


# ----------------------------------------------------------------------------- the command, end to end


def _tiny_dataset(root: Path, seed: int = 0) -> Path:
    """40 conversations x 2 turns, 4 judges (2 per item), questions overall (1-4) and scope (1-3)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    (root / "rubric.yaml").write_text(
        "name: tiny\ntarget: overall\nquestions:\n"
        "  - id: overall\n    text: Does the turn adhere to the role?\n    options:\n"
        + "".join(f"      - {{value: {v}, label: 'level {v}'}}\n" for v in VALUES)
        + "  - id: scope\n    text: Is it in scope?\n    options:\n"
        + "".join(f"      - {{value: {v}, label: 'scope {v}'}}\n" for v in (1, 2, 3))
    )
    llm, labels = [], []
    for c in range(40):
        for turn in range(2):
            quality = rng.uniform(1, 4)
            for qid, values in (("overall", VALUES), ("scope", [1, 2, 3])):
                center = np.clip(np.asarray([quality]) * len(values) / 4 + rng.normal(0, 0.5), 1, len(values))
                p = np.exp(-((np.asarray(values) - center) ** 2))
                for v, pv in zip(values, p / p.sum(), strict=True):
                    llm.append((f"c{c}", turn, qid, v, round(float(pv), 6)))
            for j in rng.choice(4, size=2, replace=False):
                overall = int(np.clip(round(quality + rng.normal(0, 0.5) + 0.4 * (j == 0)), 1, 4))
                labels.append((f"c{c}", turn, f"j{j}", "overall", overall))
                labels.append((f"c{c}", turn, f"j{j}", "scope", int(np.clip(round(quality * 3 / 4), 1, 3))))
    llm_frame = pd.DataFrame(llm, columns=["conversation_id", "turn", "question_id", "option", "prob"])
    # Rounding to 6 decimals may leave sums off by 1e-6; the loader's tolerance is 1e-3.
    llm_frame.to_csv(root / "llm.csv", index=False)
    pd.DataFrame(labels, columns=["conversation_id", "turn", "judge_id", "question_id", "answer"]).to_csv(
        root / "labels.csv", index=False
    )
    return root


FAST = [
    "folds=2",
    "network.hidden1=8",
    "network.hidden2=8",
    "train.ensemble=1",
    "train.pretrain_steps=20",
    "train.finetune_steps=20",
    "train.eval_every=5",
    "report.n_boot=50",
    "report.n_perm=50",
    "report.smece_boot=10",
    "report.band_bootstrap=10",
    "report.learning_curve.fractions=[0.5,1.0]",
    "report.learning_curve.repeats=1",
    "report.workers=1",
]


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One full report (every section) on the tiny dataset, shared by the tests below."""
    root = tmp_path_factory.mktemp("report")
    data = _tiny_dataset(root / "data")
    results = report.run_report(command_config("report", [f"data={data}", f"out={root / 'a'}", *FAST]))
    return root / "a", results


def test_report_opens_with_a_verdict_and_ends_with_every_turn(tiny_report: tuple[Path, dict]) -> None:
    out, results = tiny_report
    page = (out / "report.html").read_text()
    assert page.index('id="verdict"') < page.index("<h2") < page.index('<h2 id="turns"')
    verdict = results["verdict"]
    assert verdict["outcome"] in {"better", "no clear difference", "worse"}
    assert verdict["best_baseline"] in {r["method"] for r in results["metrics"]} - {"calibrated"}
    assert verdict["size"]["turns"] == 80 and verdict["size"]["judges"] == 4
    assert verdict["warnings"] == []  # 40 labelled turns per fold, every judge with many labels
    # the verdict names the command that trains the lowest-RMSE model `train` ships
    rmse = {r["method"]: r["value"] for r in results["metrics"] if r["metric"] == "rmse"}
    deploy = verdict["deploy"]
    assert deploy["rmse"] == min(rmse[m] for m in ("calibrated", "linear", "ordinal"))
    assert deploy["command"].startswith("role-rubric train data=") and deploy["command"] in html.unescape(page)
    data = json.loads(re.search(r'id="rr-turns-data">(.*?)</script>', page, re.S).group(1))
    assert len(data["rows"]) == 80 and data["questions"] == ["overall", "scope"]
    assert "[0." in page and "white-space: nowrap" in page  # intervals never wrap mid-bracket
    # beside the verdict, per question: can the calibrated judge replace a reviewer? (evaluation/reviewers.py)
    assert (
        page.index('id="verdict"')
        < page.index("Can the calibrated judge replace a reviewer?")
        < page.index("Reliability of the calibrated")
    )
    overall = results["reviewers"]["questions"]["overall"]
    assert overall["calibrated"]["n"] > 0 and overall["alt_test"] is not None
    assert (
        html.escape(overall["verdict"]) in page
        and "not tested" in results["reviewers"]["questions"]["scope"]["verdict"]
    )


def test_report_writes_every_section(tiny_report: tuple[Path, dict]) -> None:
    out, results = tiny_report
    page = (out / "report.html").read_text()
    for name in (
        "reliability",
        "metrics",
        "distributions",
        "per_judge",
        "ablations",
        "targets",
        "learning_curve",
        "decisions",
    ):
        png = out / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG")
        assert f'data-file="{name}.png"' in page
    assert page.count("<img ") == 8
    saved = json.loads((out / "metrics.json").read_text(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert saved["target"] == "overall"
    assert [c["name"] for c in saved["reliability"]] == [
        "answer = 1",
        "answer = 2",
        "answer = 3",
        "answer = 4",
        "answer >= 3",
    ]
    assert {r["variant"] for r in saved["ablations"]} == {
        "full model",
        "no pretraining",
        "no fine-tuning",
        "no personalisation",
        "without scope",
    }
    assert {(r["question"], r["method"]) for r in saved["targets"]} == {
        (q, m) for q in ("overall", "scope") for m in ("expected_llm", "calibrated")
    }
    assert len(saved["learning_curve"]) == 2
    decisions = saved["decisions"]  # one row per risk level; a looser risk never decides fewer turns
    assert [r["risk"] for r in decisions] == sorted(r["risk"] for r in decisions)
    coverage = [r["coverage_mean"] for r in decisions]
    assert coverage == sorted(coverage) and all(0 <= c <= 1 for c in coverage)
    methods = {r["method"] for r in saved["metrics"]}
    assert {"calibrated", "judge_mean", "expected_llm", "constant"} <= methods
    assert results["target"] == saved["target"]


@pytest.mark.slow
def test_report_is_repeatable_with_or_without_a_process_pool(tiny_report: tuple[Path, dict]) -> None:
    a, _ = tiny_report
    b = a.parent / "b"
    overrides = [f"data={a.parent / 'data'}", f"out={b}", *FAST, "report.workers=2"]
    report.run_report(command_config("report", overrides))
    assert (a / "metrics.json").read_bytes() == (b / "metrics.json").read_bytes()
    for png in sorted(a.glob("*.png")):
        assert png.read_bytes() == (b / png.name).read_bytes(), png.name
    assert (a / "report.html").read_bytes() == (b / "report.html").read_bytes()


def _active_labelling_json(folder: Path) -> Path:
    """A minimal benchmarks/active_labelling.py output."""
    curve = {
        "share": [0.1, 1.0],
        "rmse_mean": [0.9, 0.75],
        "rmse_ci95_half": [0.01, 0.0],
        "nll_mean": [1.2, 1.0],
        "label_saving": 0.0,
        "share_to_reach_random_full_rmse": 1.0,
    }
    path = folder / "active_labelling.json"
    path.write_text(
        json.dumps(
            {"dataset": "tiny", "seeds": [0], "random_full_rmse": 0.75, "strategies": {"random": curve, "bald": curve}}
        )
    )
    return path


def test_report_reuses_a_cv_folder(tiny_report: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = tiny_report
    data = out.parent / "data"
    cv = tmp_path / "cv"
    cv.mkdir()
    predictions = _predictions().assign(question_id="overall")
    predictions.to_csv(cv / "predictions.csv", index=False)
    (cv / "metrics.json").write_text(json.dumps({"folds": 5, "seed": 0, "fold_seed": 3}))
    overrides = [
        f"data={data}",
        f"out={tmp_path / 'r'}",
        f"cv={cv}",
        *FAST,
        "report.ablations=false",
        "report.targets=false",
        "report.learning_curve.repeats=0",
        "report.adheres_threshold=null",
        "report.max_judges=2",
        f"report.active_labelling={_active_labelling_json(tmp_path)}",
    ]
    reused = report.run_report(command_config("report", overrides))
    assert [r["strategy"] for r in reused["active_labelling"]] == ["random", "bald"]
    assert "How many labels are enough" in (tmp_path / "r" / "report.html").read_text()
    assert "decisions" not in reused  # no adheres threshold, no decision section
    assert reused["metrics"][0]["n"] == 180  # the cv folder's rows, not a new cross-validation
    assert "ablations" not in reused and (tmp_path / "r" / "report.html").exists()
    assert reused["fold_seed"] == 3  # the variants are trained on the cv folder's folds


@pytest.mark.parametrize(
    ("write", "match"),
    [
        (lambda d: None, "no predictions.csv"),
        (
            lambda d: _predictions().drop(columns="expected").to_csv(d / "predictions.csv", index=False),
            "expected",
        ),
        (lambda d: _predictions().to_csv(d / "predictions.csv", index=False), "report's target is 'scope'"),
        (
            lambda d: _predictions().query("method != 'calibrated'").to_csv(d / "predictions.csv", index=False),
            "no rows of method 'calibrated'",
        ),
    ],
)
def test_bad_cv_folder(tmp_path: Path, write, match: str) -> None:
    write(tmp_path)
    with pytest.raises(InputError, match=match):
        report.read_cv_folder(tmp_path, "scope")


# ----------------------------------------------------------------------------- the page in a real browser

CHECK = load_check(
    'verdict: !!document.getElementById("verdict"), turn_rows: turns.length, '
    'opened: document.querySelectorAll("#rr-turns tr.rr-open").length',
    first='const turns = document.querySelectorAll("#rr-turns tr.rr-row");\n'
    "  if (turns.length) turns[0].click();  // the drill-down opens the turn's details",
)


@needs_chromium
def test_report_page_in_headless_chromium(tiny_report: tuple[Path, dict], tmp_path: Path) -> None:
    out, _ = tiny_report
    page = (out / "report.html").read_text()
    # A copy with a checker that records image loads and errors into the DOM, which --dump-dom returns.
    probe = out / "report_check.html"
    probe.write_text(page.replace("<head>", "<head>" + CHECK, 1))
    dom = chromium("--dump-dom", probe.as_uri(), user_dir=tmp_path / "profile-a")
    probe.unlink()
    assert dom_check(dom) == {
        "images": page.count("<img "),
        "broken": [],
        "errors": [],
        "verdict": True,
        "turn_rows": 50,  # one page of the 80 turns
        "opened": 1,
    }
    assert console(dom.stderr) == [], console(dom.stderr)

    shot = tmp_path / "report_screenshot.png"
    taken = chromium(
        f"--screenshot={shot}",
        "--window-size=1280,2400",
        (out / "report.html").as_uri(),
        user_dir=tmp_path / "profile-b",
    )
    assert shot.exists() and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    assert not console(taken.stderr)
    print(f"screenshot saved to {shot}")


# ----------------------------------------------------------------------------- acceptance on the shared data


@pytest.mark.slow
@pytest.mark.skipif(not ANCHORS.is_dir(), reason="LLM-Rubric reference data not found at ../shared/anchors")
def test_full_report_on_llm_rubric_data_is_fast_and_repeatable(tmp_path: Path) -> None:
    from calibration.data.importers import import_llm_rubric

    data = tmp_path / "llm_rubric"
    import_llm_rubric(ANCHORS / "llm_evaluations.tsv", ANCHORS / "human_judgments.tsv", data)
    timings = []
    for name in ("a", "b"):
        start = time.perf_counter()
        report.run_report(command_config("report", [f"data={data}", f"out={tmp_path / name}"]))
        timings.append(time.perf_counter() - start)
    assert max(timings) < 180, timings
    assert (tmp_path / "a" / "metrics.json").read_bytes() == (tmp_path / "b" / "metrics.json").read_bytes()
    for png in sorted((tmp_path / "a").glob("*.png")):
        assert png.read_bytes() == (tmp_path / "b" / png.name).read_bytes(), png.name
    saved = json.loads((tmp_path / "a" / "metrics.json").read_text())
    table = {(r["method"], r["metric"]): r for r in saved["metrics"]}
    assert table[("calibrated", "rmse")]["value"] < table[("judge_mean", "rmse")]["value"]
    assert all(c["smece"] < 0.1 for c in saved["reliability"])
