"""`estimate sequential=true`: a release labelled in batches, `estimate` re-run after each until the gate
decides. A fixed-n interval looked at after every batch is no longer a 90% interval (peeking: the chance
that one of the looks misses the truth grows with the looks; benchmarks/estimate.py measures it). The
adherence rate's interval is then a confidence sequence (calibration/release/intervals.py), valid at
every look at once, intersected with the earlier looks' (still valid: they all hold together), and every
look is recorded in OUT/looks.jsonl so that the next run knows the looks before it. The gate (fail_under)
reads it. The file belongs to one release and one model: a looks file of another is refused.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calibration.release.inference import Interval
from calibration.release.intervals import confidence_sequence
from rubric.errors import InputError
from rubric.files import file_sha256

__all__ = ["LOOKS_FILE", "T_STAR", "sequential_difference", "sequential_rate"]

LOOKS_FILE = "looks.jsonl"
QUANTITY = "adherence rate"
"""What the sequence is of (recorded, so that a sequence of another quantity is never continued)."""
T_STAR = 40
"""The confidence sequence is narrowest at this many labelled conversations (its r is fixed in advance, so
that every look uses the same sequence): batches of 5-10 up to 80 conversations."""


def _sha(path: Path) -> str:
    return file_sha256(path)[:16] if path.exists() else ""


def _turns_file(release: Path) -> Path:
    return next((p for p in (release / "llm.csv", release / "llm.parquet") if p.exists()), release / "llm.csv")


def identity(release: Path, model: Path | None, baseline: Path | None = None) -> dict:
    """What a looks file belongs to: the release's turns (llm.csv), the model (model.json) and the baseline's
    turns and labels (its labels are fixed across looks: the sequential difference relies on it)."""
    release = Path(release)
    ident = {
        "release": str(release),
        "release_sha256": _sha(_turns_file(release)),
        "model_sha256": _sha(Path(model) / "model.json") if model is not None else "",
    }
    if baseline is not None:
        baseline = Path(baseline)
        labels = next(
            (p for p in (baseline / "labels.csv", baseline / "labels.parquet") if p.exists()), baseline / "labels.csv"
        )
        ident["baseline_sha256"] = _sha(_turns_file(baseline)) + _sha(labels)
    return ident


class Look(BaseModel):
    """One line of looks.jsonl, as `record` writes it: read back through this record, so that a line edited or
    cut short is refused by name (with its line) instead of failing somewhere inside the interval."""

    model_config = ConfigDict(extra="allow", frozen=True)

    look: int = Field(ge=1)
    n_labelled_conversations: int = Field(ge=1)
    estimate: float
    cs_low: float = Field(ge=0, le=1)
    cs_high: float = Field(ge=0, le=1)
    t_star: int
    alpha: float = Field(gt=0, lt=1)
    quantity: str
    release_sha256: str
    model_sha256: str
    baseline_sha256: str | None = None
    diff_low: float | None = None
    diff_high: float | None = None


_IDENTITY = (
    ("release_sha256", "release (its llm.csv)"),
    ("model_sha256", "model (its model.json)"),
    ("baseline_sha256", "baseline (its llm.csv and labels.csv)"),
    ("t_star", "sequence (t_star)"),
    ("alpha", "level (alpha)"),
    ("quantity", "quantity"),
)
"""What every look of one sequence shares: a look at another alpha would narrow the sequence unseen."""


def read_looks(path: Path, ident: dict, *, alpha: float) -> list[dict]:
    """The earlier looks, each checked (see `Look`) and checked to be of this sequence: this release, model,
    baseline, t_star, alpha and quantity. No looks file beside an estimate.json of a later look is refused:
    the sequence would silently restart at look 1, the repeated-looks problem the sequence exists to prevent."""
    if not path.exists():
        _refuse_a_lost_sequence(path)
        return []
    mine = ident | {"t_star": T_STAR, "alpha": alpha, "quantity": QUANTITY}
    looks: list[dict] = []
    for row, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        look = _parse_look(path, row, line)
        for key, what in _IDENTITY:
            if look.get(key) != mine.get(key):
                raise InputError(
                    f"the looks recorded here are of another {what}: {look.get(key)!r}, this run {mine.get(key)!r}.",
                    path=path,
                    row=row,
                    fix="pass the out= of this release's own sequence (with its settings), or a new out= to start one.",
                )
        if look["look"] != len(looks) + 1:
            raise InputError(
                f"look {look['look']} where look {len(looks) + 1} was expected (a line lost or repeated).",
                path=path,
                row=row,
                fix="restore the file estimate wrote, or use a new out= for a new sequence.",
            )
        looks.append(look)
    return looks


def _parse_look(path: Path, row: int, line: str) -> dict:
    fix = "restore the file estimate wrote, or use a new out= for a new sequence."
    try:
        raw = json.loads(line)
    except json.JSONDecodeError:
        raise InputError("a line that is not JSON.", path=path, row=row, fix=fix) from None
    if not isinstance(raw, dict):
        raise InputError(f"a line that is not a look ({type(raw).__name__}).", path=path, row=row, fix=fix)
    if "alpha" not in raw and "cs_low" in raw:
        raise InputError(
            "a look without its alpha: written by a version that did not record the level, so a look at "
            "another alpha cannot be told from it.",
            path=path,
            row=row,
            fix="start a new sequence in a new out= (this release's earlier looks stay valid on their own).",
        )
    try:
        look = Look.model_validate(raw | {"quantity": raw.get("quantity", QUANTITY)})
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "the line"
        raise InputError(f"a look whose {key} is wrong ({first['msg']}).", path=path, row=row, fix=fix) from None
    return look.model_dump(exclude_none=True)


def _refuse_a_lost_sequence(path: Path) -> None:
    summary = path.parent / "estimate.json"
    try:
        earlier = json.loads(summary.read_text()).get("sequential") if summary.is_file() else None
    except (OSError, ValueError, AttributeError):
        return  # not an estimate.json this check can read; estimate overwrites it
    if isinstance(earlier, dict) and isinstance(earlier.get("look"), int) and earlier["look"] >= 1:
        raise InputError(
            f"no {LOOKS_FILE} beside an estimate.json of look {earlier['look']}: this look would restart the "
            "sequence at look 1 and lose the earlier looks' guarantee.",
            path=path,
            fix=f"restore {LOOKS_FILE}, or start a new sequence in a new out= (or delete {summary} to restart here).",
        )


def sequential_rate(out: Path, ident: dict, rate: dict, *, alpha: float) -> dict:
    """This look's confidence sequence for the rate's ppi estimate, intersected with the earlier looks'
    (read from OUT/looks.jsonl and checked; nothing is written here: `record` does, after the estimate)."""
    looks = read_looks(Path(out) / LOOKS_FILE, ident, alpha=alpha)
    n = rate["n_labelled_conversations"]
    ppi = rate["ppi"]
    low, high = confidence_sequence(
        ppi["estimate"], rate["_se_process"], n, alpha=alpha, t_star=T_STAR, bounds=(0.0, 1.0)
    )
    low, high = float(low), float(high)
    for look in looks:
        low, high = max(low, look["cs_low"]), min(high, look["cs_high"])
    if low > high:  # the looks disagree (the labels changed between looks): the latest stands alone
        low, high = float(min(low, high)), float(max(low, high))
    return {
        "look": len(looks) + 1,
        "alpha": alpha,
        "n_labelled_conversations": n,
        "estimate": ppi["estimate"],
        "low": low,
        "high": high,
        "this_look": [
            float(x)
            for x in confidence_sequence(
                ppi["estimate"], rate["_se_process"], n, alpha=alpha, t_star=T_STAR, bounds=(0.0, 1.0)
            )
        ],
        "t_star": T_STAR,
        "note": f"a {1 - alpha:.0%} confidence sequence (Waudby-Smith et al. 2024), valid at every look: look "
        f"{len(looks) + 1}, intersected with the earlier ones ({LOOKS_FILE}).",
    }


def sequential_difference(
    out: Path, ident: dict, process: Interval, n: int, baseline: Interval, *, alpha: float
) -> dict:
    """The rate difference from the baseline, valid at every look (see the module docstring): process is the
    release's ppi estimate at the process level, baseline the baseline's ppi interval at level 1 - alpha/2
    (process level too); intersected with the earlier looks' differences."""
    looks = read_looks(Path(out) / LOOKS_FILE, ident, alpha=alpha)
    low, high = confidence_sequence(process.estimate, process.se, n, alpha=alpha / 2, t_star=T_STAR, bounds=(0.0, 1.0))
    this = [float(low) - baseline.high, float(high) - baseline.low]
    low, high = this
    for look in looks:
        if "diff_low" in look:
            low, high = max(low, look["diff_low"]), min(high, look["diff_high"])
    if low > high:
        low, high = this
    return {
        "estimate": process.estimate - baseline.estimate,
        "low": low,
        "high": high,
        "this_look": this,
        "method": f"the release's confidence sequence at {alpha / 2:g} and the baseline's interval at "
        f"{alpha / 2:g} (union bound), valid at every look",
    }


def record(out: Path, ident: dict, seq: dict) -> None:
    line = ident | {
        "look": seq["look"],
        "n_labelled_conversations": seq["n_labelled_conversations"],
        "estimate": seq["estimate"],
        "cs_low": seq["this_look"][0],
        "cs_high": seq["this_look"][1],
        "t_star": T_STAR,
        "alpha": seq["alpha"],
        "quantity": QUANTITY,
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if "difference" in seq:
        line["diff_low"], line["diff_high"] = seq["difference"]["this_look"]
    if not all(math.isfinite(v) for v in (line["cs_low"], line["cs_high"])):
        return
    with open(Path(out) / LOOKS_FILE, "a") as fh:
        fh.write(json.dumps(line) + "\n")
