"""Which files `import source=otel files=...` reads: a file, a folder of exports or a glob, sorted; a link that
cannot be followed is named, never skipped."""

from __future__ import annotations

import glob
from pathlib import Path

from rubric.errors import InputError
from rubric.traces.otlp_framing import SUFFIXES, is_export_name

__all__ = ["otlp_paths"]


def otlp_paths(files: str) -> list[Path]:
    """The files `files=` names, sorted; none is one error saying what was looked for."""
    path = Path(files)
    _refuse_dead_link(path)
    if path.is_file():
        return [path]
    if path.is_dir():
        for p in path.iterdir():
            if is_export_name(p.name):
                _refuse_dead_link(p)
        found = sorted(p for p in path.iterdir() if p.is_file() and is_export_name(p.name))
        if not found:
            others = sorted(p.name for p in path.iterdir() if p.is_file())[:3]
            raise InputError(
                f"no {', '.join('*' + s for s in SUFFIXES)} file in this folder"
                + (f" (it has {', '.join(others)}{', ...' if len(others) == 3 else ''})." if others else "."),
                path=path,
                fix="pass files= the OTLP export (the collector's file exporter output) itself, or a glob.",
            )
        return found
    matches = [Path(p) for p in glob.glob(files, recursive=True)]
    for p in matches:
        _refuse_dead_link(p)
    found = sorted(p for p in matches if p.is_file())
    if not found:
        raise InputError(
            "no such file, folder or matching files.",
            path=files,
            fix="pass files= an OTLP JSON file, a folder of them, or a glob such as 'traces/*.jsonl'.",
        )
    return found


def _refuse_dead_link(path: Path) -> None:
    """A symbolic link that loops or leads nowhere is named, not skipped as if it were not there (an export
    left out without a word)."""
    if not path.is_symlink() or path.exists():
        return
    try:
        path.resolve(strict=True)
        why = "cannot be followed"
    except RuntimeError:  # Python's word for a loop
        why = "loops back on itself"
    except OSError:
        why = "leads to nothing (its target is gone)"
    raise InputError(
        f"this is a symbolic link that {why}: the export it stands for cannot be read.",
        path=path,
        fix="point the link at the export file, or remove it from the folder.",
    )
