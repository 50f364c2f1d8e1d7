"""What every trace source of `import` shares: its spans -> conversations (and reviewers' labels) -> out=.

    role-rubric import source=otel files=EXPORT.jsonl|DIR|GLOB out=DIR
    role-rubric import source=mlflow tracking_uri=URL experiment=NAME out=DIR
    role-rubric import source=phoenix url=URL project=NAME out=DIR

A trace source (calibration/connectors/{otel,mlflow,phoenix}/source.py) opens a `SpanReader`
(calibration/connectors/sources.py) and hands it here: `import_traces` rebuilds the conversations
(rubric/traces/assemble.py), maps the reviewers' annotations to labels (calibration/labelling/annotations.py),
and only then writes out=: conversations.jsonl, rubric.yaml (rubric_file=, or the packaged role-adherence
rubric), labels.csv when reviewers labelled, and import_summary.json (the counts, the source, what was left out
and why). Bad input stops the import before anything is written.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from calibration.connectors.sources import SpanReader
    from calibration.schema.source_keys import TraceKeys
    from rubric.schema import Rubric
    from rubric.traces.assemble import TraceSelection

log = logging.getLogger(__name__)  # status lines; calibration/cli.py prints them (rubric/notices.py)

SUMMARY_NAME = "import_summary.json"


def selection_of(keys: TraceKeys) -> TraceSelection:
    """Which conversations the import keeps, from the trace source's settings (since= before until=: checked)."""
    from rubric.errors import InputError
    from rubric.traces.assemble import TraceSelection
    from rubric.traces.selection import parse_time

    since, until = parse_time(keys.since, "since"), parse_time(keys.until, "until")
    if since is not None and until is not None and since >= until:
        raise InputError(
            f"since={keys.since} is not before until={keys.until}: no conversation can start in [since, until).",
            fix="swap them, or widen the window (since= is the first moment kept, until= the first left out).",
        )
    return TraceSelection(
        conversation_key=keys.conversation_key,
        role=keys.role,
        role_from=keys.role_from,
        since=since,
        until=until,
        service=keys.service,
        sample=keys.sample,
        seed=keys.seed,
    )


def import_traces(
    keys: TraceKeys,
    open_reader: Callable[[TraceSelection], SpanReader],
    *,
    out: Path,
    progress: bool,
    label_map: Path | None = None,
) -> dict[str, int]:
    """Import the spans the reader `open_reader(selection)` gives into out=; the counts. The rubric, the label
    map and the roles file are read first: a bad file is one line before the server is asked anything."""
    from calibration.labelling.annotations import COLUMNS, annotation_labels, read_label_map
    from rubric.conversations import conversations_from_records
    from rubric.files import atomic_write_text, ensure_out_dir
    from rubric.traces.assemble import assemble

    selection = selection_of(keys)
    rubric, rubric_text = _rubric(keys.rubric_file)
    labels_by = read_label_map(str(label_map), rubric) if label_map is not None else None
    roles = None
    if keys.roles is not None:
        from rubric.traces.roles import read_roles

        roles = read_roles(str(keys.roles))  # read before the source: a bad file is one line before any work
    reader = open_reader(selection)
    log.info(f"import: reading {reader.description}")
    record = {"kind": keys.source, **reader.record}
    imported = assemble(reader.spans(), selection, source=record, description=reader.description, progress=progress)
    if roles is not None:
        roles.name_records(imported.records)
    labels, label_counts = annotation_labels(reader.annotations(), imported, rubric, label_map=labels_by)
    # the records must read back as conversations (gather, score, label-studio load them): checked here, one
    # at a time (a million spans' conversations held twice would double the import's memory)
    for one in imported.records:
        conversations_from_records([one], source=reader.description)
    out = ensure_out_dir(out)
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
        "source": record,
        "counts": counts,
        "labels": label_counts,
        "skipped": imported.skipped,
        "selection": _selection_record(selection),
        "rubric": str(keys.rubric_file) if keys.rubric_file is not None else "packaged role_adherence",
    }
    written.append(atomic_write_text(out / SUMMARY_NAME, json.dumps(summary, indent=1, ensure_ascii=False) + "\n"))
    _say_done(counts, len(labels), imported.skipped, roles, imported.records, label_counts, rubric, written)
    return counts


def _say_done(
    counts: dict[str, int],
    labelled: int,
    skipped: dict[str, int],
    roles: Any,
    records: list[dict[str, Any]],
    label_counts: dict[str, Any],
    rubric: Rubric,
    written: list[Path],
) -> None:
    from calibration.labelling.annotations import unmapped_notice

    left_out = "; ".join(f"{v:,} {k}" for k, v in skipped.items())
    log.info(
        f"import: {counts['conversations']:,} conversations, {counts['turns']:,} turns from {counts['llm_calls']:,} "
        f"LLM calls ({counts['spans']:,} spans)"
        + (f", {labelled:,} labels" if labelled else "")
        + (f"; left out: {left_out}" if left_out else "")
    )
    if roles is not None and roles.notice():
        log.info(f"import: note: {roles.notice()}")
    elif roles is None:
        from rubric.traces.roles import default_names_notice

        named = default_names_notice(records)
        if named:
            log.info(f"import: note: {named}")
    notice = unmapped_notice(label_counts.get("unmapped_names") or {}, rubric)
    if notice:  # on screen, not only in the summary: reviewers' feedback a team expects to see as labels
        log.info(f"import: note: {notice}")
    log.info(f"import: wrote {', '.join(str(p) for p in written)}")


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


def _rubric(rubric_file: Path | None) -> tuple[Rubric, str]:
    """The rubric labels are checked against and its text for out=/rubric.yaml (rubric_file=, or packaged)."""
    from importlib import resources

    from rubric.errors import read_text_file
    from rubric.schema import load_rubric, rubric_from_dict

    if rubric_file is not None:
        return load_rubric(rubric_file), read_text_file(rubric_file)
    import yaml

    text = resources.files("conf").joinpath("rubric").joinpath("role_adherence.yaml").read_text(encoding="utf-8")
    return rubric_from_dict(yaml.safe_load(text), source="conf/rubric/role_adherence.yaml"), text


def _selection_record(selection: TraceSelection) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in vars(selection).items():
        if value is not None and key != "seed":
            out[key] = value.isoformat() if hasattr(value, "isoformat") else value
    if selection.sample is not None:
        out["seed"] = selection.seed
    return out


def _csv(columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()
