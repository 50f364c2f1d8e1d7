"""`role-rubric import source=otel|mlflow|phoenix`: a chatbot's traces -> a native dataset folder.

    role-rubric import source=otel files=EXPORT.jsonl|DIR|GLOB out=DIR
    role-rubric import source=mlflow tracking_uri=URL experiment=NAME out=DIR
    role-rubric import source=phoenix url=URL project=NAME out=DIR

Reads the spans (rubric/traces: otlp.py, mlflow_source.py, phoenix_source.py), rebuilds the conversations
(rubric/traces/assemble.py), maps the reviewers' annotations to labels (calibration/labelling/annotations.py), and only
then writes out=: conversations.jsonl, rubric.yaml (rubric_file=, or the packaged role-adherence rubric),
labels.csv when reviewers labelled, and import_summary.json (the counts, the source, what was left out and
why). Bad input stops the import before anything is written. Called from calibration/commands/import_.py.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

SUMMARY_NAME = "import_summary.json"


def run(cfg: Any) -> dict[str, int]:
    """Import the traces cfg.source names into cfg.out; the counts."""
    from calibration.labelling.annotations import COLUMNS, annotation_labels, read_label_map, unmapped_notice
    from rubric.conversations import conversations_from_records
    from rubric.files import atomic_write_text, ensure_out_dir
    from rubric.traces.assemble import TraceSelection, assemble

    kind = cfg.source
    selection = TraceSelection.from_config(cfg)
    rubric, rubric_text = _rubric(cfg)
    label_map = read_label_map(cfg.label_map, rubric) if _given(cfg, "label_map") else None
    roles = None
    if _given(cfg, "roles"):
        from rubric.traces.roles import read_roles

        roles = read_roles(cfg.roles)  # read before the source: a bad file is one line before any work
    source = _source(cfg, kind, selection)
    log.info(f"import: reading {source.description}")
    imported = assemble(
        source.spans(),
        selection,
        source=_source_record(cfg, kind, source),
        description=source.description,
        progress=bool(getattr(cfg, "progress", False)),
    )
    if roles is not None:
        roles.name_records(imported.records)
    labels, label_counts = annotation_labels(source.annotations(), imported, rubric, label_map=label_map)
    # the records must read back as conversations (gather, score, label-studio load them): checked here, one
    # at a time (a million spans' conversations held twice would double the import's memory)
    for record in imported.records:
        conversations_from_records([record], source=source.description)
    out = ensure_out_dir(cfg.out)
    if not labels and (out / "labels.csv").exists():
        from rubric.errors import InputError

        raise InputError(
            "out= holds a labels.csv, and this import has no labels to replace it: it would no longer match the "
            "conversations.",
            path=out / "labels.csv",
            fix="import into a new out= folder (or remove that labels.csv).",
        )
    _refuse_stale_judgments(out, imported.records)
    counts = {**imported.counts, "labels": len(labels)}
    written = [
        _write_jsonl(out / "conversations.jsonl", imported.records),
        atomic_write_text(out / "rubric.yaml", rubric_text),
    ]
    if labels:
        written.append(atomic_write_text(out / "labels.csv", _csv(COLUMNS, labels)))
    summary = {
        "source": _source_record(cfg, kind, source),
        "counts": counts,
        "labels": label_counts,
        "skipped": imported.skipped,
        "selection": _selection_record(selection),
        "rubric": cfg.rubric_file if _given(cfg, "rubric_file") else "packaged role_adherence",
    }
    written.append(atomic_write_text(out / SUMMARY_NAME, json.dumps(summary, indent=1, ensure_ascii=False) + "\n"))
    skipped = "; ".join(f"{v:,} {k}" for k, v in imported.skipped.items())
    log.info(
        f"import: {counts['conversations']:,} conversations, {counts['turns']:,} turns from {counts['llm_calls']:,} "
        f"LLM calls ({counts['spans']:,} spans)"
        + (f", {len(labels):,} labels" if labels else "")
        + (f"; left out: {skipped}" if skipped else "")
    )
    if roles is not None and roles.notice():
        log.info(f"import: note: {roles.notice()}")
    elif roles is None:
        from rubric.traces.roles import default_names_notice

        named = default_names_notice(imported.records)
        if named:
            log.info(f"import: note: {named}")
    notice = unmapped_notice(label_counts.get("unmapped_names") or {}, rubric)
    if notice:  # on screen, not only in the summary: reviewers' feedback a team expects to see as labels
        log.info(f"import: note: {notice}")
    log.info(f"import: wrote {', '.join(str(p) for p in written)}")
    return counts


def _refuse_stale_judgments(out: Path, records: list[dict[str, Any]]) -> None:
    """A gathered folder's llm.csv answers about its conversations.jsonl: an import that replaces those with
    other conversations would leave answers that match nothing (or the wrong turns) beside them."""
    import hashlib

    from rubric.errors import InputError
    from rubric.files import file_sha256

    gathered = [out / name for name in ("llm.csv", "llm.parquet") if (out / name).exists()]
    if not gathered:
        return
    same = hashlib.sha256()
    for record in records:  # the bytes _write_jsonl writes, hashed as they go
        same.update((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
    existing = out / "conversations.jsonl"
    if existing.is_file() and file_sha256(existing) == same.hexdigest():
        return  # the same conversations: the judge's answers still match them
    raise InputError(
        f"out= holds {gathered[0].name}, the judge's answers about the conversations there; this import replaces "
        "conversations.jsonl with others, and those answers would no longer match.",
        path=gathered[0],
        fix="import into a new out= folder and gather there (or remove that folder's gathered files).",
    )


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    """One record per line, written as it goes (not one string of the whole file), atomically."""
    from rubric.files import atomic_path

    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def _given(cfg: Any, key: str) -> bool:
    return getattr(cfg, key, None) not in (None, "", "???")


def _rubric(cfg: Any) -> tuple[Any, str]:
    """The rubric labels are checked against and its text for out=/rubric.yaml (rubric_file=, or packaged)."""
    from importlib import resources

    from rubric.errors import read_text_file
    from rubric.schema import load_rubric, rubric_from_dict

    if _given(cfg, "rubric_file"):
        return load_rubric(cfg.rubric_file), read_text_file(cfg.rubric_file)
    import yaml

    text = resources.files("conf").joinpath("rubric", "role_adherence.yaml").read_text(encoding="utf-8")
    return rubric_from_dict(yaml.safe_load(text), source="conf/rubric/role_adherence.yaml"), text


def _source(cfg: Any, kind: str, selection: Any) -> Any:
    """The TraceSource for source= (the servers' clients imported only when asked for)."""
    if kind == "otel":
        from rubric.traces.otlp import OtlpFiles

        return OtlpFiles(cfg.files, only=selection.read_keys())
    if kind == "mlflow":
        from rubric.traces.mlflow_source import MlflowSource as Source
    else:
        from rubric.traces.phoenix_source import PhoenixSource as Source
    return Source.from_config(cfg) if hasattr(Source, "from_config") else Source(cfg)


def _source_record(cfg: Any, kind: str, source: Any) -> dict[str, Any]:
    """Where the conversations came from, as each record's "source" says it."""
    for name in ("source", "record"):  # a source may say more (MLflow: the experiment's id)
        own = getattr(source, name, None)
        if isinstance(own, dict):
            return {"kind": kind, **own}
    if kind == "otel":
        return {"kind": kind, "files": cfg.files}
    if kind == "mlflow":
        return {"kind": kind, "tracking_uri": cfg.tracking_uri, "experiment": cfg.experiment}
    return {"kind": kind, "url": cfg.url, "project": str(cfg.project)}  # an id or a name: as text


def _selection_record(selection: Any) -> dict[str, Any]:
    out = {}
    for key, value in vars(selection).items():
        if value is not None and key != "seed":
            out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    if selection.sample is not None:
        out["seed"] = selection.seed
    return out


def _csv(columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()
