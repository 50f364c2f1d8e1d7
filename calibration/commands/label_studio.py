"""`role-rubric label-studio`: Label Studio tasks and labelling config from a dataset -> files or a project.

    role-rubric label-studio data=DIR out=DIR [select=SHEET.csv] [predictions=predictions.csv]
    role-rubric label-studio data=DIR url=http://localhost:8080 [project=ID]      (token: $LABEL_STUDIO_API_KEY)

Its keys: calibration.schema.commands_data `LabelStudio` (`role-rubric label-studio --help`); the library it
calls: calibration.labelling (items, label_studio: the tasks and config; label_studio_api: the server).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from calibration.schema.commands_data import LabelStudio as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> dict[str, int]:
    """CLI: `role-rubric label-studio data=DIR (out=DIR | url=URL [project=ID]) [select=FILE] [predictions=FILE]`:
    the counts. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.labelling.items import dataset_conversations, every_turn, read_selection
    from calibration.labelling.label_studio import label_config, make_tasks, read_predictions
    from calibration.labelling.label_studio_api import api_token
    from rubric.schema import load_rubric

    token = api_token(cfg.token_env) if cfg.url else ""  # before any work: the likeliest mistake
    data = Path(cfg.data)
    rubric = load_rubric(data / "rubric.yaml")
    conversations = dataset_conversations(data)
    items = read_selection(cfg.select, conversations) if cfg.select else every_turn(conversations)
    predictions = read_predictions(cfg.predictions, rubric) if cfg.predictions else None
    tasks = make_tasks(items, conversations, predictions)
    config = label_config(rubric)
    with_guess = sum("predictions" in t for t in tasks)
    counts = {"tasks": len(tasks), "tasks_with_pre_annotation": with_guess}
    log.info(
        f"label-studio: {len(tasks)} tasks (one per turn to label; {with_guess} with the calibrated prediction "
        f"as a pre-annotation), {len(rubric.ids)} questions each"
    )
    if cfg.out:
        _write_files(cfg.out, tasks, config)
    if cfg.url:
        counts.update(_push(cfg, token, tasks, config))
    return counts


def _write_files(out: Any, tasks: list[dict], config: str) -> None:
    """OUT/tasks.json and OUT/label_config.xml, to import into Label Studio by hand."""
    import json

    from rubric.files import atomic_write_text, ensure_out_dir

    out = ensure_out_dir(out)
    atomic_write_text(out / "tasks.json", json.dumps(tasks, ensure_ascii=False, indent=1))
    atomic_write_text(out / "label_config.xml", config)
    log.info(
        f"label-studio: wrote {out / 'label_config.xml'} (Settings -> Labeling Interface -> Code) "
        f"and {out / 'tasks.json'} (Import)"
    )


def _push(cfg: Schema, token: str, tasks: list[dict], config: str) -> dict[str, int]:
    """The tasks into a new project (no project=) or an existing one that asks the same questions, skipping
    the turns it holds already: the project and the counts."""
    from calibration.labelling.label_studio import check_same_questions
    from calibration.labelling.label_studio_api import LabelStudio

    client = LabelStudio(cfg.url, token, timeout=cfg.timeout)
    if cfg.project is None:
        project = client.create_project(cfg.title, config, annotations_per_task=cfg.annotations_per_task)
        fresh, already = tasks, 0
        made = "a new project"
    else:
        project = cfg.project
        check_same_questions(client.project(project).get("label_config", ""), config, project, cfg.url)
        there = {
            (str(t["data"].get("conversation_id")), str(t["data"].get("turn")))
            for t in client.tasks(project)
            if isinstance(t.get("data"), dict)
        }
        fresh = [t for t in tasks if (t["data"]["conversation_id"], str(t["data"]["turn"])) not in there]
        already, made = len(tasks) - len(fresh), "project"
    added = client.add_tasks(project, fresh) if fresh else 0
    log.info(
        f"label-studio: added {added} tasks to {made} {project} ({already} were already there): "
        f"{cfg.url.rstrip('/')}/projects/{project}"
    )
    return {"project": project, "tasks_added": added, "tasks_already_there": already}
