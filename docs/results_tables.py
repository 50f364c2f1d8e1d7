"""Markdown tables rendered from benchmarks/results/*.json: the only source of the numbers in the docs.

A results page holds a marker `<!-- results: NAME -->` (NAME a renderer below); docs/hooks.py replaces it
with the table and a line saying which command, machine and date gave it. A renderer whose JSON file is
missing renders a note that the benchmark has not been run, never numbers from elsewhere.
The README's results table (`readme_table`) is rendered the same way by docs/gen_reference.py.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import results_judges  # docs/results_judges.py
import results_monitor  # docs/results_monitor.py

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
MARKER = re.compile(r"<!-- results: (?P<name>[\w-]+) -->")


def load(name: str, results: Path = RESULTS) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def provenance(record: dict[str, Any]) -> str:
    m = record["machine"]
    return (
        f"*Measured by `{record['command']}` on {record['date']}: {m['cores']} cores ({m['cpu_model']}), "
        f"torch {m['torch']}, {record['wall_s']:g} s of wall time, load average {record['load_avg_1m_at_end']:g} "
        f"at the end (`benchmarks/results/{record['benchmark']}.json`).*"
    )


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _f(x: float | None, digits: int = 4) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}"


def _interval(pair: list[float], digits: int = 4) -> str:
    return f"[{pair[0]:+.{digits}f}, {pair[1]:+.{digits}f}]"


# --- one renderer per table ---------------------------------------------------------------------------

BASELINE_NAMES = {
    "calibrated": "calibrated (the default)",
    "linear": "linear (personalised multinomial on expected answers)",
    "ordinal": "ordinal (personalised cumulative logit)",
    "calibrated_llm": "calibrated-LLM (the target's own distribution, personalised)",
    "judge_mean": "per-judge mean",
    "constant": "constant (training mean)",
    "expected_llm": "expected-LLM (the judge's expected answer)",
    "argmax_llm": "argmax-LLM",
    "random": "random answer",
}


def llm_rubric_cv(r: dict) -> str:
    res = r["result"]
    cal = res["calibrated"]
    seeds = [s["seed"] for s in res["per_seed"]]
    ens = res["settings"].get("ensemble")
    head = (
        f"The calibrated model, {ens}-member ensembles, over {len(seeds)} training seeds "
        f"({', '.join(map(str, seeds))}) on the same folds: mean ± sd (worst seed).\n\n"
    )
    main = _table(
        ["", "RMSE", "Pearson", "Spearman", "Kendall"],
        [
            [
                "**calibrated**",
                f"**{cal['rmse']['mean']:.4f} ± {cal['rmse']['std']:.4f}** ({cal['rmse']['max']:.4f})",
                f"**{cal['pearson']['mean']:.4f} ± {cal['pearson']['std']:.4f}** ({cal['pearson']['min']:.4f})",
                f"{cal['spearman']['mean']:.3f} ± {cal['spearman']['std']:.3f}",
                f"{cal['kendall']['mean']:.3f} ± {cal['kendall']['std']:.3f}",
            ]
        ],
    )
    base = res["baselines_seed0"]
    rows = [
        [
            BASELINE_NAMES.get(k, k),
            _f(v["rmse"]),
            _f(v["pearson"]),
            _f(v.get("spearman"), 3),
            _f(v.get("kendall"), 3),
            _f(v.get("nll"), 3),
        ]
        for k, v in sorted(base.items(), key=lambda kv: kv[1]["rmse"])
    ]
    baselines = _table(["method (seed 0)", "RMSE", "Pearson", "Spearman", "Kendall", "NLL"], rows)
    values = sorted({v for s in res["smece_one_vs_rest"].values() for v in s}, key=float)
    smece = _table(
        ["answer", *values],
        [
            [
                "smECE, lowest–highest over the seeds",
                *[
                    f"{min(s[v] for s in res['smece_one_vs_rest'].values()):.3f}–"
                    f"{max(s[v] for s in res['smece_one_vs_rest'].values()):.3f}"
                    for v in values
                ],
            ]
        ],
    )
    times = f"Median `cv` time per seed: {res['cv_seconds_median']:g} s (start-up excluded)."
    return "\n\n".join(
        [
            head + main,
            "Every method on the same folds, seed 0:",
            baselines,
            "smECE of the calibrated target distribution, one-vs-rest for each answer:",
            smece,
            times,
        ]
    )


SHIFT_NAMES = {
    "llm_rubric_cv": "LLM-Rubric, 5-fold cv (in distribution)",
    "covariate_shift_down": "LLM-Rubric, covariate shift: train top 70% of judge-expected Q0, test bottom 30%",
    "covariate_shift_up": "LLM-Rubric, covariate shift: train bottom 70%, test top 30%",
    "new_judges": "LLM-Rubric, new judges (4 groups held out in turn; population model)",
    "new_chatbot": "bundled benchmark, new chatbot (leave one role out; embedding judge)",
    "far_shift": "bundled benchmark, far shift (a hotter, more lenient judge on half the conversations)",
}
SHIFT_METHODS = ["calibrated", "network_paper", "linear", "ordinal", "judge_mean"]


def shift(r: dict) -> str:
    res = r["result"]
    benches = [k for k in SHIFT_NAMES if k in res]
    methods = [m for m in SHIFT_METHODS if any(m in res[b]["methods"] for b in benches)]
    label = {
        "calibrated": "**calibrated (default)**",
        "network_paper": "paper network (`network.base=none`)",
        "linear": "linear",
        "ordinal": "ordinal",
        "judge_mean": "per-judge mean",
    }
    rows = []
    for b in benches:
        bench = res[b]
        cells = [f"{SHIFT_NAMES[b]} ({bench['rows']})"]
        for m in methods:
            v = bench["methods"].get(m)
            cells.append("–" if v is None else f"{v['rmse']:.4f} / {v['pearson']:.4f}")
        vs = bench.get("vs_best_simple")
        if vs:
            cells += [
                f"{vs['rmse_diff']:+.4f} {_interval(vs['rmse_diff_95'])}",
                f"{vs['pearson_diff']:+.4f} {_interval(vs['pearson_diff_95'])}",
            ]
        else:
            cells += ["–", "–"]
        rows.append(cells)
    seeds = res[benches[0]]["seeds"] if benches else []
    head = (
        f"RMSE / Pearson of the target, mean over {len(seeds)} training seeds ({', '.join(map(str, seeds))}); "
        "the last two columns are the default minus the better simple model (by RMSE), with a 95% paired "
        "bootstrap interval over conversations.\n\n"
    )
    return head + _table(
        ["benchmark (rows)", *[label[m] for m in methods], "default − best simple: RMSE [95%]", "Pearson [95%]"],
        rows,
    )


ADAPT_BENCHMARKS = {
    "covariate_shift_down": "LLM-Rubric, shift down",
    "covariate_shift_up": "LLM-Rubric, shift up",
    "new_judges": "LLM-Rubric, new judges",
    "new_chatbot": "bundled benchmark, new chatbot",
    "far_shift": "bundled benchmark, far shift",
    "new_system": "LLM-Rubric, new dialogue systems",
    "new_system_reviewers": "LLM-Rubric, new systems, half the reviewers unseen",
    "new_system_far_reviewers": "LLM-Rubric, new systems read by a restyled judge, half the reviewers unseen",
    "new_system_middle": "LLM-Rubric, new dialogue systems (middle two)",
    "new_system_middle_reviewers": "LLM-Rubric, new systems (middle two), half the reviewers unseen",
}
ADAPT_NAMES = {
    "none": "no adaptation",
    "network": "**default on the union**",
    "network_one_directory": "default, recalibrated as one directory (before)",
    "network_weighted": "default, new rows weighted",
    "linear": "linear on the union",
    "ordinal": "ordinal on the union",
}


def adapt(r: dict) -> str:
    """Per shift benchmark and k: each method's RMSE / Pearson, then the default against no adaptation and
    against the linear model, with their intervals."""
    res = r["result"]
    benches = [k for k in ADAPT_BENCHMARKS if k in res]
    methods = [m for m in ADAPT_NAMES if m in res["methods"]]
    rows = []
    for b in benches:
        for k, at in res[b]["by_k"].items():
            if at is None:
                continue
            cells = [ADAPT_BENCHMARKS[b], k]
            cells += [f"{at['methods'][m]['rmse']:.4f} / {at['methods'][m]['pearson']:.4f}" for m in methods]
            for key in ("vs_none", "vs_linear"):
                d = at.get(key, {}).get("network")
                cells.append(
                    "–"
                    if not d or int(k) == 0 and key == "vs_none"
                    else f"{d['rmse_diff']:+.4f} {_interval(d['rmse_diff_95'])}"
                )
            rows.append(cells)
    weighted = (
        f" new rows weighted {res['weight']:g} in the weighted variant." if "network_weighted" in res["methods"] else ""
    )
    head = (
        f"RMSE / Pearson of the target on the new side's remaining conversations, mean over {res['draws']} "
        f"draws of the k conversations (the same draws for every method);{weighted} The last two columns: the "
        "default on the union minus no "
        "adaptation and minus the linear model on the union, RMSE with a 95% paired bootstrap interval over "
        "conversations.\n\n"
    )
    return head + _table(
        [
            "benchmark",
            "k",
            *[ADAPT_NAMES[m] for m in methods],
            "default − none: RMSE [95%]",
            "default − linear: RMSE [95%]",
        ],
        rows,
    )


def train_speed(r: dict) -> str:
    res = r["result"]
    cfg = res["config"]
    workers = cfg["workers"]
    rows = [
        ["one model at a time", f"{res['one_at_a_time_models_per_s']:.2f}", "1×"],
        [
            f"{cfg['batched_models']} models as one computation, one core",
            f"{res['batched_models_per_s']:.2f}",
            f"**{res['speedup']:.1f}×**",
        ],
        [
            f"the same {cfg['batched_models']} models in {workers} slices",
            f"{res[f'batched_{workers}_workers_models_per_s']:.2f}",
            f"**{res[f'speedup_{workers}_workers']:.1f}×**",
        ],
    ]
    step = res["per_model_step_ms"]
    head = (
        f"The paper's configuration (hidden {cfg['hidden'][0]}/{cfg['hidden'][1]}, batch {cfg['batch_size']}, "
        f"{cfg['steps'][0]} + {cfg['steps'][1]} steps, no early stopping), median of {cfg['repeats']} runs, "
        "all measured side by side in one run:\n\n"
    )
    steps = _table(
        ["ms per model and step: one model alone", "batched forward + backward", "batched Adam update"],
        [[_f(step["one_at_a_time"], 3), _f(step["batched_forward_backward"], 3), _f(step["batched_adam"], 3)]],
    )
    return head + _table(["", "models/s", "vs one at a time"], rows) + "\n\n" + steps


def gather_throughput(r: dict) -> str:
    res = r["result"]
    rows = [
        [
            run["concurrency"],
            f"{run['http_client']}, processes={run['processes_setting']} ({run['processes']})",
            f"{run['wall_s']:.2f}",
            f"{run['ideal_s']:.2f}",
            f"**{run['ratio']:.2f}×**",
            f"{run['requests_per_s']:g}",
            _f(run.get("client_cpu_ms_per_request"), 2),
            run["failures"],
        ]
        for run in res["runs"]
    ]
    head = (
        f"{res['turns']:,} turns × {res['questions']} questions against the local OpenAI-protocol server with a "
        f"fixed {res['latency_s'] * 1000:g} ms latency, on the same cores as the gather; medians of "
        f"{res['repeats']} interleaved runs. Ideal = requests × latency / concurrency.\n\n"
    )
    rerun = res.get("cache_rerun")
    tail = (
        (
            f"\n\nA rerun over the {rerun['pairs']:,} cached pairs made {rerun['requests']} requests and took "
            f"{rerun['wall_s']:.2f} s. The questions of a turn share {res['shared_prefix_share']:.0%} of their "
            "prompt (in characters), which a server's prefix cache can reuse."
        )
        if rerun
        else ""
    )
    return (
        head
        + _table(
            [
                "concurrency",
                "client",
                "wall s",
                "ideal s",
                "wall / ideal",
                "requests/s",
                "client CPU ms/request",
                "failures",
            ],
            rows,
        )
        + tail
    )


def decide_risk(r: dict) -> str:
    res = r["result"]
    s = res["settings"]
    rows = [
        [
            level,
            f"{v['share_within_risk']:.0%}",
            _f(v["disagreement_mean"], 3),
            _f(v["disagreement_q90"], 3),
            f"{v['coverage_mean']:.1%} ({v['coverage_min']:.1%})",
        ]
        for level, v in sorted(res["levels"].items(), key=lambda kv: float(kv[0]))
    ]
    head = (
        f"{res['dataset']}: {res['turns']} turns, {res['reviewers_per_turn']} reviewers a turn, "
        f"majority adheres on {res['share_majority_adheres']:.0%}. Out-of-fold adherence from "
        f"{s['folds']} folds ({s['ensemble']}-member ensembles); {s['splits']} random halves of the "
        f"conversations calibrate the threshold (delta {s['delta']}, against={s['against']}) and the "
        "other halves measure it.\n\n"
    )
    return head + _table(
        [
            "risk",
            "splits within the risk",
            "realised disagreement: mean",
            "90% quantile",
            "share decided: mean (lowest)",
        ],
        rows,
    )


def active_labelling(r: dict) -> str:
    res = r["result"]
    strategies = res["strategies"]
    shares = strategies["random"]["share"]
    rows = []
    for name, v in strategies.items():
        cells = [name]
        for i, _ in enumerate(shares):
            cell = f"{v['rmse_mean'][i]:.3f}"
            if name != "random" and len(res["seeds"]) > 1:
                cell += f" ({v['rmse_minus_random_mean'][i]:+.3f} ± {v['rmse_minus_random_ci95_half'][i]:.3f})"
            cells.append(cell)
        save = v["label_saving"]
        cells.append("–" if save is None else f"{save:.0%}")
        rows.append(cells)
    s = res["settings"]
    head = (
        f"{res['dataset']}, seeds {res['seeds']}: test RMSE of the target against the share of the pool "
        f"labelled ({s['ensemble']}-member ensembles, {s['pretrain_steps']} + {s['finetune_steps']} steps, "
        f"rounds of {s['step']:.0%}); random at 100%: {res['random_full_rmse']:.3f}. The last column is "
        "the label saving at which the strategy first reaches random's full-pool RMSE.\n\n"
    )
    return head + _table(["strategy", *[f"{x:.0%}" for x in shares], "saving"], rows)


def scaling(r: dict) -> str:
    res = r["result"]
    rows = [
        [
            f"{p['rows']:,}",
            f"{p['judges']:,}",
            _f(p.get("train_s"), 2),
            _f(p.get("train_base_s"), 2),
            f"{p.get('train_peak_mib', 0):,}",
            _f(p.get("step_ms", p.get("step_ms_lazy")), 2),
            _f(p.get("cv_s"), 1) if "cv_s" in p else "",
        ]
        for p in res["points"]
        if "error" not in p
    ]
    sr, sj = res["slope_vs_rows"], res["slope_vs_judges"]
    tail = (
        f"\n\nSlopes of log train time on log size: {_f(sr['train_s'], 2)} against rows (at {sr['judges']} "
        f"judges), {_f(sj['train_s'], 2)} against judges (at {sj['rows']:,} rows)."
    )
    return (
        "Default calibrator on the LLM-Rubric data grown (resampled items, jittered distributions, cloned "
        "judges); each point in its own process; peak = max RSS.\n\n"
        + _table(["label rows", "judges", "train s", "of it the base", "peak MiB", "step ms", "cv s"], rows)
        + tail
    )


ESTIMATE_NAMES = {
    "llm_rubric_in_distribution": "LLM-Rubric, in distribution (a random half trained on)",
    "llm_rubric_shift_down": "LLM-Rubric, covariate shift down (release: bottom 30% of judge-expected Q0)",
    "llm_rubric_shift_up": "LLM-Rubric, covariate shift up (release: top 30%)",
    "new_chatbot": "bundled benchmark, new chatbot (leave one role out, 4 roles pooled)",
    "far_shift": "far shift (bundled benchmark, the release's judge hotter and lenient: T 2.5, tilt 0.5)",
    "far_shift_harder": "far shift, harder (the release's judge sharper, T 0.6, tilt 0.9, 35% of its mass "
    "on the reversed scale)",
}


def estimate(r: dict) -> str:
    res = r["result"]
    pct = round(100 * (1 - res["alpha"]))
    rows = []
    for name, bench in res["benchmarks"].items():
        for kind in ("rate", "mean"):
            b = bench[kind]
            for n, v in b["by_n"].items():
                if v is None:
                    continue
                diff = v["same_truth_difference_covers_0"]
                rows.append(
                    [
                        ESTIMATE_NAMES.get(name, name),
                        kind,
                        n,
                        _f(v["humans_coverage"], 3),
                        _f(v["ppi_coverage"], 3),
                        _f(v["humans_mean_width"], 3),
                        _f(v["ppi_mean_width"], 3),
                        f"{v['effective_labels_median']:.1f}",
                        _f(diff, 3),
                        f"{b['calibrator_bias']:+.3f}",
                        f"{b['raw_judge_bias']:+.3f}",
                    ]
                )
    before, looks, plans = [], [], []
    for name, bench in res["benchmarks"].items():
        label = ESTIMATE_NAMES.get(name, name)
        for kind in ("rate", "mean"):
            for n, v in bench[kind]["by_n"].items():
                if v is not None and "before_issue_36" in v:
                    old = v["before_issue_36"]
                    before.append(
                        [
                            label,
                            kind,
                            n,
                            _f(old["humans_coverage"], 3),
                            _f(old["ppi_coverage"], 3),
                            f"{v['width_vs_before']['humans']:.3f}",
                            f"{v['width_vs_before']['ppi']:.3f}",
                        ]
                    )
        peek = bench["rate"].get("peeking")
        if peek:
            worse = (peek.get("fail_if_worse") or {}).get("false_worse_decisions", {})
            looks.append(
                [
                    label,
                    _f(peek["false_decisions"]["fixed_n"], 3),
                    _f(peek["false_decisions"]["sequential"], 3),
                    _f(worse.get("fixed_n"), 3),
                    _f(worse.get("sequential"), 3),
                ]
            )
        plan = bench["rate"].get("planner")
        if plan and "oracle_n" in plan:
            for what, key in (
                ("pilot, known spread (chi-square)", "chi2_plan"),
                ("pilot (F, the default)", "planned"),
                ("default, then `estimate width=` top-up", "planned_then_estimate_says_more"),
            ):
                p = plan[key]
                plans.append(
                    [
                        label,
                        what,
                        f"{plan['width']:.3f}",
                        str(plan["oracle_n"]),
                        f"{p['n_median']:.0f}",
                        _f(p["hit_rate"], 3),
                        f"{p['over_oracle']['median']:.2f}",
                        _f(p["over_oracle"]["share_above_1_3"], 3),
                        f"{p['over_sufficed']['median']:.2f}",
                    ]
                )
    text = (
        f"{res.get('coverage_draws', res['draws'])} draws per n (the planner and peeking rows: {res['draws']}); "
        f"nominal coverage {pct}%. rate: share of target answers >= 3; mean: the "
        "mean target answer. Rows are skipped where the release has n conversations or fewer.\n\n"
        + _table(
            [
                "benchmark",
                "quantity",
                "n",
                "humans coverage",
                "ppi coverage",
                "humans width",
                "ppi width",
                "ppi worth (labels)",
                "diff covers 0",
                "calibrator bias",
                "raw judge bias",
            ],
            rows,
        )
    )
    if before:
        text += (
            "\n\nThe intervals before issue 36 (Student-t, lambda tuned on the same sample, the narrower of ppi "
            "and humans-only kept) on the same draws, and the width of today's relative to them:\n\n"
            + _table(
                [
                    "benchmark",
                    "quantity",
                    "n",
                    "humans coverage before",
                    "ppi coverage before",
                    "humans width / before",
                    "ppi width / before",
                ],
                before,
            )
        )
    if looks:
        text += (
            "\n\nPeeking: a team labels 5 more conversations at a time (10 to 80) and re-runs `estimate` until "
            "the gate decides, with the threshold at the true rate (every decision is a false one; a valid "
            "procedure keeps them under alpha); and `fail_if_worse` against a 30-conversation baseline of the "
            'same release (no true difference: every "worse" is false; the fixed-n difference\'s one-sided '
            "error is alpha/2 per look):\n\n"
            + _table(
                [
                    "benchmark",
                    "false decisions, fixed-n interval",
                    "false decisions, sequential=true",
                    'false "worse", fixed-n',
                    'false "worse", sequential=true',
                ],
                looks,
            )
        )
    if plans:
        text += (
            "\n\nPlanner: `suggest ... width=W` from a 10-conversation pilot (W: the expected ppi half-width "
            "at 30); hit: the interval at the planned n is within W; oracle: the fewest conversations at which "
            "80% of samples reach W (what a planner knowing the release's spread asks for); sufficed: the fewest "
            "of the same draw's conversations that would have reached it:\n\n"
            + _table(
                [
                    "benchmark",
                    "plan",
                    "W",
                    "oracle n",
                    "planned (median)",
                    "hit",
                    "planned / oracle",
                    "share > 1.3 x oracle",
                    "planned / sufficed",
                ],
                plans,
            )
        )
    return text


def estimate_strata(r: dict) -> str:
    res = r["result"]
    rows = []
    for n, plans in res["by_n"].items():
        for plan, v in plans.items():
            alloc = ", ".join(f"{k} {a}" for k, a in v.get("allocation", {}).items()) or "-"
            rows.append(
                [
                    n,
                    plan.replace("_", " "),
                    alloc,
                    _f(v["ppi"]["coverage"], 3),
                    _f(v["ppi"]["mean_width"], 3),
                    _f(v["humans"]["coverage"], 3),
                    _f(v["humans"]["mean_width"], 3),
                ]
            )
    return (
        f"{res['draws']} draws per n; a {res['n_release_conversations']}-conversation release of "
        f"{len(res['roles'])} roles; rate interval at nominal {round(100 * (1 - res['alpha']))}%.\n\n"
        + _table(["n", "sample", "allocation", "ppi coverage", "ppi width", "humans coverage", "humans width"], rows)
    )


def estimate_recheck(r: dict) -> str:
    res = r["result"]
    rows = []
    for cell, v in res["cells"].items():
        name, kind, n = cell.split("/")
        pooled = v["pooled"]
        rows.append(
            [
                ESTIMATE_NAMES.get(name, name),
                kind,
                n.removeprefix("n="),
                _f(v["estimate_json"]["humans_coverage"], 3),
                _f(v["estimate_json"]["ppi_coverage"], 3),
                _f(pooled["humans_coverage"], 4),
                _f(pooled["ppi_coverage"], 4),
                f"{pooled['draws']:,}",
            ]
        )
    return (
        f"The cells above under {res['below']:g} drawn again with seeds {res['seeds'][0]}-{res['seeds'][-1]} "
        f"({res['draws_per_seed']:,} draws each, per role for the new chatbot):\n\n"
        + _table(
            [
                "benchmark",
                "quantity",
                "n",
                "humans (table above)",
                "ppi (table above)",
                "humans, pooled",
                "ppi, pooled",
                "draws",
            ],
            rows,
        )
    )


def estimate_far_shift(r: dict) -> str:
    """Paired coverage of ppi and humans-only per cell (benchmarks/estimate.py --results-name
    estimate_far_shift), with the calibrator's bias beside each release and the ppi interval as `estimate`
    reported it before issue 51 (the narrower of it and humans-only kept, its jackknife not refitted)."""
    res = r["result"]
    rows = []

    def add(name: str, b: dict) -> None:
        for kind in ("rate", "mean"):
            for n, c in b[kind]["by_n"].items():
                if not c:
                    continue
                known = c["before_issue_51"]
                rows.append(
                    [
                        name,
                        kind,
                        f"{b[kind]['calibrator_bias']:+.3f}",
                        n,
                        _f(c["humans_coverage"], 3),
                        _f(c["ppi_coverage"], 3),
                        f"{c['ppi_minus_humans_coverage']:+.3f} ± {c['ppi_minus_humans_mc_se']:.3f}",
                        _f(c["ppi_width_ratio"], 3),
                        _f(known["ppi_coverage"], 3),
                        f"{known['ppi_minus_humans_coverage']:+.3f}",
                        _f(known["ppi_width_ratio"], 3),
                    ]
                )

    for name, b in res["benchmarks"].items():
        add(ESTIMATE_NAMES.get(name, name), b)
        for role, rb in (b.get("roles") or {}).items():
            if "calibrator_bias" in rb.get("rate", {}):
                add(f"{ESTIMATE_NAMES.get(name, name)}, {role}", rb)
    return (
        f"{res['coverage_draws']:,} draws per cell (paired: both intervals on the same labels; ± the "
        "difference's Monte-Carlo sd). `before`: the interval `estimate` reported before issue 51 (the narrower "
        "of ppi and humans-only kept where lambda averaged >= 0.5; the jackknife's lambda not refitted).\n\n"
        + _table(
            [
                "release",
                "quantity",
                "calibrator bias",
                "n",
                "humans",
                "ppi",
                "ppi − humans",
                "width ppi/humans",
                "ppi before",
                "ppi − humans before",
                "width before",
            ],
            rows,
        )
    )


def _ratio_text(b: dict, key: str) -> str:
    """A width ratio over the unadapted model's, with its paired bootstrap interval where measured."""
    interval = b.get(f"{key}_width_over_unadapted_95")
    return f"{b[f'{key}_width_over_unadapted']:.3f}" + (" [{:.3f}, {:.3f}]".format(*interval) if interval else "")


def estimate_crossfit(r: dict) -> str:
    res = r["result"]
    rows = []
    for name, b in res["benchmarks"].items():
        for key, what in (
            ("humans", "humans-only (n labels)"),
            ("unadapted", "ppi, the unadapted model (n labels)"),
            ("crossfit", f"ppi, crossfit={res['k']} (n labels, the calibrator adapted on them)"),
            ("crossfit_alone", f"ppi, crossfit={res['k']} without the unadapted model beside it"),
            ("adapt_then_label_again", "ppi, adapted on n labels, then n fresh labels (2n)"),
        ):
            if key in b:
                rows.append(
                    [
                        ESTIMATE_NAMES.get(name, name),
                        what,
                        str(b["draws"]),
                        _f(b[key]["coverage"], 3),
                        _f(b[key]["mean_width"], 4),
                    ]
                )
    ratios = [
        f"{ESTIMATE_NAMES.get(name, name)}: {_ratio_text(b, 'crossfit')}"
        + (f" (without the unadapted model: {_ratio_text(b, 'crossfit_alone')})" if "crossfit_alone" in b else "")
        for name, b in res["benchmarks"].items()
        if "crossfit_width_over_unadapted" in b
    ]
    paired = (
        "\n\nCross-fitted width over the unadapted model's on the same labels (with a paired bootstrap 95% "
        "interval where measured): " + "; ".join(ratios) + "."
        if ratios
        else ""
    )
    return (
        f"n = {res['n']} labelled conversations per draw; every calibrator an ensemble of {res['ensemble']} "
        f"(the defaults otherwise); rate interval at nominal {round(100 * (1 - res['alpha']))}%. Draws are "
        "few (each trains K + 1 calibrators): the coverage's Monte-Carlo sd is about "
        f"{max(b['coverage_mc_sd'] for b in res['benchmarks'].values() if 'coverage_mc_sd' in b):.3f}.\n\n"
        + _table(["benchmark", "interval", "draws", "coverage", "mean width"], rows)
        + paired
    )


BATCH_PHASES = {
    "write_files": "write the batch files (`submit=false`)",
    "submit_wait_read": "upload, create, poll, download, read into the cache, write `llm.csv`",
    "read_results_file": "read the same results from a file (`results=`, a fresh folder)",
    "rerun_from_cache": "rerun from the cache",
}


def batch_gather(r: dict) -> str:
    res = r["result"]
    rows = [[BATCH_PHASES.get(k, k), f"{v['wall_s']:.1f} s", f"{v['cpu_s']:.1f} s"] for k, v in res["phases"].items()]
    same = "identical" if res["results_file_llm_csv_identical"] else "**different**"
    return (
        f"{res['requests']:,} requests in {res['batch_files']} batch file(s) of {res['batch_bytes'] / 1e6:.0f} MB "
        f"({res['bytes_per_request']:,} bytes per request, so about {res['requests_per_200mb_file']:,} requests "
        f"fit the 200 MB limit per file); the `llm.csv` read from a results file is {same} to the one from "
        "the Batch API.\n\n" + _table(["phase", "wall", "CPU of the gather"], rows)
    )


def trust(r: dict) -> str:
    res, parts = r["result"], []
    if "shift_check" in res:
        sc = res["shift_check"]
        rows = [
            [
                name,
                f"{v['calibrator_bias_rate']:+.3f}",
                "yes" if v["should_fire"] else "no",
                "yes" if v["fired_on_release"] else "no",
                v["n_conversations"],
                _f(v["firing_rate_by_n"]["20"], 2),
                _f(v["firing_rate_by_n"]["40"], 2),
            ]
            for name, v in sc["shifted"].items()
        ]
        rows += [
            [
                f"{name}, in distribution ({v['splits']} random halves)",
                "",
                "no",
                "",
                "",
                f"false alarms {v['false_alarm_rate']:.2f}",
                "",
            ]
            for name, v in sc["in_distribution"].items()
        ]
        parts.append(
            "**Shift check** (fires at p < 0.01):\n\n"
            + _table(
                [
                    "release",
                    "calibrator bias (rate)",
                    "should fire",
                    "fired",
                    "conversations",
                    "fires at n=20",
                    "fires at n=40",
                ],
                rows,
            )
        )
    if "transport_audit" in res:
        ta = res["transport_audit"]
        rows = [
            [
                name,
                f"{b['calibrator_bias_rate']:+.3f}",
                n,
                _f(v["PASS"], 3),
                _f(v["FAIL"], 3),
                _f(v["INCONCLUSIVE"], 3),
                _f(v.get("mean_half_width"), 3),
            ]
            for name, b in ta["benchmarks"].items()
            for n, v in b["by_n"].items()
            if v is not None
        ]
        parts.append(
            f"**Transport audit** (margin {ta['margin']:g}, {ta['draws']} draws per n):\n\n"
            + _table(
                ["release", "calibrator bias (rate)", "n", "PASS", "FAIL", "INCONCLUSIVE", "interval half-width"], rows
            )
        )
    if "alt_test" in res:
        at = res["alt_test"]
        rows = []
        for data in ("llm_rubric", "role_adherence"):
            for q, b in at.get(data, {}).get("questions", {}).items():
                rv, cal, test = b["reviewers"], b["calibrated"], b["alt_test"]
                rows.append(
                    [
                        data,
                        q,
                        _f(rv["pearson"], 3),
                        _f(rv["kappa"], 3),
                        _f(cal["pearson"], 3),
                        _f(cal["kappa"], 3),
                        test["tested"],
                        _f(test["winning_rate"], 2),
                        test["outcome"],
                    ]
                )
        parts.append(
            f"**Can the calibrated judge replace a reviewer?** (epsilon {at['epsilon']:g}, cv with each "
            f"question as the target, ensemble of {at['ensemble']}):\n\n"
            + _table(
                [
                    "data",
                    "question",
                    "reviewers pearson",
                    "reviewers kappa",
                    "calibrated pearson",
                    "calibrated kappa",
                    "reviewers tested",
                    "winning rate",
                    "alt-test",
                ],
                rows,
            )
        )
    if "score_overhead" in res:
        so = res["score_overhead"]
        parts.append(
            f"**Cost**: on the {so['conversations']} bundled conversations (answers cached), `score` took "
            f"{so['seconds_on_shift_ignore']:.2f} s without the check and {so['seconds_on_shift_warn']:.2f} s "
            f"with it ({100 * so['overhead']:+.1f}%); model.json {so['model_json_bytes'] / 1000:.0f} kB."
        )
    return "\n\n".join(parts)


def separability(r: dict) -> str:
    """Per shift benchmark: the AUC of telling its new side's conversations from the old side's."""
    res = r["result"]
    rows = [
        [
            SHIFT_NAMES[b],
            "– (the same conversations on both sides)"
            if res[b]["auc_mean"] is None
            else f"{res[b]['auc_mean']:.3f}"
            + (
                f" (per held-out role: {', '.join(f'{a:.3f}' for a in res[b]['auc_per_fold'])})"
                if len(res[b]["auc_per_fold"]) > 1
                else ""
            ),
        ]
        for b in SHIFT_NAMES
        if b in res
    ]
    return f"{res['classifier']}.\n\n" + _table(["benchmark", "AUC old vs new"], rows)


DEPLOY_RULES = {
    "deployed": "**the deploy line**: the network unless it loses to no adaptation on the new rows in 2 "
    "resamples of 3, then linear (no adaptation if linear is significantly worse)",
    "network_unless_significant": "the network unless another model is significantly better on the new rows "
    "(the deploy line before)",
    "lowest_new_cv": "lowest cv RMSE on the new rows",
    "lowest_union_cv": "lowest cv RMSE on every row (the first deploy line)",
    "always_network": "always the network",
    "blend": "mean of network and linear (not shipped: what-if)",
}


PER_BENCHMARK_RULES = ("deployed", "network_unless_significant", "always_network")


def deploy_choice(r: dict) -> str:
    """Per shift benchmark and k: how often each decision rule deployed the model with the lowest RMSE on
    the new release's test rows (strict), or one within each tolerance of it, and its mean regret."""
    res = r["result"]
    tols = res["tolerances"]
    rows = []
    for b in [*ADAPT_BENCHMARKS, "all_benchmarks"]:
        for k, at in res.get(b, {}).get("by_k", {}).items() if b != "all_benchmarks" else res.get(b, {}).items():
            if b != "all_benchmarks" and "rules" not in at:
                continue  # k took every new conversation of the benchmark: nothing left to test
            rules = at["rules"] if b != "all_benchmarks" else {m: at[m] for m in DEPLOY_RULES if m in at}
            for rule, v in rules.items():
                if rule not in DEPLOY_RULES or (b != "all_benchmarks" and rule not in PER_BENCHMARK_RULES):
                    continue
                vs = v.get("vs_none")
                rows.append(
                    [
                        ADAPT_BENCHMARKS.get(b, "**all**"),
                        k,
                        str(at["n_units"]),
                        DEPLOY_RULES[rule],
                        f"{v['strict_rate']:.0%}",
                        *(f"{v[f'rate_within_{t}']:.0%}" for t in tols),
                        f"{v.get('regret_with_none', v['regret']):+.4f}",
                        f"{v['worst_regret_with_none']:+.4f}" if "worst_regret_with_none" in v else "–",
                        f"{vs['rmse_diff']:+.4f} {_interval(vs['rmse_diff_95'])}" if vs else "–",
                    ]
                )
    trained = res.get("trained_by")
    trained = [trained] if isinstance(trained, str) else trained or []
    head = (
        f"Network ensembles of {res['ensemble']}; the rules that read the new rows read every row below "
        f"{res['min_deploy_conversations']} new conversations. Right: the pick has the lowest test RMSE of the "
        "network, linear and ordinal models on the union (strict), or is within the tolerance of it. Regret: "
        "the pick's test RMSE minus the best one's, no adaptation counted among the candidates, mean over "
        "draws; worst: the largest. Pick − none: the pick's test RMSE minus no adaptation's, with a 95% paired "
        "bootstrap interval (test conversations resampled). Per benchmark, the deploy line, the rule before it "
        "and always the network; every rule over all benchmarks at the end."
        + (f" The models were trained by {' and '.join(f'`{c}`' for c in trained)}." if trained else "")
        + "\n\n"
    )
    return head + _table(
        [
            "benchmark",
            "k",
            "draws",
            "rule",
            "right (strict)",
            *(f"right within {t}" for t in tols),
            "regret",
            "worst",
            "pick − none: RMSE [95%]",
        ],
        rows,
    )


def estimate_cvplan(r: dict) -> str:
    """The planner before any label of the release: the calibrator taken as calibrated against cv's
    out-of-fold agreement (`suggest ... cv=DIR`), beside the 10-conversation pilot, on the same draws."""
    rows = []
    for name, bench in r["result"]["benchmarks"].items():
        plan = bench.get("rate", {}).get("planner") or {}
        sources = plan.get("without_labels")
        if not sources:
            continue
        label = ESTIMATE_NAMES.get(name, name)
        for what, p in (("calibrator alone", sources["calibrator_alone"]), ("cv=DIR", sources["cv"])):
            rows.append(
                [label, what, str(plan["oracle_n"]), str(p["n"]), _f(p["hit_rate"], 3), f"{p['n_over_oracle']:.2f}"]
            )
        pilot = plan["planned"]
        rows.append(
            [
                label,
                "10-conversation pilot (median)",
                str(plan["oracle_n"]),
                f"{pilot['n_median']:.0f}",
                _f(pilot["hit_rate"], 3),
                f"{pilot['over_oracle']['median']:.2f}",
            ]
        )
    head = (
        "`suggest purpose=estimate width=W` with no label of the release: planned n, the share of "
        f"{r['result']['draws']} draws whose interval at that n is within W (hit), and the plan over the oracle n "
        "(the fewest conversations at which 80% of samples reach W). The pilot rows are the same draws' plans "
        "from 10 labelled conversations of the release.\n\n"
    )
    return head + _table(["benchmark", "plan from", "oracle n", "planned n", "hit", "planned / oracle"], rows)


RENDERERS: dict[str, Callable[[dict], str]] = {
    "trust": trust,
    "llm_rubric_cv": llm_rubric_cv,
    "shift": shift,
    "adapt": adapt,
    "separability": separability,
    "deploy_choice": deploy_choice,
    "train_speed": train_speed,
    "gather_throughput": gather_throughput,
    "decide_risk": decide_risk,
    "active_labelling": active_labelling,
    "scaling": scaling,
    "estimate": estimate,
    "estimate_strata": estimate_strata,
    "estimate_crossfit": estimate_crossfit,
    "estimate_recheck": estimate_recheck,
    "estimate_far_shift": estimate_far_shift,
    "estimate_cvplan_4000": estimate_cvplan,  # benchmarks/estimate.py --results-name estimate_cvplan_4000
    "batch_gather": batch_gather,
    "monitor": results_monitor.monitor,
    "compare_judges": results_judges.compare_judges,
    "compare_judges_local_llm": results_judges.local_llm,  # benchmarks/compare_judges.py --local-llm 20
}


def render(name: str, results: Path = RESULTS) -> str:
    """The table of benchmark NAME with its provenance, or a note that it has not been run. A variant
    written with `--results-name BENCHMARK-VARIANT` is rendered like BENCHMARK."""
    renderer = RENDERERS.get(name.split("-")[0])
    if renderer is None:
        raise KeyError(f"no results renderer {name!r}; known: {', '.join(RENDERERS)}")
    record = load(name, results)
    if record is None:
        return (
            f'!!! note "Not measured"\n    `benchmarks/results/{name}.json` is missing: run '
            f"`python benchmarks/{name.split('-')[0]}.py` to produce it."
        )
    return renderer(record) + "\n\n" + provenance(record)


def render_markers(markdown: str, results: Path = RESULTS) -> str:
    """Replace every `<!-- results: NAME -->` of a page with its rendered table."""
    return MARKER.sub(lambda m: render(m.group("name"), results), markdown)


# --- the README's short table -----------------------------------------------------------------------


def readme_table(results: Path = RESULTS) -> str:
    """What was measured, one line per figure, each linking to the page that explains it."""
    rows = []
    cv = load("llm_rubric_cv", results)
    if cv:
        c = cv["result"]["calibrated"]
        jm = cv["result"]["baselines_seed0"]["judge_mean"]
        rows.append(
            [
                "[Agreement with held-out reviewers](docs/results.md#calibration-on-the-llm-rubric-data), "
                "LLM-Rubric data, 5-fold cv",
                f"Pearson {c['pearson']['mean']:.3f} ± {c['pearson']['std']:.3f}, RMSE {c['rmse']['mean']:.3f} "
                f"(per-judge mean: {jm['pearson']:.3f}, {jm['rmse']:.3f})",
            ]
        )
        rows.append(
            [
                "[Calibration](docs/results.md#calibration-on-the-llm-rubric-data): worst smECE of the target",
                f"{cv['result']['smece_max']:.3f}",
            ]
        )
        rows.append(
            [
                f"[`cv` time](docs/results.md#calibration-on-the-llm-rubric-data), "
                f"{cv['result']['settings']['ensemble']} members, every baseline",
                f"{cv['result']['cv_seconds_median']:g} s median per seed",
            ]
        )
    sh = load("shift", results)
    if sh:
        for key, text in (
            ("llm_rubric_cv", "in distribution"),
            ("covariate_shift_up", "covariate shift up"),
            ("new_chatbot", "a new chatbot"),
        ):
            vs = sh["result"].get(key, {}).get("vs_best_simple")
            if vs:
                rows.append(
                    [
                        f"[Default − best simple model](docs/results.md#accuracy-under-shift), {text}",
                        f"RMSE {vs['rmse_diff']:+.4f} {_interval(vs['rmse_diff_95'])}",
                    ]
                )
    ad = load("adapt-k20", results) or load("adapt", results)  # the k=20 run of today's default, else the older
    at20 = [
        b["by_k"]["20"]
        for k, b in (ad or {"result": {}})["result"].items()
        if isinstance(b, dict) and (b.get("by_k") or {}).get("20")
    ]
    if at20:
        diffs = [a["vs_none"]["network"]["rmse_diff"] for a in at20]
        rows.append(
            [
                f"[20 new-release conversations trained on with the old](docs/how-to/adapt.md#how-much-it-helps), "
                f"RMSE against no adaptation, over {len(at20)} shift benchmarks",
                f"{min(diffs):+.4f} to {max(diffs):+.4f}",
            ]
        )
    dc = load("deploy_choice", results)
    pooled = (dc or {"result": {}})["result"].get("all_benchmarks", {}).get("20", {}).get("deployed")
    if pooled and "regret_with_none" in pooled:
        benches = [b for b, v in dc["result"].items() if isinstance(v, dict) and "by_k" in v]
        at20 = [dc["result"][b]["by_k"].get("20") or {} for b in benches]
        worse = [at["rules"]["deployed"]["vs_none"]["rmse_diff_95"][0] > 0 for at in at20 if "rules" in at]
        rows.append(
            [
                f"[The model cv names for a new release](docs/how-to/adapt.md#deploy-the-model-cv-names-for-the-new-release)"
                f" from 20 new conversations, over {len(benches)} shift benchmarks: mean RMSE above the best "
                "model's (no adaptation among them), and benchmarks where it is significantly worse than not adapting",
                f"+{pooled['regret_with_none']:.4f} (worst draw +{pooled['worst_regret_with_none']:.3f}); "
                f"{sum(worse)} of {len(worse)}",
            ]
        )
    ts = load("train_speed", results)
    if ts:
        w = ts["result"]["config"]["workers"]
        rows.append(
            [
                "[Batched training](docs/results.md#training-speed) against one model at a time",
                f"{ts['result']['speedup']:.1f}× on one core, {ts['result'][f'speedup_{w}_workers']:.1f}× "
                f"in {w} slices",
            ]
        )
    gt = load("gather_throughput", results)
    if gt:
        best = min(gt["result"]["runs"], key=lambda run: run["ratio"])
        rows.append(
            [
                f"[`gather`](docs/results.md#gather-throughput) at concurrency {best['concurrency']}",
                f"{best['ratio']:.2f}× the ideal time, {best['requests_per_s']:g} requests/s",
            ]
        )
    dr = load("decide_risk", results)
    if dr:
        v = dr["result"]["levels"].get("0.1")
        if v:
            rows.append(
                [
                    "[`decide` at risk 0.1](docs/results.md#decisions-with-a-guarantee): splits within it, "
                    "share decided",
                    f"{v['share_within_risk']:.0%}, {v['coverage_mean']:.1%}",
                ]
            )
    es = load("estimate", results)
    if es:
        at20 = [
            (b[kind]["by_n"]["20"]["ppi_coverage"], name)
            for name, b in es["result"]["benchmarks"].items()
            for kind in ("rate", "mean")
            if b[kind]["by_n"].get("20")
        ]
        shift_rate = es["result"]["benchmarks"].get("llm_rubric_shift_down", {}).get("rate")
        recheck = load("estimate_recheck", results)
        again = [
            v["pooled"]["ppi_coverage"]
            for cell, v in (recheck or {}).get("result", {}).get("cells", {}).items()
            if cell.endswith("/n=20")
        ]
        redrawn = f" (the closest, drawn again {min(again):.1%} to {max(again):.1%})" if again else ""
        roles = [
            rb[kind]["by_n"]["20"]["ppi_coverage"]
            for b in es["result"]["benchmarks"].values()
            for rb in (b.get("roles") or {}).values()
            for kind in ("rate", "mean")
            if rb.get(kind, {}).get("by_n", {}).get("20")
        ]
        if roles:
            redrawn += f", single roles {min(roles):.1%} to {max(roles):.1%}"
        if at20 and shift_rate:
            rows.append(
                [
                    "[Release adherence rate](docs/how-to/release-estimates.md#measured) from 20 labelled "
                    "conversations: ppi interval coverage (nominal 90%), and the bias it corrects under shift",
                    f"{min(at20)[0]:.1%} to {max(at20)[0]:.1%} over {len(at20)} benchmark quantities{redrawn}; "
                    f"calibrator bias {shift_rate['calibrator_bias']:+.3f}, raw judge "
                    f"{shift_rate['raw_judge_bias']:+.3f}",
                ]
            )
    if not rows:
        return "No benchmark results are committed yet (`benchmarks/results/`)."
    return _table(["what", "measured"], rows) + (
        "\n\nEach figure was written by a benchmark into `benchmarks/results/`, with the command, the machine "
        "and the date; [Results](docs/results.md) has the full tables."
    )
