"""BERTScore F1 between reply and reference, from all-MiniLM-L6-v2's last-layer (6th) token embeddings.

Greedy matching as in Zhang et al. (2020): recall = mean over reference tokens of the best cosine to a
reply token, precision the other way round, F1 their harmonic mean. CLS and SEP are left out, no idf
weighting, no baseline rescaling (so unrelated texts still score well above 0; the ranking is what the
AUC reads). Several references: the best F1. Scores per (reply, reference) pair are cached in SQLite
(the token embeddings they come from are not: they are large).
"""

from __future__ import annotations

import json

import numpy as np

from rubric.judge.cache import cache_key, identity_json
from rubric.scorers.base import Reference, Scorer, as_list


def bertscore_f1(reply: np.ndarray, reference: np.ndarray) -> float:
    """F1 of greedy cosine matching between two (tokens, dim) arrays of token embeddings.

    >>> x = np.eye(3)
    >>> round(bertscore_f1(x, x), 6)
    1.0
    """
    a = reply / np.maximum(np.linalg.norm(reply, axis=1, keepdims=True), 1e-12)
    b = reference / np.maximum(np.linalg.norm(reference, axis=1, keepdims=True), 1e-12)
    sim = a @ b.T  # (reply tokens, reference tokens)
    precision, recall = sim.max(axis=1).mean(), sim.max(axis=0).mean()
    return float(2 * precision * recall / (precision + recall)) if precision + recall > 0 else 0.0


def _content(tokens: np.ndarray) -> np.ndarray:
    """Without CLS and SEP (kept when nothing else is left)."""
    return tokens[1:-1] if len(tokens) > 2 else tokens


class BertScoreScorer(Scorer):
    name = "bertscore"
    kind = "pairwise"

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        identity = identity_json({"scorer": self.name, **self.store.identity(), "layer": "last"})
        pairs = [(reply, ref) for reply, refs in zip(replies, references, strict=True) for ref in as_list(refs)]
        keys = [cache_key(identity, [reply, ref]) for reply, ref in pairs]
        cached = self.store.cache.get_many(keys)
        todo = [(k, p) for k, p in zip(keys, pairs, strict=True) if k not in cached]
        if todo:
            texts = list(dict.fromkeys(t for _, p in todo for t in p))
            tokens = dict(zip(texts, (_content(t) for t in self.store.tokens(texts)), strict=True))
            fresh = {k: json.dumps(bertscore_f1(tokens[a], tokens[b])) for k, (a, b) in todo}
            self.store.cache.put_many(fresh.items())
            cached.update(fresh)
        f1 = dict(zip(pairs, (float(json.loads(cached[k])) for k in keys), strict=True))
        return np.array(
            [max(f1[(reply, r)] for r in as_list(refs)) for reply, refs in zip(replies, references, strict=True)]
        )
