"""`role-rubric label-studio`: Label Studio tasks and labelling config from a dataset -> files or a project.

    role-rubric label-studio data=DIR out=DIR [select=SHEET.csv] [predictions=predictions.csv]
    role-rubric label-studio data=DIR url=http://localhost:8080 [project=ID]      (token: $LABEL_STUDIO_API_KEY)

A selection drawn by a sampling plan (select= a sample_plan.csv, or a `suggest purpose=estimate` sheet with its
sample_plan.csv beside it) is checked against the release and copied into out=, where `role-rubric import
source=label-studio` finds it beside the export saved there (or is given it with plan=), so that `estimate`
weights the labels as they were drawn.

Its keys: calibration.schema.commands_data `LabelStudio` (`role-rubric label-studio --help`); the library it
calls: calibration.labelling (items, label_studio: the tasks and config; label_studio_api: the server).
"""

from __future__ import annotations

import logging
from pathlib import Path

from calibration.schema.commands_data import LabelStudio as Schema

__all__ = ["Schema", "run"]

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)


def run(cfg: Schema) -> dict[str, int]:
    """CLI: `role-rubric label-studio data=DIR (out=DIR | url=URL [project=ID]) [select=FILE] [predictions=FILE]`:
    the counts. Imports inside, so that `role-rubric --help` loads no stage."""
    from calibration.connectors.label_studio.api import api_token
    from calibration.connectors.label_studio.tasks import label_config, make_tasks, read_predictions
    from calibration.labelling.items import dataset_conversations, every_turn, llm_items, read_selection
    from rubric.schema import load_rubric

    token = api_token(cfg.token_env) if cfg.url else ""  # before any work: the likeliest mistake
    data = cfg.data
    rubric = load_rubric(data / "rubric.yaml")
    conversations = dataset_conversations(data)
    known = llm_items(data, required=False)
    whole = known is not None and any(turn == "" for _, turn in known)  # the dataset judges whole conversations
    items = (
        read_selection(cfg.select, conversations, whole_conversations=whole)
        if cfg.select
        else every_turn(conversations)
    )
    plan = _selection_plan(cfg, data, known or set(), conversations, items)  # checked before anything is written
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
        _write_files(cfg.out, tasks, config, plan)
    elif plan is not None:
        log.info(f"label-studio: these turns were drawn by the sampling plan {plan}: pass plan={plan} to `import`")
    if cfg.url:
        counts.update(_push(cfg, token, tasks, config))
    return counts


def _selection_plan(cfg: Schema, data: Path, known: set, conversations: dict, items: list) -> Path | None:
    """The sampling plan the selection was drawn by (None: none): select= itself when it is a plan, else the
    sample_plan.csv `suggest purpose=estimate` wrote beside its sheet; checked against the release and the
    selected conversations, and against a plan out= holds already, before anything is written."""
    import pandas as pd

    from calibration.release.plan import PLAN_COLUMNS, PLAN_FILE, check_plan_for, refuse_another_plan

    if not cfg.select:
        return None
    select = cfg.select
    columns = set(pd.read_csv(select, nrows=0, dtype=str).columns)  # read whole by read_selection already
    path = select if set(PLAN_COLUMNS) <= columns else select.parent / PLAN_FILE
    if not path.is_file():
        return None
    release = {str(c) for c, _ in known} if known else set(conversations)
    check_plan_for(
        path,
        data,
        release,
        {cid for cid, _ in items},
        found=None if path == select else "beside select=",
        fix="Or move that sample_plan.csv away if these turns were not drawn by it.",
    )
    refuse_another_plan(cfg.out, path, fix="write the tasks into a new out= folder.")
    return path


def _write_files(out: Path, tasks: list[dict], config: str, plan: Path | None) -> None:
    """OUT/tasks.json and OUT/label_config.xml, to import into Label Studio by hand, and the sampling plan the
    turns were drawn by as OUT/sample_plan.csv, for `import`."""
    import json

    from calibration.release.plan import PLAN_FILE
    from rubric.files import atomic_write_bytes, atomic_write_text, ensure_out_dir

    out = ensure_out_dir(out)
    atomic_write_text(out / "tasks.json", json.dumps(tasks, ensure_ascii=False, indent=1))
    atomic_write_text(out / "label_config.xml", config)
    if plan is not None and plan.resolve() != (out / PLAN_FILE).resolve():
        atomic_write_bytes(out / PLAN_FILE, plan.read_bytes())
    log.info(
        f"label-studio: wrote {out / 'label_config.xml'} (Settings -> Labeling Interface -> Code) "
        f"and {out / 'tasks.json'} (Import)"
        + (
            f", and the sampling plan {plan} as {out / PLAN_FILE}: save Label Studio's export in {out} and "
            "`import` weights the labels by it"
            if plan is not None
            else ""
        )
    )


def _push(cfg: Schema, token: str, tasks: list[dict], config: str) -> dict[str, int]:
    """The tasks into a new project (no project=) or an existing one that asks the same questions, skipping
    the turns it holds already: the project and the counts."""
    from calibration.connectors.label_studio.api import LabelStudio
    from calibration.connectors.label_studio.tasks import check_same_questions

    assert cfg.url is not None  # run pushes only with url=
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
