"""Fixtures for the rubric tests: a fake OpenAI-protocol server on 127.0.0.1 and small conversations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from openai_server import FakeOpenAI  # noqa: E402

from rubric.conversations import Conversation, Turn  # noqa: E402
from rubric.schema import load_rubric  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    with FakeOpenAI(timeout_s=3.0, slow_s=0.05, retry_after="0.2") as srv:
        yield srv


@pytest.fixture
def http_client():
    """How requests are sent (rubric/judge/http.py); test_gather.py runs every test with each."""
    return "aiohttp"


@pytest.fixture
def judge(server, http_client):
    """A judge config pointing at the fake server, with fast retries."""
    return {
        "http_client": http_client,
        **fake_judge_settings(server.base_url, timeout=1.0, max_retries=3, max_backoff=1.0, samples=8),
    }


def fake_judge_settings(base_url: str, **settings) -> dict:
    """A judge config for the fake server at `base_url` (no address or key from the environment, four requests
    at once, short backoff), with `settings` over those."""
    return {
        "backend": "chat",
        "model": "fake-judge",
        "base_url": base_url,
        "api_key": "EMPTY",
        "base_url_env": None,
        "api_key_env": None,
        "concurrency": 4,
        "backoff": 0.01,
        **settings,
    }


@pytest.fixture(scope="session")
def rubric():
    return load_rubric(ROOT / "conf/rubric/role_adherence.yaml")


def make_conversations(n: int, turns: int = 3) -> list[Conversation]:
    role = "Customer-support agent for a bank: account inquiries, transactions and cards only; never investment advice."
    return [
        Conversation(
            f"c{i}",
            role,
            tuple(
                Turn(
                    f"Question {j} of conversation {i} about my card.",
                    f"Reply {j}: let me check card {i}-{j} for you.",
                )
                for j in range(turns)
            ),
        )
        for i in range(n)
    ]


def gather_overrides(server, tmp_path: Path, *extra: str) -> list[str]:
    """`gather`'s keys for TMP_PATH/conversations.jsonl -> TMP_PATH/out, judged by the fake server as a vLLM
    judge with fast retries, without a progress bar; `extra` keys after them (a later key wins)."""
    return [
        f"conversations={tmp_path / 'conversations.jsonl'}",
        f"out={tmp_path / 'out'}",
        "judge=vllm",
        f"judge.base_url={server.base_url}",
        "judge.model=fake",
        "judge.backoff=0.01",
        "progress=false",
        *extra,
    ]


@pytest.fixture
def conversations():
    return make_conversations(2)
