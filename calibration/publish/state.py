"""What makes an interrupted publish resume, and what keeps secrets out of every line it prints.

`PublishState` records, beside the scores (<out stem>_published.json), which values a destination has
accepted, per target and destination and for one model: a run stopped midway sends only the rest when run
again. MLflow and Phoenix need it less (a value already there is found and updated, never added twice), but
it spares the look-ups; an OTLP endpoint keeps no identity, so there it is what prevents duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from rubric.secrets import mask_secrets


def mask_url(url: str) -> str:
    """The URL as it may be printed: user and password (and anything that looks like a token) masked."""
    parts = urlsplit(str(url))
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    query = "" if not parts.query else "***"
    return mask_secrets(urlunsplit(parts._replace(query=query)))


class PublishState:
    """The keys a destination has accepted, saved after every batch (atomically)."""

    def __init__(self, path: Path, destination: str, model: str) -> None:
        self.path = Path(path)
        self.destination = destination
        self.model = model
        self._all = self._read()
        entry = self._all.get(destination) or {}
        # values of another model are that model's: its keys say nothing about this one's
        self._done = set(entry.get("done", [])) if entry.get("model_sha256") == model else set()

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):
            return {}
        return data if isinstance(data, dict) else {}

    def done(self, key: str) -> bool:
        return key in self._done

    def mark(self, keys: Iterable[str]) -> None:
        from rubric.jsonfile import write_json

        self._done |= set(keys)
        self._all[self.destination] = {"model_sha256": self.model, "done": sorted(self._done)}
        write_json(self.path, self._all)

    @property
    def count(self) -> int:
        return len(self._done)


def state_path(scores: Path) -> Path:
    return scores.with_name(scores.stem + "_published.json")
