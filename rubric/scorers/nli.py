"""NLI: contradiction between the reference and the reply, as a hard penalty.

A local cross-encoder NLI model (any sequence-classification model directory that sentence-transformers'
CrossEncoder loads, whose config names a "contradiction" label, e.g. a saved
cross-encoder/nli-deberta-v3-xsmall) reads (premise = reference, hypothesis = reply). Score = 0 when
contradiction is the most likely label (the hard penalty), else 1 - P(contradiction).

None ships offline here and nothing is downloaded: without `model_path` (or with a path that holds no
such model) the scorer raises ScorerUnavailable, which `compare` reports as "unavailable".
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from rubric.judge.cache import cache_key, identity_json
from rubric.scorers.base import Reference, Scorer, ScorerUnavailable, as_list
from rubric.scorers.encoder import EmbeddingStore

FIX = "set model_path=DIR to a local NLI cross-encoder (a saved sentence-transformers CrossEncoder or transformers sequence-classification model with a contradiction label); none ships offline."


class NliScorer(Scorer):
    name = "nli"
    kind = "pairwise"

    def __init__(self, store: EmbeddingStore | None = None, *, model_path: str | None = None, batch_size: int = 32):
        super().__init__(store)
        if not model_path:
            raise ScorerUnavailable("no NLI model given.", fix=FIX)
        path = Path(model_path).expanduser()
        if not (path / "config.json").is_file():
            raise ScorerUnavailable("no model found here (no config.json).", path=path, fix=FIX)
        try:
            from sentence_transformers import CrossEncoder
        except ImportError:
            from rubric.extras import install_hint, missing

            raise ScorerUnavailable(missing("nli", by="scorer=nli"), fix=install_hint("nli") + ".") from None
        self.model = CrossEncoder(str(path), device="cpu", local_files_only=True)
        labels = {int(i): str(name).lower() for i, name in self.model.model.config.id2label.items()}
        found = [i for i, name in labels.items() if name.startswith("contradict")]
        if len(labels) < 2 or len(found) != 1:
            raise ScorerUnavailable(
                f"the model's labels {sorted(labels.values())} name no single contradiction label.",
                path=path,
                fix=FIX,
            )
        self.contradiction = found[0]
        self.path, self.batch_size = path.resolve(), int(batch_size)
        self._config_hash = hashlib.sha256((path / "config.json").read_bytes()).hexdigest()[:16]

    def params(self) -> dict[str, Any]:
        return {"model_path": str(self.path)}

    def contradiction_probs(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """(N, labels) softmax of the cross-encoder's logits for (premise, hypothesis) pairs."""
        logits = np.asarray(
            self.model.predict(
                list(zip(premises, hypotheses, strict=True)),
                batch_size=self.batch_size,
                convert_to_numpy=True,
                activation_fn=None,
            ),
            dtype=np.float64,
        ).reshape(len(premises), -1)
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        return p / p.sum(axis=1, keepdims=True)

    def _score(self, replies: list[str], references: list[Reference], roles: list[str]) -> np.ndarray:
        identity = identity_json({"scorer": self.name, "model": str(self.path), "config": self._config_hash})
        pairs = [(ref, reply) for reply, refs in zip(replies, references, strict=True) for ref in as_list(refs)]
        keys = [cache_key(identity, list(p)) for p in pairs]
        cached = self.store.cache.get_many(keys)
        todo = [(k, p) for k, p in zip(keys, pairs, strict=True) if k not in cached]
        if todo:
            probs = self.contradiction_probs([p[0] for _, p in todo], [p[1] for _, p in todo])
            hard = probs.argmax(axis=1) == self.contradiction
            scores = np.where(hard, 0.0, 1.0 - probs[:, self.contradiction])
            fresh = {k: json.dumps(float(s)) for (k, _), s in zip(todo, scores, strict=True)}
            self.store.cache.put_many(fresh.items())
            cached.update(fresh)
        by_pair = dict(zip(pairs, (float(json.loads(cached[k])) for k in keys), strict=True))
        # Several references: the reply is penalised only if it contradicts all of them.
        return np.array(
            [max(by_pair[(r, reply)] for r in as_list(refs)) for reply, refs in zip(replies, references, strict=True)]
        )
