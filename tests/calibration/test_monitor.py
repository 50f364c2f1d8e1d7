"""`role-rubric monitor` through the command line: windows by started_at and by directory, reruns that compute only
new windows, alarms (exit 1, alarms.jsonl, the advice), and the bad inputs of issue 53 (exit 2, one line)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from calibration.cli import main
from tests.calibration.conftest import SYNTH_RUBRIC

ROLES = ("You are Ada, a banking assistant.", "You are Bo, a travel assistant.")
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)  # a Monday


def write_stream(
    path: Path,
    weeks: list[int],
    *,
    per_week: int = 24,
    quality: dict[int, tuple[float, float]] | None = None,
    labels: bool = False,
    seed: int = 1,
) -> Path:
    """A gathered dataset of conversations started in the given weeks from START (two roles, two turns each),
    whose judge distributions follow a latent quality drawn from quality[week] (default uniform 0-1, as the
    training data of `tiny_model`)."""
    rng = np.random.default_rng(seed)
    path.mkdir(parents=True, exist_ok=True)
    (path / "rubric.yaml").write_text(yaml.safe_dump(SYNTH_RUBRIC, sort_keys=False))
    llm, label_rows, convs = [], [], []
    for week in weeks:
        low, high = (quality or {}).get(week, (0.0, 1.0))
        for i in range(per_week):
            cid = f"w{week:02d}-{i:03d}"
            started = START + dt.timedelta(weeks=week, hours=int(rng.integers(0, 24 * 7)))
            convs.append(
                {
                    "conversation_id": cid,
                    "chatbot_role": ROLES[i % 2],
                    "started_at": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "turns": [{"user": "hi", "assistant": "hello"}, {"user": "and?", "assistant": "done"}],
                }
            )
            for t in range(2):
                q_latent = rng.uniform(low, high)
                for q in SYNTH_RUBRIC["questions"]:
                    values = np.array([o["value"] for o in q["options"]], float)
                    centre = 1 + q_latent * (len(values) - 1) + rng.normal(0, 0.6)
                    p = np.exp(-2.0 * (values - centre) ** 2)
                    p /= p.sum()
                    llm += [(cid, t, q["id"], int(v), float(x)) for v, x in zip(values, p, strict=True)]
                    if labels and i < 6:
                        answer = int(np.clip(np.rint(centre), 1, len(values)))
                        label_rows.append((cid, t, "j1", q["id"], answer))
    pd.DataFrame(llm, columns=["conversation_id", "turn", "question_id", "option", "prob"]).to_csv(
        path / "llm.csv", index=False
    )
    if label_rows:
        pd.DataFrame(label_rows, columns=["conversation_id", "turn", "judge_id", "question_id", "answer"]).to_csv(
            path / "labels.csv", index=False
        )
    (path / "conversations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in convs))
    return path


def monitor(data, model, out, *extra) -> int:
    data = data if isinstance(data, str) else str(data)
    return main(["monitor", f"data={data}", f"model={model}", f"out={out}", "until=2027-01-01", *extra])


def records(out: Path, name: str = "windows.jsonl") -> list[dict]:
    path = out / name
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_windows_by_time_then_only_new_ones(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0, 1, 2])
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out) == 0
    first = records(out)
    assert [w["window"] for w in first] == ["2026-01-05T00:00Z", "2026-01-12T00:00Z", "2026-01-19T00:00Z"]
    row = first[0]["rows"]
    assert len(row) == 3 and "all" in row
    assert row["all"]["conversations"] == 24 and row["all"]["turns"] == 48
    low, high = row["all"]["band"]
    assert 0 <= low < row["all"]["rate"] < high <= 1
    role = next(k for k in row if k != "all")
    assert row[role]["shift"]["p_value"] is not None and row[role]["conversations"] == 12
    shown = capsys.readouterr()
    assert f"wrote {out / 'windows.jsonl'}" in shown.out + shown.err
    assert monitor(data, tiny_model, out) == 0  # the same data again: nothing new
    assert len(records(out)) == 3
    write_stream(tmp_path / "stream", [0, 1, 2, 3])  # the export grew by a week
    assert monitor(data, tiny_model, out) == 0
    assert [w["window"] for w in records(out)][-1] == "2026-01-26T00:00Z" and len(records(out)) == 4
    table = pd.read_csv(out / "windows.csv")
    assert len(table) == 4 * 3 and set(table.columns) >= {"window", "role", "rate", "low", "high", "shift_p"}


def test_windows_by_directory_and_labels(tiny_model, tmp_path):
    weeks = [write_stream(tmp_path / f"week-{k}", [k], labels=k == 1, seed=k + 10) for k in range(3)]
    out = tmp_path / "mon"
    assert monitor(f"[{weeks[0]},{weeks[1]}]", tiny_model, out, "window=directory") == 0
    assert [w["window"] for w in records(out)] == ["week-0", "week-1"]
    reviewers = records(out)[1]["rows"]["all"]["reviewers"]
    assert reviewers["n_labelled_conversations"] == 6
    assert reviewers["ppi"]["low"] <= reviewers["ppi"]["estimate"] <= reviewers["ppi"]["high"]
    audit = reviewers["transport_audit"]
    assert audit["verdict"] == "INCONCLUSIVE" and audit["n_labelled_conversations"] == 6  # PASS needs 20
    assert monitor(f"[{weeks[0]},{weeks[1]},{weeks[2]}]", tiny_model, out, "window=directory") == 0
    assert [w["window"] for w in records(out)] == ["week-0", "week-1", "week-2"]


def test_a_drop_raises_an_alarm_with_what_to_do(tiny_model, tmp_path, capsys):
    bad = {4: (0.0, 0.3), 5: (0.0, 0.3), 6: (0.0, 0.3)}  # the evidence of each bad week carries into the next
    data = write_stream(tmp_path / "stream", list(range(7)), per_week=40, quality=bad)
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out, "drop=0.05", "reference=2", "shift=false", "questions=false") == 1
    err = capsys.readouterr().err
    assert "alarm" in err and "label about" in err and "e-value" in err
    alarms = records(out, "alarms.jsonl")
    assert alarms and {a["window"] for a in alarms} <= {"2026-02-02T00:00Z", "2026-02-09T00:00Z", "2026-02-16T00:00Z"}
    assert all(a["check"] == "drop" and a["e_value"] >= 1 / a["level"] and 2 <= a["label"] <= a["of"] for a in alarms)
    weeks = records(out)
    before = [c for w in weeks[:4] for r in w["rows"].values() for c in r["checks"]]
    assert before and all(c["e_value"] < 1 / c["level"] for c in before)  # the good weeks gave no evidence
    assert monitor(data, tiny_model, out, "drop=0.05", "reference=2", "shift=false", "questions=false") == 0


def test_in_distribution_raises_no_alarm(tiny_model, tmp_path):
    data = write_stream(tmp_path / "stream", list(range(6)), per_week=30)
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out, "drop=0.0", "fail_under=0.2", "reference=2") == 0
    assert records(out, "alarms.jsonl") == []
    checks = [c for w in records(out) for r in w["rows"].values() for c in r["checks"]]
    questions = {c["question"] for c in checks if c["check"] == "drop"}
    assert questions == {"overall", "scope", "tone"}  # every rubric question is watched, not only the target
    # one e-process per (question, check, row): its level is fixed, and all of them share less than alpha
    levels = {(c["question"], c["check"], c.get("threshold") is None): c["level"] for c in checks if "e_value" in c}
    assert levels and sum(levels.values()) < 0.05


def _line(path: Path, number: int, **change) -> None:
    lines = path.read_text().splitlines()
    record = json.loads(lines[number - 1])
    for k, v in change.items():
        if v is None:
            record.pop(k)
        else:
            record[k] = v
    lines[number - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"started_at": None}, r"row 3: conversation 'w00-002' has no started_at"),
        ({"started_at": "last tuesday"}, r"row 3: conversation 'w00-002'.s started_at 'last tuesday' is not an ISO"),
    ],
)
def test_started_at_missing_or_unparsable_names_the_line(tiny_model, tmp_path, capsys, change, expected):
    data = write_stream(tmp_path / "stream", [0])
    _line(data / "conversations.jsonl", 3, **change)
    assert monitor(data, tiny_model, tmp_path / "mon") == 2
    err = capsys.readouterr().err
    assert "conversations.jsonl" in err
    import re

    assert re.search(expected, err), err
    assert not (tmp_path / "mon" / "windows.jsonl").exists()


def test_an_empty_window_and_a_small_one_say_so_and_do_not_alarm(tiny_model, tmp_path):
    data = write_stream(tmp_path / "stream", [0, 2], per_week=12)  # week 1 has no conversation; 6 per role
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out, "fail_under=0.01", "origin=2026-01-05T00:00Z") == 0
    windows = records(out)
    assert [w["conversations"] for w in windows] == [12, 0, 12]
    assert "no conversation" in windows[1]["note"] and windows[1]["rows"] == {}
    role = next(k for k in windows[0]["rows"] if k != "all")
    shift = windows[0]["rows"][role]["shift"]
    assert shift["p_value"] is None and "needs 10" in shift["note"]


def test_state_from_another_model_is_refused(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0])
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out) == 0
    state = json.loads((out / "state.json").read_text())
    state["model"]["checksum"] = "0" * 64
    (out / "state.json").write_text(json.dumps(state))
    assert monitor(data, tiny_model, out) == 2
    assert "monitors another model" in capsys.readouterr().err


def test_changed_settings_are_refused(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0])
    out = tmp_path / "mon"
    assert monitor(data, tiny_model, out) == 0
    assert monitor(data, tiny_model, out, "window=1d") == 2
    assert "window='7d' (now '1d')" in capsys.readouterr().err


def test_the_clock_going_backwards_is_refused(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0, 1, 2])
    out = tmp_path / "mon"
    assert main(["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", "until=2026-02-01"]) == 0
    assert main(["monitor", f"data={data}", f"model={tiny_model}", f"out={out}", "until=2026-01-20"]) == 2
    assert "clock went backwards" in capsys.readouterr().err
    # late conversations: a new one started in a window already monitored
    more = write_stream(tmp_path / "late", [1], per_week=1, seed=5)
    assert main(["monitor", f"data={more}", f"model={tiny_model}", f"out={out}", "until=2026-02-02"]) == 2
    assert "window 2026-01-12T00:00Z" in capsys.readouterr().err


def _records(weeks: int, roles: int) -> tuple[list[dict], list[dict]]:
    """windows.jsonl and alarms.jsonl as the command writes them, for a page of `weeks` windows and `roles` roles."""
    rng = np.random.default_rng(0)
    windows, alarms = [], []
    for k in range(weeks):
        wid = (START + dt.timedelta(weeks=k)).strftime("%Y-%m-%dT%H:%MZ")
        rows = {}
        for name in ["all", *(f"role_{r}" for r in range(roles))]:
            rate = 0.75 - (0.08 if k >= 40 else 0) + rng.normal(0, 0.01)
            fired = k >= 40 and name == "role_0"
            rows[name] = {
                "rate": rate,
                "band": [rate - 0.03, rate + 0.03],
                "reviewers": {"ppi": {"estimate": rate, "low": rate - 0.1, "high": rate + 0.1}}
                if k % 13 == 5
                else None,
                "checks": [{"check": "shift", "fired": k == 41}, {"check": "drop", "fired": fired}],
            }
            if fired:
                alarms.append(
                    {
                        "window": wid,
                        "role": name,
                        "check": "drop",
                        "p_value": 1e-6,
                        "level": 1e-4,
                        "label": 30,
                        "of": 200,
                    }
                )
        windows.append({"window": wid, "rows": rows})
    return windows, alarms


def test_the_page_shows_52_windows_and_6_roles_at_1440x900(tmp_path):
    """The page in headless Chromium at 1440x900: no sideways scrolling, the figure at (near) its own size so its
    text stays legible, one panel per row."""
    import asyncio

    from calibration.monitor.page import prepare_monitor, write_page
    from tests.labelling.cdp import CHROMIUM, chromium_page

    windows, alarms = _records(52, 6)
    reference = {"all": {"A": 750.0, "m": 1000.0}}
    prepared = prepare_monitor(windows, alarms, reference)
    assert list(prepared["rows"])[0] == "all" and len(prepared["rows"]) == 7
    assert prepared["rows"]["role_0"]["alarm"].sum() == 12 and prepared["rows"]["all"]["reference"] == 0.75
    page = write_page(tmp_path, windows, alarms, reference)
    assert (tmp_path / "monitor.png").stat().st_size > 10_000 and "data:image/png;base64," in page.read_text()
    if CHROMIUM is None:
        pytest.skip("no Chromium here")

    async def layout() -> dict:
        async with chromium_page(tmp_path / "chromium", width=1440, height=900) as browser:
            await browser.goto(page.as_uri())
            await browser.wait_for("document.images.length && document.images[0].complete")
            await browser.screenshot(tmp_path / "monitor_1440x900.png")
            return await browser.js(
                "({scroll: document.documentElement.scrollWidth, shown: document.images[0].width,"
                " natural: document.images[0].naturalWidth, rows: document.querySelectorAll('tr').length})"
            )

    got = asyncio.run(layout())
    assert got["scroll"] <= 1440, got
    assert got["shown"] >= 0.6 * got["natural"] and got["shown"] >= 1000, got
    assert got["rows"] == 1 + 12, got  # the alarms table: a header and one row per alarm


def test_a_judged_conversation_missing_from_conversations_jsonl_is_named(tiny_model, tmp_path, capsys):
    data = write_stream(tmp_path / "stream", [0])
    lines = (data / "conversations.jsonl").read_text().splitlines()
    (data / "conversations.jsonl").write_text("\n".join(lines[1:]) + "\n")  # w00-000 judged, not listed
    assert monitor(data, tiny_model, tmp_path / "mon") == 2
    err = capsys.readouterr().err
    assert "1 conversation(s) of llm.csv are not in conversations.jsonl ('w00-000')" in err


def test_a_window_directory_without_conversations_is_one_line(tiny_model, tmp_path, capsys):
    weeks = [write_stream(tmp_path / f"week-{k}", [k], seed=k) for k in range(2)]
    (weeks[1] / "conversations.jsonl").write_text("\n")
    assert monitor(f"[{weeks[0]},{weeks[1]}]", tiny_model, tmp_path / "mon", "window=directory") == 2
    err = capsys.readouterr().err
    assert "week-1/conversations.jsonl" in err and "no conversations" in err
    assert not (tmp_path / "mon" / "windows.jsonl").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["model=MISSING"], "no model.json here"),
        (["data=MISSING"], "dataset directory not found"),
        (["window=3x"], "window='3x' is not a length"),
    ],
)
def test_a_missing_model_or_data_or_a_bad_window_is_one_line(tiny_model, tmp_path, capsys, args, expected):
    data = write_stream(tmp_path / "stream", [0], per_week=4)
    given = {"data": str(data), "model": str(tiny_model), "out": str(tmp_path / "mon")}
    given |= {k: (str(tmp_path / "nowhere") if v == "MISSING" else v) for k, v in (a.split("=", 1) for a in args)}
    assert main(["monitor", *(f"{k}={v}" for k, v in given.items())]) == 2
    err = capsys.readouterr().err
    assert expected in err and "internal error" not in err
