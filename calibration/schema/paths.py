"""The path keys of a command's config, checked before any long work (calibration/schema check_config
runs them): the output is a folder or a file as the command writes, somewhere writable, never one of the
command's own inputs, and a file a command writes never replaces one it did not write (`overwrite=true` lets
it); input keys name one path, except data= of the commands that read several directories as one."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric.errors import InputError

# Output paths: which commands write a folder and which a single file. FILE_OUTPUTS is the one list of
# the config keys that name one output file (calibration/schema/out_locks.py locks them as files); every other
# output is a folder.
FILE_OUTPUTS: dict[str, tuple[str, ...]] = {
    "predict": ("out",),
    "evaluate": ("out",),
    "score": ("out", "turns_out"),
    "suggest": ("out",),
    "publish": ("out",),
}
OUT_FOLDER = {
    "import",
    "gather",
    "train",
    "cv",
    "search",
    "report",
    "demo",
    "estimate",
    "label-studio",
    "monitor",
    "compare-judges",
}
OUT_FILE = {command for command, keys in FILE_OUTPUTS.items() if "out" in keys}


def check_paths(command: str, cfg: Mapping[str, Any], *, not_paths: Collection[str] = ()) -> None:
    """Every path check of `command`'s plain config, in order: one path per input key, the output's kind and
    place, no input overwritten. not_paths: keys that are no path for this command (train's model= names a
    kind of model)."""
    _check_no_dash(cfg)
    _check_one_directory(command, cfg)
    _check_out(command, cfg)
    _check_not_an_input(command, cfg, not_paths)
    _check_not_a_folder_read_whole(command, cfg)
    _check_not_foreign(cfg, written_files(command, cfg))


def _check_no_dash(cfg: Mapping[str, Any]) -> None:
    """`-` is no path here (Unix tools read it as standard input or output; role-rubric would make a file
    named "-"): one line, before anything is read or written."""
    for key in (*INPUT_KEYS, "out", "cache"):
        found, value = lookup(cfg, key)
        if found and isinstance(value, str) and value.strip() == "-":
            way = "write to standard output" if key == "out" else "read standard input"
            raise InputError(
                f"{key}=- : role-rubric does not {way}; it reads and writes named files.",
                fix=f"pass {key}= a path (for piped input, save it first: `... > input.jsonl`).",
            )


SEVERAL_DIRECTORIES = ("train", "cv", "search", "report", "monitor", "compare-judges")
"""The commands whose data= may name several directories: trained on as one (calibration/data/union.py), or
compared (compare-judges: one directory per judge)."""


def _check_one_directory(command: str, cfg: Mapping[str, Any]) -> None:
    """A list given to an input key that takes one path (data= of predict, estimate, ...) is one clear line."""
    for key in INPUT_KEYS:
        found, value = lookup(cfg, key)
        if not found or not isinstance(value, Sequence) or isinstance(value, str):
            continue
        if key == "data" and command in SEVERAL_DIRECTORIES:
            if not value:
                raise InputError("data=[] names no dataset directory.", fix="pass data=DIR or data=[DIR1,DIR2].")
            continue
        several = f" ({', '.join(SEVERAL_DIRECTORIES)} read several as one)" if key == "data" else ""
        raise InputError(
            f"{command} reads one path from {key}=, not a list of {len(value)}{several}.",
            fix=f"pass {key}=PATH, and run {command} once per path.",
        )


def _check_out(command: str, cfg: Mapping[str, Any]) -> None:
    found, out = lookup(cfg, "out")
    if not found or out is None or out == "???":
        return
    path = Path(str(out))
    if command in OUT_FOLDER and path.exists() and not path.is_dir():
        raise InputError("out= is a file, but this command writes a folder.", path=path, fix="set out= to a folder.")
    if command in OUT_FILE and path.is_dir():
        raise InputError("out= is a folder, but this command writes a file.", path=path, fix="set out= to a file path.")
    # the nearest existing ancestor must be writable, or the run would fail only at its end
    probe = path if command in OUT_FOLDER else path.parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and (not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK)):
        raise InputError(
            f"cannot write there: {probe} is {'not a folder' if not probe.is_dir() else 'not writable'}.",
            path=path,
            fix="set out= to a path you can write to.",
        )


# Input keys, and the files a command writes into its out folder (a file out is the file itself).
INPUT_KEYS = (
    "data",
    "conversations",
    "predictions",
    "model",
    "evaluations",
    "judgments",
    "rubric_file",
    "calibrator",
    "export",
    "sheet",
    "select",
    "judge_map",
    "scores",
    "estimate",
    "cv",
    "disagreements",
    "plan",
    "baseline",
    "calibration",
    "labels",
    "label_map",
    "roles",
    "canary",
    "files",
    "results",
    "report.active_labelling",
)
"""Every key that names something a command reads (tests/test_nothing_overwritten.py: every path key of every
schema is one of these or an output)."""
DATASET_FILES = (
    "rubric.yaml",
    "llm.csv",
    "llm.parquet",
    "labels.csv",
    "labels.parquet",
    "conversations.jsonl",
    "model.json",
    "weights.safetensors",
)
READ_IN_FOLDER = {
    "cv": ("predictions.csv", "metrics.json", "previous_predictions.csv"),
    "estimate": ("estimate.json",),
    "baseline": ("estimate.json",),
}
"""Beside a dataset's files, what a command reads in the folder one of these keys names (a cv output, an
estimate's): `report cv=DIR out=DIR` would replace the cv's metrics.json it reads."""
WRITES = {
    "train": ("model.json", "weights.safetensors"),
    "cv": ("predictions.csv", "metrics.json"),
    "report": ("report.html", "metrics.json"),
    "import": ("rubric.yaml", "llm.csv", "labels.csv", "label-studio-export.json"),
    "label-studio": ("tasks.json", "label_config.xml"),
    "search": ("best.yaml", "search.json"),
    "compare-judges": ("compare-judges.json", "compare-judges.html"),
}


def _check_not_an_input(command: str, cfg: Mapping[str, Any], not_paths: Collection[str]) -> None:
    """An output may never replace one of the command's own inputs (e.g. `predict out=DATA/llm.csv`)."""
    found, out = lookup(cfg, "out")
    if not found or out is None or out == "???":
        return
    inputs: set[Path] = set()
    for key in INPUT_KEYS:
        if key in not_paths:
            continue  # not a path for this command (train's model= names a kind of model)
        present, value = lookup(cfg, key)
        values = list(value) if isinstance(value, Sequence) and not isinstance(value, str) else [value]
        for one in values if present else []:  # data= may name several directories
            if not isinstance(one, str) or one in ("", "???"):
                continue
            path = Path(one)
            if path.is_file():
                inputs.add(path.resolve())
            elif path.is_dir():
                names = (*DATASET_FILES, *READ_IN_FOLDER.get(key, ()))
                inputs |= {(path / name).resolve() for name in names if (path / name).is_file()}
    out_path = Path(str(out))
    if command in OUT_FILE:  # the file and what the command writes beside it (predict's OUT_shift.json)
        targets = [path for _, path, _ in written_files(command, cfg)] or [out_path]
    else:
        targets = [out_path / name for name in WRITES.get(command, ())]
    for target in targets:
        if target.resolve() in inputs:
            raise InputError(
                f"out= would overwrite {target.name}, one of this command's own inputs.",
                path=target,
                fix="choose another out= (inputs are never overwritten).",
            )
    if command in OUT_FILE and out_path.name in DATASET_FILES and out_path.is_file():
        # another dataset's or model's file (someone's labels.csv): never replaced by a command's table
        raise InputError(
            f"out= would overwrite {out_path.name}, a file other commands read.",
            path=out_path,
            fix=f"choose another out= file name (e.g. {command}.csv); inputs are never overwritten.",
        )


def _check_not_a_folder_read_whole(command: str, cfg: Mapping[str, Any]) -> None:
    """files= (import source=otel) reads every file of a folder or a glob: an out= folder there would hold the
    import's own conversations.jsonl the next time, read as one of the exports."""
    found, out = lookup(cfg, "out")
    present, files = lookup(cfg, "files")
    if not (found and present) or command not in OUT_FOLDER or not isinstance(files, str) or out in (None, "???"):
        return
    read = Path(files).parent if any(c in files for c in "*?[") else Path(files)
    if read.is_dir() and Path(str(out)).resolve() == read.resolve():
        raise InputError(
            "out= is the folder files= reads: what the import writes there would be read as an export next time.",
            path=Path(str(out)),
            fix="pass out= a folder of its own (e.g. beside the exports).",
        )


# -- files the command did not write ------------------------------------------------------------------------------
def _first_line(path: Path) -> str:
    with open(path, "rb") as fh:
        return fh.read(1 << 16).split(b"\n", 1)[0].decode("utf-8", "replace")


def _csv_with(*columns: str) -> Callable[[Path], bool]:
    """A CSV whose header names `columns`: the table a command writes, told apart by its header alone."""
    return lambda path: set(columns) <= {c.strip().strip('"') for c in _first_line(path).split(",")}


def _json_with(key: str) -> Callable[[Path], bool]:
    def own(path: Path) -> bool:
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            return False
        return isinstance(value, dict) and key in value

    return own


def _jsonl_with(key: str) -> Callable[[Path], bool]:
    """Lines of JSON objects whose first key is `key` (publish's OTLP events): told by how the file starts, as
    a line can be megabytes."""
    return lambda path: _first_line(path).lstrip().startswith(json.dumps({key: None})[:-5])


OWN_FILES: dict[str, Callable[[Path], bool]] = {
    "predict": _csv_with("conversation_id", "turn", "judge_id", "question_id", "expected"),
    "evaluate": _json_with("rmse"),
    "score": _csv_with("conversation_id", "turns", "score", "success"),
    "publish": _jsonl_with("resourceLogs"),
}
"""How each command that writes one file (FILE_OUTPUTS; suggest keeps any existing sheet, its own rule) tells
its own earlier output, which a rerun replaces, from anything else, which is kept unless overwrite=true."""


def written_files(command: str, cfg: Mapping[str, Any]) -> list[tuple[str, Path, Callable[[Path], bool]]]:
    """(key, path, is-its-own-output) of every file `command` writes for file outputs: out= and the files
    written beside it (OUT_shift.json of predict and a calibrated score, score's turns_out=); [] for the
    commands that write folders."""
    found, out = lookup(cfg, "out")
    if not found or out is None or out == "???" or command not in OWN_FILES:
        return []
    out = Path(str(out))
    files = [("out", out, OWN_FILES[command])]
    if command == "predict" or (command == "score" and lookup(cfg, "calibrator")[1]):
        files.append(("out", out.with_name(out.stem + "_shift.json"), _json_with("shift")))
    if command == "score":
        turns = lookup(cfg, "turns_out")[1]
        turns_path = Path(str(turns)) if turns else out.with_name(out.stem + "_turns.csv")
        files.append(("turns_out", turns_path, _csv_with("conversation_id", "turn", "adherence", "adheres")))
    return files


def _check_not_foreign(cfg: Mapping[str, Any], files: list[tuple[str, Path, Callable[[Path], bool]]]) -> None:
    """A file a command writes replaces an existing one only when that one is the command's own earlier output
    (a rerun), or an empty file: someone's table, another command's output or a file it read is kept, unless
    overwrite=true says to replace it."""
    if lookup(cfg, "overwrite")[1] is True:
        return
    for key, path, own in files:
        if not path.is_file() or path.stat().st_size == 0:
            continue
        try:
            ours = own(path)
        except OSError:  # unreadable: not replaced either
            ours = False
        if not ours:
            beside = "" if key != "out" or path == Path(str(lookup(cfg, "out")[1])) else " (written beside out=)"
            raise InputError(
                f"{key}= would replace {path.name}{beside}, an existing file this command did not write; it is kept.",
                path=path,
                fix=f"choose another {key}=, or pass overwrite=true to replace it.",
            )


def lookup(cfg: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node
