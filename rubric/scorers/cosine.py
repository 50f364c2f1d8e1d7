"""Cosine and kNN: how close the reply's sentence embedding is to its reference reply(s).

cosine = cos(e(reply), e(reference)), clipped to [0, 1] (MiniLM cosines of English text are rarely < 0).
kNN = 1 - min cosine distance to the k references available for the turn = the highest cosine to any of
them. The turn's own reference(s) come first; when a turn has fewer than k, the rest are the role
corpus's references nearest to the turn's own one (stand-ins for "other acceptable replies to the same
message"; a corpus reference identical to the turn's own is not counted twice). k = 1 is cosine.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rubric.errors import InputError
from rubric.scorers.base import Reference, Scorer, as_list
from rubric.scorers.encoder import EmbeddingStore


class CosineScorer(Scorer):
    name = "cosine"
    kind = "pairwise"

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        firsts = [as_list(r)[0] for r in references]
        return np.einsum("nd,nd->n", self.store.sentences(replies), self.store.sentences(firsts))


class KnnScorer(Scorer):
    name = "knn"
    kind = "pairwise"

    def __init__(self, store: EmbeddingStore | None = None, *, k: int = 5):
        super().__init__(store)
        if int(k) < 1:
            raise InputError(f"knn k={k} is not valid.", fix="use k >= 1.")
        self.k = int(k)

    def params(self) -> dict[str, Any]:
        return {"k": self.k}

    @property
    def needs_fit(self) -> bool:  # type: ignore[override]  # k = 1 needs no corpus
        return self.k > 1

    def _fit_role(self, references: list[str]) -> Any:
        return references, self.store.sentences(references)

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        reply_vecs = self.store.sentences(replies)
        out = np.empty(len(replies))
        for i, (ref, role) in enumerate(zip(references, roles, strict=True)):
            own = as_list(ref)[: self.k]
            vecs = self.store.sentences(own)
            if len(own) < self.k and role in self.roles:
                texts, corpus = self.roles[role]
                keep = [j for j, t in enumerate(texts) if t not in own]
                near = np.argsort(-(corpus[keep] @ vecs[0]), kind="stable")[: self.k - len(own)]
                vecs = np.vstack([vecs, corpus[keep][near]])
            out[i] = float((vecs @ reply_vecs[i]).max())
        return out
