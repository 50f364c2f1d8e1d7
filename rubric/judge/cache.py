"""On-disk request cache: SQLite in WAL mode, one row per finished request, committed as it finishes.

A rerun reads every finished answer back and makes no request for it; a run killed at any moment loses
at most the requests in flight, and never writes an answer twice (the key is the primary key).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rubric.errors import InputError


def cache_key(identity: dict[str, Any] | str, payload: Any) -> str:
    """Hash of everything that changes an answer: the judge's identity and what it is asked.

    The hash of json.dumps({"judge": identity, "ask": payload}, sort_keys=True, ensure_ascii=False),
    written out by hand so that `identity` can be passed already encoded (identity_json), once for
    thousands of keys."""
    judge = identity if isinstance(identity, str) else identity_json(identity)
    ask = json.dumps(payload, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(f'{{"ask": {ask}, "judge": {judge}}}'.encode()).hexdigest()


def identity_json(identity: dict[str, Any]) -> str:
    return json.dumps(identity, sort_keys=True, ensure_ascii=False)


class RequestCache:
    """Key -> JSON answer. `RequestCache(None)` keeps everything in memory (nothing persists)."""

    def __init__(self, path: str | Path | None):
        self.path = None if path is None else Path(path)
        # What this open creates (the file, its missing folders), so a run that stops on an input error
        # before any answer can leave nothing behind (discard_if_new); what existed before is never touched.
        self._created: list[Path] = (
            [] if self.path is None or self.path.exists() else [self.path, *_missing(self.path.parent)]
        )
        try:
            self._db = self._open()
        except (OSError, sqlite3.Error) as exc:
            what = "a folder" if self.path is not None and self.path.is_dir() else f"not usable ({exc})"
            raise InputError(
                f"the request cache is {what}.",
                path=self.path,
                fix="set cache= to a new file path (or delete a file that is not a role-rubric cache).",
            ) from None

    def _open(self) -> sqlite3.Connection:
        if self.path is not None:
            if self.path.is_dir():
                raise IsADirectoryError(str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        # check_same_thread=False: the embedding judge writes from a worker thread, one at a time.
        db = sqlite3.connect(":memory:" if self.path is None else str(self.path), check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            # NORMAL is durable against a killed process (only an OS crash can lose the last commits).
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            columns = [row[1] for row in db.execute("PRAGMA table_info(answers)")]
            if columns != ["key", "value"]:
                raise sqlite3.DatabaseError(f"its answers table has columns {columns}, not key, value")
            db.commit()
        except BaseException:
            db.close()
            raise
        return db

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, str] = {}
        for start in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self._db.execute(f"SELECT key, value FROM answers WHERE key IN ({marks})", chunk).fetchall())
        return found

    def put(self, key: str, value: str) -> None:
        self.put_many([(key, value)])

    def put_many(self, rows: Iterable[tuple[str, str]]) -> None:
        with self._db:  # one transaction, committed on exit
            self._db.executemany("INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)", list(rows))

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def discard_if_new(self) -> None:
        """Close; if this object created the cache file and it holds no answer, remove the file (with its
        WAL side files) and the folders created for it that are still empty. An earlier cache is kept."""
        empty = len(self) == 0
        self.close()
        if not self._created or not empty:
            return
        for side in ("", "-wal", "-shm", "-journal"):
            Path(f"{self._created[0]}{side}").unlink(missing_ok=True)
        for folder in self._created[1:]:
            try:
                folder.rmdir()  # only an empty folder: another file stops it here
            except OSError:
                return


def _missing(folder: Path) -> list[Path]:
    """`folder` and its ancestors that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing
