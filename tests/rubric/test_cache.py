"""The request cache's keys: stable across releases (a changed key silently re-asks, and re-pays, every
cached question) and the same whether the judge identity comes encoded or not."""

from __future__ import annotations

import hashlib
import json
import random

from rubric.judge.cache import RequestCache, cache_key, identity_json


def reference_key(identity, payload) -> str:
    """The key's definition, as the first release computed it."""
    raw = json.dumps({"judge": identity, "ask": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(raw.encode()).hexdigest()


def random_text(rng: random.Random) -> str:
    alphabet = 'ab "\\\n\t{}:,é€😀<>'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))


def test_keys_match_the_definition_for_random_payloads():
    rng = random.Random(0)
    for _ in range(200):
        identity = {
            "model": random_text(rng),
            "base_url": rng.choice([None, random_text(rng)]),
            "top_logprobs": rng.randint(1, 20),
            "floor": rng.random(),
            "params": {random_text(rng): rng.choice([1, 2.5, None, [1, "x"]]) for _ in range(rng.randint(0, 3))},
        }
        messages = [
            {"role": "system", "content": random_text(rng)},
            {"role": "user", "content": random_text(rng)},
        ]
        payload = {"messages": messages, "reason": rng.random() < 0.5}
        expected = reference_key(identity, payload)
        assert cache_key(identity, payload) == expected
        assert cache_key(identity_json(identity), payload) == expected


def test_golden_key():
    """Pinned: if this changes, every user's cache misses after an upgrade."""
    key = cache_key(
        {"model": "m", "base_url": None}, {"messages": [{"role": "user", "content": "hi"}], "reason": False}
    )
    assert key == reference_key(
        {"model": "m", "base_url": None}, {"messages": [{"role": "user", "content": "hi"}], "reason": False}
    )
    assert key == "99cae606433048e9c92cda0df9fd684eaad2dceebe815e0f47004213fdf45099"


def test_cache_round_trip_and_rerun(tmp_path):
    store = RequestCache(tmp_path / "c.sqlite")
    store.put_many([("a", "1"), ("b", "2")])
    store.close()
    again = RequestCache(tmp_path / "c.sqlite")
    assert again.get_many(["a", "b", "c"]) == {"a": "1", "b": "2"} and len(again) == 2
    again.close()
