"""The monitor benchmark's tables (benchmarks/monitor.py -> benchmarks/results/monitor.json), for
docs/how-to/monitor.md: false alarms per null scenario and detection per change, per pool and judge."""

from __future__ import annotations

from typing import Any

JUDGES = {
    "oracle": "the reviewers' own rate (a calibrator as sharp as the reviewers)",
    "gpt35": "GPT-3.5 calibrated",
    "embedding": "the embedding judge calibrated",
}
POOLS = {
    "anchors": "LLM-Rubric dialogues (real GPT-3.5 distributions, real reviewers; 5 dialogue systems as roles)",
    "bundled": "the bundled benchmark (4 roles)",
}


def _share(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def _delay(row: dict) -> str:
    if row.get("median_delay_windows") is None:
        return "never"
    return f"{row['median_delay_windows']:g} / {row['p90_delay_windows']:g}"


def monitor(record: dict[str, Any]) -> str:
    result = record["result"]
    s = result["settings"]
    head = (
        f"{s['streams_per_scenario']} streams of {s['windows']} windows per scenario and judge; alpha {s['alpha']}, "
        f"drop={s['drop']:g}, reference {s['reference_windows']} windows. Worst share of null streams with any "
        f"false alarm: **{_share(result['worst_false_alarm_share'])}** (stated: at most 5%).\n\n"
    )
    names = [n for n in next(iter(result["results"].values())) if n != "canary"]
    nulls = [n for n in names if n.startswith("null_")]
    changes = [n for n in names if not n.startswith("null_") and n != "judge_change"]
    columns = list(result["results"])
    label = [f"{POOLS[k.split('/')[0]].split(' (')[0]}: {JUDGES[k.split('/')[1]].split(' (')[0]}" for k in columns]
    out = head + "| null scenario: streams with any alarm | " + " | ".join(label) + " |\n"
    out += "|---|" + "---|" * len(columns) + "\n"
    for n in nulls:
        out += f"| {n} | " + " | ".join(_share(result["results"][c][n]["any_alarm"]) for c in columns) + " |\n"
    out += "\n| change: caught within 52 windows; delay median / 90th pct (windows) | " + " | ".join(label) + " |\n"
    out += "|---|" + "---|" * len(columns) + "\n"
    for n in changes:
        cells = [result["results"][c][n] for c in columns]
        out += f"| {n} | " + " | ".join(f"{_share(r['caught_within_horizon'])}; {_delay(r)}" for r in cells) + " |\n"
    out += "\n| judge change, no chatbot change | " + " | ".join(label) + " |\n|---|" + "---|" * len(columns) + "\n"
    rates = [result["results"][c]["judge_change"]["rate_alarm_after_the_judge_change_if_not_held"] for c in columns]
    out += "| a rate alarm after it, were the rate checks not held | " + " | ".join(map(_share, rates)) + " |\n"
    canary = []
    for c in columns:
        got = result["results"][c]["canary"].get("judge_changed")
        canary.append(
            "n/a"
            if got is None
            else f"p={got['p_value']:.2g} (level {got['level']:.2g}), {got['mean_difference']:+.3f}"
        )
    out += "| the canary's paired test on the changed judge | " + " | ".join(canary) + " |\n"
    same = []
    for c in columns:
        got = result["results"][c]["canary"].get("judge_unchanged")
        same.append("n/a" if got is None else ("fires" if got["changed"] else "quiet"))
    out += "| the canary on the unchanged judge | " + " | ".join(same) + " |\n"
    return out
