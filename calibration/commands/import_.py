"""`role-rubric import`: labels from Label Studio or a filled sheet, or LLM-Rubric files -> a native dataset dir.

    role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR     (or url= and project=)
    role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
    role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR

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


def run(cfg: Any) -> dict[str, int]:
    """CLI: `role-rubric import source=llm-rubric|label-studio|sheet ... out=DIR`: the counts. Imports inside,
    so that `role-rubric --help` loads no stage."""
    from calibration.labelling.answers import copied_names, write_labelled_dataset
    from rubric.schema import load_rubric

    source = str(cfg.source)
    if source == "llm-rubric":
        _need(cfg, source, "evaluations", "judgments")
        return _llm_rubric(cfg)
    _need(cfg, source, "data")
    data = Path(cfg.data)
    rubric = load_rubric(data / "rubric.yaml")
    if source == "sheet":
        _need(cfg, source, "sheet")
        labels, counts = _sheet_labels(cfg, data, rubric)
    else:
        labels, counts = _label_studio_labels(cfg, data, rubric)
    counts.update(write_labelled_dataset(data, cfg.out, labels))
    log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    copied = ", ".join(n for n in copied_names(data)) or "nothing"
    log.info(
        f"import: wrote {Path(cfg.out) / 'labels.csv'} ({counts['labels_written']} rows: {counts['labels']} imported,"
        f" {counts['earlier_labels_kept']} earlier kept) and copied {copied} from {data}"
    )
    return counts


def _llm_rubric(cfg: Any) -> dict[str, int]:
    """source=llm-rubric: LLM-Rubric's evaluations and judgments TSVs -> a native dataset folder."""
    from calibration.data.importers import import_llm_rubric

    counts = import_llm_rubric(cfg.evaluations, cfg.judgments, cfg.out)
    log.info("import: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
    log.info(
        f"import: wrote {Path(cfg.out) / 'rubric.yaml'}, llm.csv, labels.csv, gather_summary.json (the judge: "
        "LLM-Rubric's evaluations)"
    )
    return counts


def _sheet_labels(cfg: Any, data: Path, rubric: Any) -> tuple[Any, dict[str, int]]:
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


def _label_studio_labels(cfg: Any, data: Path, rubric: Any) -> tuple[Any, dict[str, int]]:
    """source=label-studio: the labels of an export file (export=), or of the project pulled from the
    server (url= and project=), whose export is saved as OUT/label-studio-export.json once every answer
    is checked."""
    import json

    from calibration.labelling.export_shape import check_export
    from calibration.labelling.items import dataset_conversations
    from calibration.labelling.label_studio import label_studio_labels, read_export, read_judge_map
    from calibration.labelling.label_studio_api import LabelStudio, api_token
    from calibration.labelling.label_studio_export import with_emails
    from rubric.errors import InputError
    from rubric.files import atomic_write_text, ensure_out_dir

    conversations = dataset_conversations(data)
    judge_map = read_judge_map(cfg.judge_map) if cfg.get("judge_map") else None
    users = None
    if cfg.get("export"):
        if cfg.get("url"):
            raise InputError(
                "both export= and url= given.", fix="pass export=FILE.json, or url= and project=, not both."
            )
        path, tasks = Path(cfg.export), read_export(cfg.export)
    else:
        if not cfg.get("url") or cfg.get("project") is None:
            raise InputError(
                "source=label-studio needs export=FILE.json, or url= and project=.",
                fix=f"pass export= a JSON export of the project, or url=URL project=ID (token in ${cfg.token_env}).",
            )
        client = LabelStudio(str(cfg.url), api_token(cfg.token_env), timeout=float(cfg.timeout))
        where = f"project {cfg.project} at {str(cfg.url).rstrip('/')}"
        tasks, users = check_export(client.export(int(cfg.project)), where), client.users()
        found = label_studio_labels(tasks, rubric, conversations, path=where, users=users, judge_map=judge_map)
        path = ensure_out_dir(cfg.out) / EXPORT_NAME  # only once every answer is checked: nothing half-written
        atomic_write_text(path, json.dumps(with_emails(tasks, users), ensure_ascii=False, indent=1))
        log.info(f"import: wrote {path} (project {cfg.project} as exported, annotators named by email)")
        return found
    return label_studio_labels(tasks, rubric, conversations, path=path, users=users, judge_map=judge_map)


def _need(cfg: Any, source: str, *keys: str) -> None:
    """Each of `keys` given, else one line naming the key the source needs."""
    from rubric.errors import InputError

    for key in keys:
        if cfg.get(key) in (None, "", "???"):
            other = " (labels from reviewers: source=label-studio or source=sheet)" if source == "llm-rubric" else ""
            raise InputError(
                f"source={source} needs {key}=.", fix=f"pass {key}=PATH{other}; see `role-rubric import --help`."
            )
