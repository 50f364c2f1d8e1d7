"""`role-rubric import` (`role-rubric label-studio` is calibration/commands/label_studio.py).

role-rubric import source=label-studio data=DIR export=EXPORT.json out=DIR     (or url= and project=)
role-rubric import source=sheet data=DIR sheet=FILLED.csv out=DIR
role-rubric import source=llm-rubric evaluations=TSV judgments=TSV out=DIR
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from calibration.labelling.answers import copied_names, write_labelled_dataset
from calibration.labelling.export_shape import check_export
from calibration.labelling.items import dataset_conversations
from calibration.labelling.label_studio import (
    label_studio_labels,
    read_export,
    read_judge_map,
)
from calibration.labelling.label_studio_api import LabelStudio, api_token
from calibration.labelling.sheet import sheet_labels
from rubric.errors import InputError
from rubric.files import atomic_write_text, ensure_out_dir
from rubric.schema import load_rubric

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

EXPORT_NAME = "label-studio-export.json"


def run_import(cfg) -> dict[str, int]:
    """CLI: `role-rubric import source=llm-rubric|label-studio|sheet ... out=DIR`."""
    source = str(cfg.source)
    if source == "llm-rubric":
        from calibration.data.importers import run_llm_rubric_import

        _need(cfg, source, "evaluations", "judgments")
        return run_llm_rubric_import(cfg)
    _need(cfg, source, "data")
    data = Path(cfg.data)
    rubric = load_rubric(data / "rubric.yaml")
    if source == "sheet":
        _need(cfg, source, "sheet")
        conversations = dataset_conversations(data) if (data / "conversations.jsonl").exists() else None
        items = _llm_items(data, required=conversations is None)
        whole = items is not None and any(turn == "" for _, turn in items)  # labels per conversation, not per turn
        labels, counts = sheet_labels(
            cfg.sheet,
            rubric,
            conversations=conversations,
            known=None if conversations is not None else items,
            whole_conversations=whole,
        )
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


def _label_studio_labels(cfg, data: Path, rubric):
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
        atomic_write_text(path, json.dumps(_with_emails(tasks, users), ensure_ascii=False, indent=1))
        log.info(f"import: wrote {path} (project {cfg.project} as exported, annotators named by email)")
        return found
    return label_studio_labels(tasks, rubric, conversations, path=path, users=users, judge_map=judge_map)


def _with_emails(tasks: list[dict], users: dict[int, str]) -> list[dict]:
    """The export with each completed_by id as {id, email}, as Label Studio writes it when asked to, so the
    saved file imports again on its own."""
    for task in tasks:
        for ann in task.get("annotations") or []:
            uid = ann.get("completed_by")
            if isinstance(uid, int) and uid in users:
                ann["completed_by"] = {"id": uid, "email": users[uid]}
    return tasks


def _llm_items(data: Path, *, required: bool = True) -> set[tuple[str, str]] | None:
    """Items of the dataset's llm.csv (a sheet's turns are checked against them when there is no
    conversations.jsonl; their turns say whether labels are per turn); None when there is none to read."""
    from calibration.data.reading import LLM_COLUMNS, as_text_ids, find_table, read_table

    path = find_table(data, "llm", required=False)
    if path is None and not required:
        return None
    if path is None:
        raise InputError(
            "the dataset folder has neither conversations.jsonl nor llm.csv to check the sheet's turns against.",
            path=data,
            fix="pass data= the dataset the sheet was made from.",
        )
    frame = as_text_ids(read_table(path, LLM_COLUMNS))
    return set(zip(frame["conversation_id"], frame["turn"], strict=True))


def _need(cfg, source: str, *keys: str) -> None:
    for key in keys:
        if cfg.get(key) in (None, "", "???"):
            other = " (labels from reviewers: source=label-studio or source=sheet)" if source == "llm-rubric" else ""
            raise InputError(
                f"source={source} needs {key}=.", fix=f"pass {key}=PATH{other}; see `role-rubric import --help`."
            )
