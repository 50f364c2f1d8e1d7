"""Which conversations an import keeps, by when they started (since=/until=) and a random sample (sample=,
seed=); and the times those keys are written in. (service= leaves out spans as they are read: assemble.py.)
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime, timezone
from typing import Any

from rubric.errors import InputError


def parse_time(value: Any, key: str) -> datetime | None:
    """since=/until= as an aware UTC datetime (a date or a time without zone is taken as UTC)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    else:
        try:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
        except ValueError:
            raise InputError(
                f"{key}={value!r} is not an ISO 8601 time.",
                fix=f"write {key}= as 2026-11-01 or 2026-11-01T09:30:00Z.",
            ) from None
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def iso_time(ns: int) -> str:
    """Nanoseconds since the epoch -> '2026-11-29T02:13:23.123456Z'."""
    return datetime.fromtimestamp(ns // 1000 / 1e6, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def select_conversations(
    starts: dict[str, int],
    *,
    since: datetime | None,
    until: datetime | None,
    sample: int | None,
    seed: int,
    skipped: Counter[str],
    description: str,
) -> list[str]:
    """The conversation ids kept, in order of start (ties: by id). starts: each conversation's first span's
    start (ns); what is left out is counted in `skipped` by reason."""
    chosen = sorted(starts)
    if since is not None or until is not None:
        since_ns = _ns(since) if since is not None else None
        until_ns = _ns(until) if until is not None else None
        inside = [
            c
            for c in chosen
            if (since_ns is None or starts[c] >= since_ns) and (until_ns is None or starts[c] < until_ns)
        ]
        skipped["conversations outside since=/until="] += len(chosen) - len(inside)
        chosen = inside
    if sample is not None and sample < len(chosen):
        skipped["conversations not drawn by sample="] += len(chosen) - sample
        chosen = random.Random(seed).sample(chosen, sample)
    if not chosen:
        raise InputError(
            f"no conversation of {description} is left after since= and until= "
            f"({len(starts):,} conversations, the first started {iso_time(min(starts.values()))}).",
            fix="widen since= / until=.",
        )
    chosen.sort(key=lambda cid: (starts[cid], cid))
    return chosen


def _ns(moment: datetime) -> int:
    return int(moment.timestamp() * 1_000_000) * 1000
