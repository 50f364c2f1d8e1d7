"""The schema of `monitor`: a chatbot in production, window by window, with alarms whose false-alarm rate
holds over the whole monitored horizon (calibration/monitor)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from calibration.schema.base import Command
from calibration.schema.keys import ADHERES_AT, ALLOW_JUDGE_MISMATCH, MODEL_DIR, optional, required
from rubric.config.settings import boolean, integer, number, paths, setting, text


@dataclass(frozen=True)
class Monitor(Command):
    """role-rubric monitor data=DIR model=MODEL window=7d out=DIR [fail_under=0.8] [drop=0.05]
    role-rubric monitor data=[WEEK1,WEEK2,...] model=MODEL window=directory out=DIR
    Per window of conversations (by conversations.jsonl's `started_at`, or one per data directory) and per
    chatbot role: the calibrated adherence rate with its sampling interval (conversations as the unit), the
    shift check's p-value against the model's training data, and, where the window has labels.csv rows, the
    prediction-powered interval of the reviewers' rate. Run it again with new data: only the new windows are
    computed (state in OUT/state.json; refused if the model or the settings changed). Alarms (a drop below
    fail_under=, a drop by more than drop= from the first reference= windows, the shift check firing) hold
    the chance of any false alarm over horizon= windows and all roles under alpha (alpha split over them, a
    union bound: docs/how-to/monitor.md); each new alarm is appended to OUT/alarms.jsonl with how many
    conversations of the window to label, and the command exits 1. Writes OUT/windows.jsonl, OUT/windows.csv,
    OUT/alarms.jsonl, OUT/state.json."""

    name = "monitor"
    summary = "calibrated adherence per role over time, with alarms that hold their false-alarm rate"
    data: Any = required(
        "a gathered dataset dir (llm.csv + rubric.yaml + conversations.jsonl with started_at; labels.csv "
        "optional), or several: data=[A,B] (window=directory: one window each, in this order)",
        paths(),
    )
    model: str = MODEL_DIR()
    out: str = required("the monitor's folder (its state: give the same one on every run)")
    window: str = setting(
        "7d",
        "the windows' length: Nh | Nd | Nw (by started_at, from origin), or directory: one window per data dir",
        text(),
    )
    origin: str | None = optional(
        "ISO 8601 start of the first window (default: midnight UTC of the earliest started_at on the first run)",
        text(optional=True),
    )
    until: str | None = optional(
        "ISO 8601: windows that end at or before this are complete and computed (default: now)", text(optional=True)
    )
    alpha: float = setting(
        0.05,
        "the chance of any false alarm over the whole horizon, all windows, roles and checks together",
        number(above=0, below=1),
    )
    horizon: int = setting(
        52, "windows the shift check's alpha is spread over (none after it); the rate checks hold for ever", integer(1)
    )
    reference: int = setting(
        8,
        "the first N windows: the reference period that drop= compares with (its precision bounds the smallest "
        "drop that can be caught: docs/how-to/monitor.md)",
        integer(1),
    )
    fail_under: float | None = optional(
        "alarm when a window's calibrated rate is significantly below this", number(0, 1, optional=True)
    )
    drop: float | None = optional(
        "alarm when a window's calibrated rate is significantly more than this below the reference's "
        "(0: any significant drop)",
        number(0, 1, optional=True),
    )
    shift: bool = setting(True, "alarm when the shift check fires for a role of a window", boolean())
    questions: bool = setting(
        True,
        "with drop=: run the drop check on every rubric question (scope, tone, prohibited content, next step), "
        "not only the target",
        boolean(),
    )
    width: float = setting(
        0.05,
        "an alarm's advice: label as many conversations of the window as a rate half-width of this needs",
        number(above=0, below=0.5),
    )
    canary: str | None = optional(
        "a gathered folder of fixed conversations (e.g. labelled training ones): kept on the first run; gather "
        "the same conversations into it again (after a judge change, or on a schedule) and the monitor tests "
        "whether the judge's answers moved (docs/how-to/monitor.md)",
        text(optional=True),
    )
    adheres_at: float | None = ADHERES_AT()
    allow_judge_mismatch: bool = ALLOW_JUDGE_MISMATCH("true: use a calibrator on another judge's distributions")
