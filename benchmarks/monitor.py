"""`role-rubric monitor` on streams simulated from the bundled benchmark: false alarms over the whole horizon,
the delay to detect a drop, the shift alarm after a judge change, and the time to add one window. Prints JSON
(benchmarks/results/monitor.json).

The population: the bundled role-adherence benchmark (data/role_adherence, 112 conversations of 4 chatbot
roles, the offline embedding judge's distributions), calibrated by a model trained on it (the defaults); each
conversation is its calibrated totals, A_c (the calibrated adherence of its turns summed) and m_c (its turns),
and its role. A stream is `--weeks` weekly windows of `--per-week` conversations drawn from it with
replacement, so every window is a draw of the same behaviour (in distribution), and the alarms are decided by
the command's own functions (calibration/monitor/alarms.py `rate_checks`, with the command's split of alpha
over the checks drop= and the shift check, the horizon and the rows: "all" and each role).
- false_alarms: the share of `--streams` in-distribution streams with any alarm in the horizon, drop=0 (the
  strictest: any significant drop from the reference period of the first 4 windows), to hold <= alpha = 0.05;
- delay: from week `--inject-week` on, every conversation's calibrated adherence is scaled down so that the
  stream's rate drops by 0.10 (or 0.05); the delay is the windows from that week to the first alarm
  (0: in that week); median over `--streams` streams, with the share detected within the horizon; and the
  same in windows of a quarter the size (`delay_small_windows`: the price of the horizon-wide guarantee);
- shift: a window of `--per-week` conversations drawn from the bundled data, tested per role by the shift
  check at the command's level for that window: unchanged (false alarms over `--shift-windows` windows) and
  with the far-shift benchmark's judge change (benchmarks/far_shift.py: flatter and more lenient
  distributions), the share of windows where it fires (so the delay is 0 windows where that share is ~1);
- timing: the command in a child process adding one window to a 52-window state of a generated stream (its
  conversations.jsonl with started_at), against the first 52; wall seconds and CPU seconds (the machine's
  load aside), each including the start of Python and torch.

    python benchmarks/monitor.py [--streams 1000] [--work DIR] [--skip-timing]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _results import add_results_argument, emit  # benchmarks/_results.py: the JSON and its provenance
from far_shift import restyled
from shift import bundled_dir

from calibration.data.dataset import load_dataset
from calibration.decide import default_adheres_at
from calibration.model.files import load_model
from calibration.model.shift import roles_of
from calibration.monitor import statistics as ms
from calibration.monitor.alarms import checks_on, level, rate_checks
from calibration.release.roles import roles_of_release
from calibration.release.turns import reviewer_predictions

ALPHA = 0.05
SETTINGS = {"alpha": ALPHA, "horizon": 52, "reference": 4, "fail_under": None, "drop": 0.0, "shift": True}


def trained_model(data: Path, out: Path) -> Path:
    if not (out / "model.json").exists():  # --work is a cache
        subprocess.run(
            [sys.executable, "-m", "calibration.cli", "train", f"data={data}", f"out={out}"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    return out


def population(data: Path, model_dir: Path) -> dict:
    """Per conversation of the bundled data: A (calibrated adherence summed over its turns), m (turns), role."""
    model = load_model(model_dir)
    ds = load_dataset(data, rubric=model.check_rubric(data / "rubric.yaml"))
    t = ds.target_index
    preds = reviewer_predictions(
        model,
        ds,
        torch.from_numpy(ds.features(model.spec)),
        t,
        kind="rate",
        adheres_at=default_adheres_at(model.rubric.questions[t]),
    )
    ids, inverse = np.unique(preds.conversation.astype(str), return_inverse=True)
    role_of = {c: r for r, convs in roles_of_release(data).items() for c in convs}
    return {
        "ids": ids,
        "A": np.bincount(inverse, weights=preds.calibrator),
        "m": np.bincount(inverse).astype(float),
        "role": np.array([role_of[c] for c in ids]),
        "ds": ds,
        "model": model,
        "texts": dict(roles_of([data])),
    }


def stream_alarms(pop: dict, rng, weeks: int, per_week: int, inject: int | None, drop: float) -> list[int]:
    """The weeks (0-based) with an alarm in one simulated stream; from week `inject` on, the rate is `drop` lower."""
    A, m, role = pop["A"], pop["m"], pop["role"]
    roles = np.unique(role)
    factor = (A.sum() / m.sum() - drop) / (A.sum() / m.sum())
    reference: dict[str, ms.Totals] = {}
    frozen: dict[str, ms.Totals] = {}
    alarmed = []
    for week in range(weeks):
        idx = rng.integers(0, len(A), per_week)
        a = A[idx] * (factor if inject is not None and week >= inject else 1.0)
        rows = {"all": ms.Totals.of(a, m[idx])}
        for r in roles:
            mine = role[idx] == r
            rows[str(r)] = ms.Totals.of(a[mine], m[idx][mine])
        if week == SETTINGS["reference"]:
            frozen = dict(reference)
        decided = rate_checks(rows, reference=frozen, position=week, settings=SETTINGS)
        if any(c["fired"] for checks in decided.values() for c in checks):
            alarmed.append(week)
        if week < SETTINGS["reference"]:
            for g, t in rows.items():
                reference[g] = reference[g] + t if g in reference else t
    return alarmed


def false_alarms(pop: dict, streams: int, weeks: int, per_week: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    any_alarm = [bool(stream_alarms(pop, rng, weeks, per_week, None, 0.0)) for _ in range(streams)]
    share = float(np.mean(any_alarm))
    return {
        "streams": streams,
        "streams_with_a_false_alarm": int(np.sum(any_alarm)),
        "share": share,
        "stated_level": ALPHA,
        "at_or_under_level": share <= ALPHA,
        "monte_carlo_sd": float(np.sqrt(ALPHA * (1 - ALPHA) / streams)),
    }


def delays(pop: dict, drop: float, streams: int, weeks: int, per_week: int, inject: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    found = []
    early = 0
    for _ in range(streams):
        alarmed = stream_alarms(pop, rng, weeks, per_week, inject, drop)
        early += any(w < inject for w in alarmed)
        after = [w - inject for w in alarmed if w >= inject]
        found.append(after[0] if after else np.inf)
    found = np.array(found, float)
    return {
        "drop": drop,
        "injected_at_week": inject,
        "streams": streams,
        "median_delay_windows": float(np.median(found)),
        "p90_delay_windows": float(np.quantile(found, 0.9)),
        "detected_within_horizon": float(np.isfinite(found).mean()),
        "streams_with_an_alarm_before_the_drop": int(early),
    }


def shift_windows(pop: dict, windows: int, per_week: int, seed: int, changed: bool) -> dict:
    """The shift check per role of `windows` windows drawn from the bundled data (with the judge changed or
    not), each at the command's level for a window of this many roles."""
    ds, model = pop["ds"], pop["model"]
    summary = model.record.shift_summary()
    roles = np.unique(pop["role"])
    at = level(ALPHA, checks_on(fail_under=None, drop=0.0, shift=True), SETTINGS["horizon"], len(roles))
    conv_of_item = ds.items["conversation_id"].astype(str).to_numpy()
    rng = np.random.default_rng(seed)
    fired, tested = 0, 0
    for _ in range(windows):
        idx = rng.integers(0, len(pop["ids"]), per_week)
        any_fired = False
        for r in roles:
            convs = pop["ids"][idx[pop["role"][idx] == r]]
            sub = _window_dataset(ds, conv_of_item, convs, changed)
            names = list(sub.items["conversation_id"].unique())
            texts = {c: pop["texts"][c.split("#")[0]] for c in names}
            got = ms.shift_p(summary, [(ms.Scored(Path("."), sub, None, {}, {}, texts), names)], at)
            tested += got["p_value"] is not None
            any_fired |= got["p_value"] is not None and got["p_value"] < at
        fired += any_fired
    return {
        "windows": windows,
        "judge_changed": changed,
        "level_per_role": at,
        "share_of_windows_with_a_shift_alarm": fired / windows,
        "role_checks_run": tested,
    }


def _window_dataset(ds, conv_of_item, convs, changed: bool):
    """A dataset of these conversations (drawn with replacement: each draw its own id, `id#k`)."""
    parts, names = [], []
    for k, c in enumerate(convs):
        rows = np.flatnonzero(conv_of_item == c)
        parts.append(rows)
        names += [f"{c}#{k}"] * len(rows)
    rows = np.concatenate(parts)
    probs = ds.probs[rows]
    if changed:
        probs = restyled(probs, ds.present[rows], ds.n_options)
    items = pd.DataFrame({"conversation_id": names, "turn": ds.items["turn"].to_numpy()[rows]})
    empty = np.zeros(0, dtype=np.int64)
    return dataclasses.replace(
        ds,
        items=items,
        probs=probs,
        present=ds.present[rows],
        coverage=None,
        label_item=empty,
        label_judge=empty,
        answers=np.zeros((0, len(ds.rubric.ids)), np.int64),
        label_weight=None,
    )


def write_stream(src: Path, dst: Path, weeks: range, per_week: int, seed: int) -> Path:
    """A gathered dataset of `per_week` conversations a week drawn from the bundled data (new ids), with
    started_at, as an import of production traces gives one."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("rubric.yaml", "gather_summary.json"):
        if (src / name).exists():
            (dst / name).write_bytes((src / name).read_bytes())
    llm = pd.read_csv(src / "llm.csv", dtype={"conversation_id": str, "turn": str}, keep_default_na=False)
    by_conv = dict(tuple(llm.groupby("conversation_id", sort=False)))
    records = {json.loads(x)["conversation_id"]: json.loads(x) for x in (src / "conversations.jsonl").open()}
    ids = sorted(by_conv)
    rng = np.random.default_rng(seed)
    start = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)
    frames, lines = [], []
    for week in weeks:
        for i, k in enumerate(rng.integers(0, len(ids), per_week)):
            new = f"w{week:02d}-{i:04d}"
            frames.append(by_conv[ids[k]].assign(conversation_id=new))
            when = start + dt.timedelta(weeks=week, seconds=int(rng.integers(0, 7 * 86400)))
            lines.append({**records[ids[k]], "conversation_id": new, "started_at": when.strftime("%Y-%m-%dT%H:%M:%SZ")})
    pd.concat(frames).to_csv(dst / "llm.csv", index=False)
    (dst / "conversations.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return dst


def timing(src: Path, model: Path, work: Path, per_week: int) -> dict:
    """The command in a child process: 52 windows into a new state, then one more week added."""
    history = write_stream(src, work / "weeks-00-51", range(52), per_week, seed=1)
    latest = write_stream(src, work / "week-52", range(52, 53), per_week, seed=2)
    out = work / "monitor"
    times = {}
    for name, data, until in (
        ("first_52_windows_s", history, "2027-01-04"),
        ("add_one_window_s", latest, "2027-01-11"),
    ):
        began, cpu = time.perf_counter(), _children_cpu()
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "calibration.cli",
                "monitor",
                f"data={data}",
                f"model={model}",
                f"out={out}",
                f"until={until}",
                "drop=0.0",
            ],
            capture_output=True,
            text=True,
        )
        times[name] = round(time.perf_counter() - began, 2)
        times[name.replace("_s", "_cpu_s")] = round(_children_cpu() - cpu, 2)
        if done.returncode not in (0, 1):
            raise SystemExit(done.stderr)
    windows = [json.loads(x) for x in (out / "windows.jsonl").read_text().splitlines()]
    return {**times, "windows_in_state": len(windows), "conversations_per_window": per_week}


def _children_cpu() -> float:
    """CPU seconds of the finished child processes (user + system): the machine's load aside."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--weeks", type=int, default=52)
    parser.add_argument("--per-week", type=int, default=200)
    parser.add_argument("--inject-week", type=int, default=20)
    parser.add_argument("--shift-windows", type=int, default=40)
    parser.add_argument("--work", type=Path, default=None, help="cache folder (the gathered data, the model)")
    parser.add_argument("--skip-timing", action="store_true")
    add_results_argument(parser, "monitor")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="monitor-bench-") as tmp:
        work = args.work or Path(tmp)
        data = bundled_dir(work)
        model = trained_model(data, work / "model")
        pop = population(data, model)
        began = time.perf_counter()
        result = {
            "settings": {
                **SETTINGS,
                "weeks": args.weeks,
                "per_week": args.per_week,
                "roles": len(np.unique(pop["role"])),
            },
            "population": {"conversations": len(pop["A"]), "rate": float(pop["A"].sum() / pop["m"].sum())},
            "false_alarms": false_alarms(pop, args.streams, args.weeks, args.per_week, seed=0),
            "delay": [
                delays(pop, d, args.streams, args.weeks, args.per_week, args.inject_week, seed=1 + i)
                for i, d in enumerate((0.10, 0.05))
            ],
        }
        # the price of the horizon-wide guarantee: the same drops in windows of a quarter the size
        small = max(args.per_week // 4, 8)
        result["delay_small_windows"] = [
            delays(pop, d, args.streams, args.weeks, small, args.inject_week, seed=11 + i) | {"per_week": small}
            for i, d in enumerate((0.10, 0.05))
        ]
        result["simulation_s"] = round(time.perf_counter() - began, 1)
        result["shift"] = [
            shift_windows(pop, args.shift_windows, args.per_week, seed=7, changed=c) for c in (False, True)
        ]
        if not args.skip_timing:
            result["timing"] = timing(data, model, Path(tmp) / "timing", args.per_week)
    emit(args.results_name, result)


if __name__ == "__main__":
    main()
