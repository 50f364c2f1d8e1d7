"""KL divergence between the reply's word distribution and the role's vocabulary distribution.

Per role, the vocabulary V is the `top_terms` most frequent words of the reference corpus (lower-cased
words of letters, digits and apostrophes; no stop-word list: function words carry register). Both
distributions live on V plus one "other" bucket, with add-`smoothing` counts, so a reply made of words
the role never uses puts its mass on "other" and diverges. score = exp(-KL(reply || role)): 1 when the
reply's distribution equals the role's, towards 0 as it diverges. `reference` is not used.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from rubric.errors import InputError
from rubric.scorers.base import Reference, Scorer
from rubric.scorers.encoder import EmbeddingStore

WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> list[str]:
    """>>> words("Don't panic, 42 times!")
    ["don't", 'panic', '42', 'times']
    """
    return WORD.findall(text.lower())


def kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(p || q) in nats for strictly positive distributions.

    >>> kl_divergence(np.array([0.5, 0.5]), np.array([0.5, 0.5]))
    0.0
    """
    return float(np.sum(p * np.log(p / q)))


class KlScorer(Scorer):
    name = "kl"
    kind = "distribution"
    needs_fit = True

    def __init__(self, store: EmbeddingStore | None = None, *, top_terms: int = 500, smoothing: float = 0.5):
        super().__init__(store)
        if int(top_terms) < 1 or not float(smoothing) > 0:
            raise InputError(
                f"kl needs top_terms >= 1 and smoothing > 0 (got {top_terms}, {smoothing}).",
                fix="use positive values.",
            )
        self.top_terms, self.smoothing = int(top_terms), float(smoothing)

    def params(self) -> dict[str, Any]:
        return {"top_terms": self.top_terms, "smoothing": self.smoothing}

    def _fit_role(self, references: list[str]) -> Any:
        counts = Counter(w for r in references for w in words(r))
        vocab = [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[: self.top_terms]]
        index = {w: i for i, w in enumerate(vocab)}
        return index, self._distribution(counts, index)

    def _distribution(self, counts: Counter, index: dict[str, int]) -> np.ndarray:
        """(|V| + 1,) smoothed distribution over the vocabulary and the "other" bucket."""
        x = np.full(len(index) + 1, self.smoothing)
        for w, c in counts.items():
            x[index.get(w, len(index))] += c
        return x / x.sum()

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        out = np.empty(len(replies))
        for i, (reply, role) in enumerate(zip(replies, roles, strict=True)):
            index, role_dist = self.roles[role]
            out[i] = np.exp(-kl_divergence(self._distribution(Counter(words(reply)), index), role_dist))
        return out
