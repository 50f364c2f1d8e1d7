"""What the label sources of `import` share (source=label-studio, source=sheet): reviewers' labels, checked
against data=DIR's rubric and conversations, written as a labelled copy of that folder in out=, with the sampling
plan the labelled conversations were drawn with.

out=DIR gets the sampling plan too (sample_plan.csv from `suggest purpose=estimate`, beside the sheet or the
export (`label-studio select=` records it there), or in data=, or plan=), checked against the labels, so that
`estimate data=OUT` weights them as they were drawn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def import_labels(
    data: Path,
    out: Path,
    read: Callable[[Any], tuple[Any, dict[str, int]]],
    *,
    plan: str | None,
    beside: dict[str, Path],
    before_writing: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Labels `read(rubric)` gives, with the plan to carry (plan=, else beside the files of `beside`, key -> file,
    else in data=), checked, then the labelled folder written to out=; the counts. `before_writing`: called once
    every check has passed (the pulled export saved)."""
    from calibration.labelling.answers import copied_names, write_labelled_dataset
    from calibration.release.plan import PLAN_FILE
    from rubric.schema import load_rubric

    labels, counts = read(load_rubric(data / "rubric.yaml"))
    carried = _plan_to_carry(plan, beside, data, out, labels)  # checked before anything is written
    if before_writing is not None:
        before_writing()
    counts.update(write_labelled_dataset(data, out, labels, also={PLAN_FILE: carried} if carried else None))
    log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    copied = ", ".join(n for n in copied_names(data)) or "nothing"
    log.info(
        f"import: wrote {Path(out) / 'labels.csv'} ({counts['labels_written']} rows: {counts['labels']} imported,"
        f" {counts['earlier_labels_kept']} earlier kept) and copied {copied} from {data}"
        + (f", and the sampling plan {carried} as {Path(out) / PLAN_FILE}" if carried is not None else "")
    )
    return counts


def _plan_to_carry(given: str | None, files: dict[str, Path], data: Path, out: Path, labels: Any) -> Path | None:
    """The sampling plan to copy into out= (None: none), checked before anything is written: `estimate
    data=OUT` weights each labelled conversation by it, so a plan the imported labels were not drawn with must
    fail here, where the fix is easy. plan= names it; by default it is the sample_plan.csv that `suggest`
    wrote beside the sheet (or `label-studio select=` beside its tasks, where the export is saved), else
    data='s own; plan=none carries none."""
    from calibration.labelling.items import dataset_conversations, llm_items
    from calibration.release.plan import PLAN_FILE, check_plan_for, refuse_another_plan

    if given is not None and given.strip().lower() == "none":
        return None
    beside = {key: Path(value).parent / PLAN_FILE for key, value in files.items()}
    found = [*beside.values(), data / PLAN_FILE]
    path = Path(given) if given else next((p for p in found if p.is_file()), None)
    if path is None:
        return None
    items = llm_items(data, required=False)
    release = {str(c) for c, _ in items} if items is not None else set(dataset_conversations(data))
    key = next((k for k, p in beside.items() if p == path), None)
    check_plan_for(
        path,
        data,
        release,
        set(labels["conversation_id"].astype(str)),
        found=None if given else (f"beside {key}=" if key else "in data="),
        fix="Or pass plan=none to import without it (estimate then takes the sample as uniform).",
    )
    refuse_another_plan(
        out, path, fix="import into a new out= folder, or pass plan= the plan out= holds (or plan=none)."
    )
    _warn_earlier_labels_outside(data, path)
    return path


def _warn_earlier_labels_outside(data: Path, plan: Path) -> None:
    """data='s own labels of conversations the plan did not sample (labels for training, say) stay in the
    labelled folder, where `estimate` will refuse the plan for them: said now, not at estimate time."""
    from calibration.labelling.answers import existing_labels
    from calibration.release.checks import read_plan_table, sampled_ids
    from rubric.notices import warn_data

    earlier = existing_labels(data)
    if earlier is None:
        return
    frame = read_plan_table(plan)
    frame["conversation_id"] = frame["conversation_id"].str.strip()
    outside = sorted(set(earlier["conversation_id"]) - sampled_ids(frame))
    if outside:
        warn_data(
            "import",
            [
                f"{len(outside)} conversations labelled in {data} before (e.g. {outside[0]!r}) are not ones the "
                f"plan {plan} sampled: `estimate` on the labelled folder refuses the plan for them. Estimate "
                "from a folder that holds only the plan's labels (import from the unlabelled release), or pass "
                "plan=none here."
            ],
        )
