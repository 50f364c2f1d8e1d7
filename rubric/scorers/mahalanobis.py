"""Mahalanobis and PCA + Mahalanobis: how far the reply's sentence embedding lies from the role's
reference embeddings, in units of their spread.

Mahalanobis: per role, the mean m and the per-dimension variance v of the reference embeddings (a
diagonal covariance), regularised by lambda: D = sqrt(sum_d (x_d - m_d)^2 / (v_d + lambda)),
score = exp(-alpha * D). With lambda -> infinity, D * sqrt(lambda) -> ||x - m||: scaled Euclidean.

PCA + Mahalanobis: the same distance measured in the top principal components of the references only
(at most n - 1 of them for n references; a single reference has none, and then the whole space
is used with lambda alone), with each component's variance + lambda. Whatever a reply does
outside the references' main directions is invisible to it, which is how it can miss or invert the signal.

A reply at the role's mean scores 1 (the maximum); `reference` is not used.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rubric.errors import InputError
from rubric.scorers.base import Reference, Scorer
from rubric.scorers.encoder import EmbeddingStore


class MahalanobisScorer(Scorer):
    name = "mahalanobis"
    kind = "distribution"
    needs_fit = True

    def __init__(self, store: EmbeddingStore | None = None, *, lam: float = 0.01, alpha: float = 1.0):
        super().__init__(store)
        if not float(lam) > 0 or not float(alpha) > 0:
            raise InputError(
                f"{self.name} needs lam > 0 and alpha > 0 (got {lam}, {alpha}).", fix="use positive values."
            )
        self.lam, self.alpha = float(lam), float(alpha)

    def params(self) -> dict[str, Any]:
        return {"lam": self.lam, "alpha": self.alpha}

    def _fit_role(self, references: list[str]) -> Any:
        x = self.store.sentences(references).astype(np.float64)  # (n, dim)
        var = x.var(axis=0, ddof=1) if len(x) > 1 else np.zeros(x.shape[1])
        return x.mean(axis=0), var

    def distances(self, replies: list[str], roles: list[str]) -> np.ndarray:
        """(N,) Mahalanobis distance D of each reply from its role's references."""
        x = self.store.sentences(replies).astype(np.float64)
        out = np.empty(len(replies))
        for i, role in enumerate(roles):
            mean, var = self.roles[role]
            out[i] = np.sqrt(np.sum((x[i] - mean) ** 2 / (var + self.lam)))
        return out

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        return np.exp(-self.alpha * self.distances(replies, roles))


class PcaMahalanobisScorer(MahalanobisScorer):
    name = "pca_mahalanobis"

    def __init__(
        self,
        store: EmbeddingStore | None = None,
        *,
        components: int = 32,
        lam: float = 0.01,
        alpha: float = 1.0,
    ):
        super().__init__(store, lam=lam, alpha=alpha)
        if int(components) < 1:
            raise InputError(f"pca_mahalanobis components={components} is not valid.", fix="use components >= 1.")
        self.components = int(components)

    def params(self) -> dict[str, Any]:
        return {"components": self.components, **super().params()}

    def _fit_role(self, references: list[str]) -> Any:
        x = self.store.sentences(references).astype(np.float64)
        mean = x.mean(axis=0)
        if len(x) < 2:  # no spread, no components: the full space with lambda alone
            return mean, np.eye(x.shape[1]), np.zeros(x.shape[1])
        _, s, vt = np.linalg.svd(x - mean, full_matrices=False)
        keep = min(self.components, len(x) - 1)
        return mean, vt[:keep], s[:keep] ** 2 / (len(x) - 1)  # directions (c, dim), variances (c,)

    def distances(self, replies: list[str], roles: list[str]) -> np.ndarray:
        x = self.store.sentences(replies).astype(np.float64)
        out = np.empty(len(replies))
        for i, role in enumerate(roles):
            mean, directions, var = self.roles[role]
            projected = directions @ (x[i] - mean)
            out[i] = np.sqrt(np.sum(projected**2 / (var + self.lam)))
        return out
