"""`role-rubric import`: labels from Label Studio or a filled sheet, or LLM-Rubric files -> a native dataset dir;
conversations (and reviewers' labels) from a chatbot's traces -> a new one (calibration/commands/import_traces.py).

    role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR     (or url= and project=)
    role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
    role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR

out=DIR gets the sampling plan too (sample_plan.csv from `suggest purpose=estimate`, beside the sheet or the
export (`label-studio select=` records it there), or in data=, or plan=), checked against the labels, so that
`estimate data=OUT` weights them as they were drawn.

Its keys: calibration.schema.commands_data `Import` (`role-rubric import --help`); the library it calls:
calibration.labelling (the export and the sheet read into labels, the labelled dataset written) and
calibration.data.importers (LLM-Rubric's files).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_data import Import as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

EXPORT_NAME = "label-studio-export.json"
"""The export pulled with url= and project=, saved in the output folder."""


def run(cfg: Schema) -> dict[str, int]:
    """CLI: `role-rubric import source=llm-rubric|label-studio|sheet|otel|mlflow|phoenix ... out=DIR`: the counts. Imports inside,
    so that `role-rubric --help` loads no stage."""
    from calibration.labelling.answers import copied_names, write_labelled_dataset
    from calibration.release.plan import PLAN_FILE
    from rubric.schema import load_rubric

    source = cfg.source
    if source in ("otel", "mlflow", "phoenix"):  # a chatbot's traces: calibration/commands/import_traces.py
        from calibration.commands.import_traces import run as import_traces

        return import_traces(cfg)
    if source == "llm-rubric":  # each source's keys given: the schema's rules (calibration/schema/commands_data.py)
        return _llm_rubric(cfg)
    data = Path(cfg.data)
    rubric = load_rubric(data / "rubric.yaml")
    pulled = None  # the export pulled from a server (url=), saved once every check has passed
    if source == "sheet":
        labels, counts = _sheet_labels(cfg, data, rubric)
    else:
        labels, counts, pulled = _label_studio_labels(cfg, data, rubric)
    plan = _plan_to_carry(cfg, data, labels)  # checked before anything is written
    if pulled is not None:
        _save_export(cfg, pulled)
    counts.update(write_labelled_dataset(data, cfg.out, labels, also={PLAN_FILE: plan} if plan else None))
    log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    copied = ", ".join(n for n in copied_names(data)) or "nothing"
    log.info(
        f"import: wrote {Path(cfg.out) / 'labels.csv'} ({counts['labels_written']} rows: {counts['labels']} imported,"
        f" {counts['earlier_labels_kept']} earlier kept) and copied {copied} from {data}"
        + (f", and the sampling plan {plan} as {Path(cfg.out) / PLAN_FILE}" if plan is not None else "")
    )
    return counts


def _plan_to_carry(cfg: Schema, data: Path, labels: Any) -> Path | None:
    """The sampling plan to copy into out= (None: none), checked before anything is written: `estimate
    data=OUT` weights each labelled conversation by it, so a plan the imported labels were not drawn with must
    fail here, where the fix is easy. plan= names it; by default it is the sample_plan.csv that `suggest`
    wrote beside the sheet (or `label-studio select=` beside its tasks, where the export is saved), else
    data='s own; plan=none carries none."""
    from calibration.labelling.items import dataset_conversations, llm_items
    from calibration.release.plan import PLAN_FILE, check_plan_for, refuse_another_plan

    given = cfg.plan
    if given is not None and given.strip().lower() == "none":
        return None
    beside = {key: Path(value).parent / PLAN_FILE for key in ("sheet", "export") if (value := getattr(cfg, key))}
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
        cfg.out, path, fix="import into a new out= folder, or pass plan= the plan out= holds (or plan=none)."
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


def _llm_rubric(cfg: Schema) -> dict[str, int]:
    """source=llm-rubric: LLM-Rubric's evaluations and judgments TSVs -> a native dataset folder."""
    from calibration.data.importers import import_llm_rubric

    counts = import_llm_rubric(cfg.evaluations, cfg.judgments, cfg.out)
    log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    log.info(
        f"import: wrote {Path(cfg.out) / 'rubric.yaml'}, llm.csv, labels.csv, gather_summary.json (the judge: "
        "LLM-Rubric's evaluations)"
    )
    return counts


def _sheet_labels(cfg: Schema, data: Path, rubric: Any) -> tuple[Any, dict[str, int]]:
    """source=sheet: the filled sheet's labels, checked against the conversations (or, without them, the
    turns of llm.csv; labels per conversation where those turns are whole conversations)."""
    from calibration.labelling.items import dataset_conversations, llm_items
    from calibration.labelling.sheet import sheet_labels

    conversations = dataset_conversations(data) if (data / "conversations.jsonl").exists() else None
    items = llm_items(data, required=conversations is None)
    whole = items is not None and any(turn == "" for _, turn in items)  # labels per conversation, not per turn
    return sheet_labels(
        cfg.sheet,
        rubric,
        conversations=conversations,
        known=None if conversations is not None else items,
        whole_conversations=whole,
    )


def _label_studio_labels(cfg: Schema, data: Path, rubric: Any) -> tuple[Any, dict[str, int], str | None]:
    """source=label-studio: the labels of an export file (export=), or of the project pulled from the
    server (url= and project=), with that export's text (None for export=) for `_save_export`."""
    import json

    from calibration.labelling.export_shape import check_export
    from calibration.labelling.items import dataset_conversations
    from calibration.labelling.label_studio_api import LabelStudio, api_token
    from calibration.labelling.label_studio_export import label_studio_labels, read_export, read_judge_map, with_emails

    conversations = dataset_conversations(data)
    judge_map = read_judge_map(cfg.judge_map) if cfg.judge_map else None
    users = None
    if cfg.export:  # export= or url= with project=, not both: the schema's rules
        path, tasks = Path(cfg.export), read_export(cfg.export)
    else:
        client = LabelStudio(cfg.url, api_token(cfg.token_env), timeout=cfg.timeout)
        where = f"project {cfg.project} at {cfg.url.rstrip('/')}"
        tasks, users = check_export(client.export(cfg.project), where), client.users()
        labels, counts = label_studio_labels(tasks, rubric, conversations, path=where, users=users, judge_map=judge_map)
        return labels, counts, json.dumps(with_emails(tasks, users), ensure_ascii=False, indent=1)
    labels, counts = label_studio_labels(tasks, rubric, conversations, path=path, users=users, judge_map=judge_map)
    return labels, counts, None


def _save_export(cfg: Schema, text: str) -> None:
    """The export pulled from the server, saved as OUT/label-studio-export.json: only once every answer and
    the plan are checked, so bad input leaves nothing half-written."""
    from rubric.files import atomic_write_text, ensure_out_dir

    path = ensure_out_dir(cfg.out) / EXPORT_NAME
    atomic_write_text(path, text)
    log.info(f"import: wrote {path} (project {cfg.project} as exported, annotators named by email)")
