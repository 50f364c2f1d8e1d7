"""The compare-judges benchmark's tables (benchmarks/compare_judges.py -> benchmarks/results/compare_judges.json),
for docs/how-to/choose-a-judge.md: per size and question, how often the recommendation picks the real judge over
each degraded copy (and the one-question scenario's judge over shuffled-50), under the per-question rule and the
pooled one side by side, how often each is flagged within noise, the copy's label multiplier and the held-out
truth; the verdict on the whole judge per size and copy; the information ceiling (per question, the real judge
against one with no information, every dialogue labelled); then the acceptance under each rule, and the bundled
data's offline judges as measured."""

from __future__ import annotations

from typing import Any


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(s: dict) -> str:
    if "pooled_picks_real" not in s:
        return f"{s['picks_real']:.2f} · {s['within_noise']:.2f} · {s['label_multiplier']:.2f}x · {s['real_better_held_out']:.2f}"
    return (
        f"{s['picks_real']:.2f} · {s['within_noise']:.2f} / {s['pooled_picks_real']:.2f} · "
        f"{s['pooled_within_noise']:.2f} · {s['label_multiplier']:.2f}x · {s['real_better_held_out']:.2f}"
    )


def _acceptance(acc: dict, rule: str = "") -> str:
    if acc["holds"]:
        return f"**Acceptance holds**{rule}: {acc['criterion']}."
    parts = []
    for size, failing in acc["failing"].items():
        if failing:
            parts.append(
                f"at {size}: "
                + ", ".join(
                    f"{f['question'] + ' ' if 'question' in f else ''}against {f['copy']} ({f['picks_real']:.2f})"
                    for f in failing
                )
            )
    return (
        f"**Acceptance does not hold**{rule} ({acc['criterion']}); the real judge is not preferred "
        + "; ".join(parts)
        + "."
    )


def _whole_judge(by_size: dict, draws: int) -> str:
    copies = list(next(iter(by_size.values())))
    rows = []
    for size, per_copy in by_size.items():
        cells = []
        for c in copies:
            s = next(iter(per_copy[c].values()))  # the whole-judge shares are the same on every question's record
            cells.append(
                f"{s['whole_picks_real']:.2f} · {s['whole_within_noise']:.2f} · {s['whole_real_better_held_out']:.2f}"
            )
        rows.append([size, *cells])
    return (
        f"The whole judge (its RMSE averaged over the questions, `overall.whole_judge` in compare-judges.json). Each "
        f"cell: the share of {draws} draws in which it picks the real judge · the share flagged within noise · the "
        "share in which the real judge's mean RMSE is lower on the held-out dialogues.\n\n"
        + _table(["labelled dialogues", *copies], rows)
    )


def _information(info: dict) -> str:
    rows = [
        [
            q,
            f"{v['rmse_no_information_minus_real']:+.4f} [{v['interval'][0]:+.4f}, {v['interval'][1]:+.4f}]",
            "yes" if q in info["informative"] else "no",
        ]
        for q, v in info["questions"].items()
    ]
    w = info["whole_judge"]
    rows.append(
        [
            "whole judge",
            f"{w['rmse_no_information_minus_real']:+.4f} [{w['interval'][0]:+.4f}, {w['interval'][1]:+.4f}]",
            "yes" if w["interval"][0] > 0 else "no",
        ]
    )
    return f"The information ceiling ({info['what']}):\n\n" + _table(
        ["question", "RMSE no-information - real [95%]", "informative"], rows
    )


def _bundled(b: dict) -> str:
    rows = [
        [
            qid,
            q["pick"],
            "yes" if q["within_noise"] else "no",
            f"{q['rmse_difference']:+.3f} [{q['interval'][0]:+.3f}, {q['interval'][1]:+.3f}]",
            "{multiplier:.2f}x [{low:.2f}, {high:.2f}]".format(**q["runner_up_label_multiplier"]),
            "–" if q["confirmed_on_held_out_half"] is None else ("yes" if q["confirmed_on_held_out_half"] else "no"),
        ]
        for qid, q in b["questions"].items()
    ]
    header = ["question", "pick", "within noise", "RMSE pick - runner-up", "runner-up's labels", "held-out half"]
    out = f"Bundled data ({b['data']}; {b['conversations']} conversations):\n\n" + _table(header, rows)
    if "whole_judge" in b:
        out += f"\n\nThe verdict on the whole judge: {b['whole_judge']['line']}"
    return out


def compare_judges(record: dict[str, Any]) -> str:
    r = record["result"]
    copies = list(next(iter(r["by_size"].values())))
    rows = []
    for size, per_copy in r["by_size"].items():
        for q in per_copy[copies[0]]:
            rows.append([size, q, *(_cell(per_copy[c][q]) for c in copies)])
    header = ["labelled dialogues", "question", *copies]
    pooled = "acceptance_pooled" in r
    out = (
        f"Each cell: the share of {r['draws_per_size']} draws in which the recommendation picks the real judge · the "
        "share flagged within noise"
        + (
            ", under the per-question rule / the same under the pooled rule (the same draws and resamples)"
            if pooled
            else ""
        )
        + " · the copy's label multiplier (median over the draws) · the share in which the "
        "real judge is better on the held-out dialogues (the truth the pick is after)."
        + (
            f" The last column is the one-question scenario ({r['one_question_scenario']}): its shares are those "
            "of that judge, not the real one."
            if "one_question_scenario" in r
            else ""
        )
        + "\n\n"
        + _table(header, rows)
    )
    if "acceptance_whole_judge" in r:
        out += "\n\n" + _whole_judge(r["by_size"], r["draws_per_size"])
    if "information" in r:
        out += "\n\n" + _information(r["information"])
    out += "\n\n" + _acceptance(r["acceptance"], " (per-question rule)" if pooled else "")
    if pooled:
        out += "\n\n" + _acceptance(r["acceptance_pooled"], " (pooled rule)")
    for key, rule in (
        ("acceptance_informative", " (per-question rule, informative questions)"),
        ("acceptance_informative_pooled", " (pooled rule, informative questions)"),
        ("acceptance_whole_judge", " (whole judge)"),
    ):
        if key in r:
            out += "\n\n" + _acceptance(r[key], rule)
    if "bundled" in r:
        out += "\n\n" + _bundled(r["bundled"])
    return out


def local_llm(record: dict[str, Any]) -> str:
    """benchmarks/compare_judges.py --local-llm: Gemma 3 270M against the embedding judge on bundled conversations."""
    r = record["result"]
    names = list(r["gather"])
    rows = [
        [
            qid,
            q["pick"],
            "yes" if q["within_noise"] else "no",
            f"{q['rmse_difference']:+.3f} [{q['interval'][0]:+.3f}, {q['interval'][1]:+.3f}]",
            *(f"{q['rmse'][n]:.3f}" for n in names),
        ]
        for qid, q in r["questions"].items()
    ]
    header = ["question", "pick", "within noise", "RMSE pick - runner-up", *(f"{n} calibrated RMSE" for n in names)]
    cover = ", ".join(
        f"{n}: median coverage {g['coverage']['median']:.3f}, {g['pairs']} pairs, {g['requests']} requests"
        for n, g in r["gather"].items()
    )
    return (
        f"{r['data']}; {r['conversations']} conversations, {r['label_rows']} label rows. Gather: {cover} (coverage: "
        "the probability the judge put on the options at all).\n\n"
        + _table(header, rows)
        + f"\n\nThe verdict on the whole judge: {r['whole_judge']['line']}"
    )
