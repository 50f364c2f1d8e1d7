"""The interface every reference-based scorer follows, and the checks they share.

    scorer = make_scorer("mahalanobis").fit({"role text": [reference, ...]})
    scorer.score(reply, reference, role)                  # one float in [0, 1]; higher = more adherent
    scorer.score_batch(replies, references, roles)        # (N,) float64, the same numbers, batched

Two families: *pairwise* scorers compare a reply with the reference reply for the same user message
(`reference`: a string, or a list of acceptable references); *distribution* scorers compare it with what
the role's reference corpus looks like (`fit`), and ignore `reference`. `fit` is needed by distribution
scorers and kNN (its extra references come from the corpus); the others accept it and keep nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np

from rubric.errors import InputError
from rubric.scorers.encoder import EmbeddingStore

Reference = str | Sequence[str] | None


class ScorerUnavailable(InputError):
    """The scorer cannot run here (e.g. no local NLI model); `compare` reports it and goes on."""


class Scorer:
    name: ClassVar[str]
    kind: ClassVar[str]
    """"pairwise" (reply vs its reference) or "distribution" (reply vs the role's reference corpus)."""
    needs_fit: ClassVar[bool] = False

    def __init__(self, store: EmbeddingStore | None = None):
        self.store = store or EmbeddingStore()
        self.roles: dict[str, Any] = {}
        """role -> fitted state."""

    def params(self) -> dict[str, Any]:
        """The settings that change scores (reported with results and part of cache keys)."""
        return {}

    def fit(self, references_by_role: Mapping[str, Sequence[str]]) -> Scorer:
        """Learn each role's reference corpus; returns self."""
        for role, refs in references_by_role.items():
            refs = [r for r in refs if isinstance(r, str) and r.strip()]
            if not refs:
                raise InputError(
                    f"role {role[:60]!r} has no reference replies to fit on.",
                    fix="give each role at least one reference.",
                )
            self.roles[role] = self._fit_role(list(dict.fromkeys(refs)))
        return self

    def score(self, reply: str, reference: Reference, role: str) -> float:
        return float(self.score_batch([reply], [reference], [role])[0])

    def score_batch(self, replies: Sequence[str], references: Sequence[Reference], roles: Sequence[str]) -> np.ndarray:
        """(N,) scores in [0, 1] for N (reply, reference, role) triples."""
        if not len(replies) == len(references) == len(roles):
            raise InputError(
                f"replies, references and roles differ in length ({len(replies)}, {len(references)}, {len(roles)}).",
                fix="pass one reference and one role per reply.",
            )
        if not replies:
            return np.zeros(0)
        if self.needs_fit:
            unknown = sorted({r for r in roles if r not in self.roles})
            if unknown:
                raise InputError(
                    f"{self.name} was not fitted for role {unknown[0][:60]!r}.",
                    fix="call fit({role: [reference, ...]}) with every role you score.",
                )
        if self.kind == "pairwise":
            missing = [i for i, r in enumerate(references) if not as_list(r)]
            if missing:
                raise InputError(
                    f"{self.name} needs a reference reply; item {missing[0]} has none.",
                    fix="add `reference` to every turn of conversations.jsonl, or use a distribution scorer.",
                )
        scores = np.clip(np.asarray(self._score(list(replies), list(references), list(roles)), float), 0.0, 1.0)
        assert np.isfinite(scores).all(), f"{self.name} produced a non-finite score"
        return scores

    def _fit_role(self, references: list[str]) -> Any:
        return references

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        raise NotImplementedError


def as_list(reference: Reference) -> list[str]:
    if reference is None:
        return []
    if isinstance(reference, str):
        return [reference] if reference.strip() else []
    return [r for r in reference if isinstance(r, str) and r.strip()]
