"""Reference-based (deterministic) scorers of role adherence: the paper's second scoring path.

    from rubric.scorers import make_scorer
    scorer = make_scorer("cosine").fit(references_by_role)
    scorer.score(reply, reference, role)          # float in [0, 1], higher = closer to adherent

Families (one module each): cosine and kNN (cosine.py), BERTScore (bertscore.py), NLI (nli.py),
Mahalanobis and PCA + Mahalanobis (mahalanobis.py), KL divergence (kl.py). All share one EmbeddingStore
(encoder.py): every text is embedded once and sentence embeddings are cached in SQLite.
"""

from __future__ import annotations

from typing import Any

from rubric.errors import InputError
from rubric.scorers.base import Scorer, ScorerUnavailable
from rubric.scorers.bertscore import BertScoreScorer
from rubric.scorers.cosine import CosineScorer, KnnScorer
from rubric.scorers.encoder import EmbeddingStore, MiniLMEncoder, TokenEncoder
from rubric.scorers.kl import KlScorer
from rubric.scorers.mahalanobis import MahalanobisScorer, PcaMahalanobisScorer
from rubric.scorers.nli import NliScorer

SCORERS: dict[str, type[Scorer]] = {
    cls.name: cls
    for cls in (
        CosineScorer,
        KnnScorer,
        BertScoreScorer,
        NliScorer,
        MahalanobisScorer,
        PcaMahalanobisScorer,
        KlScorer,
    )
}


def make_scorer(name: str, *, store: EmbeddingStore | None = None, **params: Any) -> Scorer:
    """A scorer by name (cosine, knn, bertscore, nli, mahalanobis, pca_mahalanobis, kl) with its params."""
    if name not in SCORERS:
        raise InputError(f"unknown scorer {name!r}.", fix=f"use one of {', '.join(SCORERS)}.")
    try:
        return SCORERS[name](store, **params)
    except TypeError as exc:
        raise InputError(
            f"bad parameter for scorer {name!r} ({exc}).", fix="see conf/scorer/ for its parameters."
        ) from None


__all__ = [
    "SCORERS",
    "BertScoreScorer",
    "CosineScorer",
    "EmbeddingStore",
    "KlScorer",
    "KnnScorer",
    "MahalanobisScorer",
    "MiniLMEncoder",
    "NliScorer",
    "PcaMahalanobisScorer",
    "Scorer",
    "ScorerUnavailable",
    "TokenEncoder",
    "make_scorer",
]
