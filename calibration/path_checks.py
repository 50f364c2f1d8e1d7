"""The path keys of a command's config, checked before any long work (calibration/schema check_config
runs them): the output is a folder or a file as the command writes, somewhere writable, never one of the
command's own inputs; input keys name one path, except data= of the commands that read several directories
as one."""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from rubric.errors import InputError

# Output paths: which commands write a folder and which a single file. FILE_OUTPUTS is the one list of
# the config keys that name one output file (calibration/run_lock.py locks them as files); every other
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


def _check_no_dash(cfg: Mapping[str, Any]) -> None:
    """`-` is no path here (Unix tools read it as standard input or output; role-rubric would make a file
    named "-"): one line, before anything is read or written."""
    for key in (*INPUT_KEYS, "out", "results", "cache", "plan", "baseline"):
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
)
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
                inputs |= {(path / name).resolve() for name in DATASET_FILES if (path / name).is_file()}
    out_path = Path(str(out))
    targets = [out_path] if command in OUT_FILE else [out_path / name for name in WRITES.get(command, ())]
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


def lookup(cfg: Mapping[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = cfg
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node
