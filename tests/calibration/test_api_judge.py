"""RoleAdherence(judge=...) takes a name, a dict of judge settings (with or without a name) or a
judge_config(...) result, and asks the judge those settings name: here the fake judge on a port of its own
(never the default 8765), so a setting dropped on the way would send nothing to it."""

from __future__ import annotations

import pytest

from calibration.api import RoleAdherence
from rubric import judge_config
from rubric.errors import InputError
from rubric.servers.fake import FakeOpenAI

CONVERSATION = {
    "conversation_id": "c1",
    "chatbot_role": "You are Nova, Brightpay's support assistant. Scope: Brightpay cards and payments.",
    "turns": [{"user": "Why was my card declined?", "assistant": "Let me check the payment with you."}],
}


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as fake:
        assert fake.port not in (0, 8765)
        yield fake


@pytest.mark.parametrize("form", ["dict with name", "judge_config", "dict of settings"])
def test_every_form_of_judge_reaches_the_judge_it_names(server, form):
    url = server.base_url
    judge = {
        "dict with name": {"name": "fake", "base_url": url},
        "judge_config": judge_config("fake", base_url=url),
        "dict of settings": {
            "backend": "chat",
            "model": "fake-judge",
            "base_url": url,
            "api_key": "x",
            "base_url_env": None,
            "api_key_env": None,
        },
    }[form]
    metric = RoleAdherence(judge=judge)
    assert metric.judge.model == "fake-judge" and metric.judge.base_url == url
    before = server.requests
    result = metric.measure(CONVERSATION)
    assert server.requests > before  # asked of this server, not of gpt-4o-mini
    assert 0.0 <= result.score <= 1.0 and len(result.turns) == 1


def test_the_three_forms_give_the_same_judge(server):
    url = server.base_url
    assert judge_config({"name": "fake", "base_url": url}) == judge_config("fake", base_url=url)
    assert RoleAdherence(judge={"name": "fake", "base_url": url}).judge == judge_config("fake", base_url=url)
    assert judge_config({"name": "vllm", "model": "m"}).base_url == judge_config("vllm").base_url  # unchanged keys


def test_a_wrong_name_or_key_is_refused_by_name():
    with pytest.raises(InputError, match="unknown judge \"name\" 'fakee'") as bad:
        RoleAdherence(judge={"name": "fakee", "base_url": "http://127.0.0.1:9/v1"})
    assert "fake" in bad.value.fix
    with pytest.raises(InputError, match="unknown judge setting"):
        RoleAdherence(judge={"name": "fake", "base_ulr": "http://127.0.0.1:9/v1"})


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: RoleAdherence("no-such-model", judge=42), r"^judge=42 is not a judge"),
        (lambda: RoleAdherence(judge=["openai"]), r"^judge=\['openai'\] is not a judge"),
        # a judge_config(...) result with overrides is checked at once, as a name with them is
        (
            lambda: judge_config(judge_config("openai"), base_url="localhost:8000/v1"),
            r"^judge\.base_url='localhost:8000/v1' is not an http\(s\) URL",
        ),
        (lambda: judge_config(judge_config("vllm"), timeout=-1), r"^judge\.timeout=-1 is out of range"),
        (lambda: judge_config(judge_config("openai"), base_ulr="http://x/v1"), r"unknown judge setting\(s\): base_ulr"),
    ],
)
def test_bad_python_arguments_name_the_argument_before_any_request(call, match):
    """A ValueError (InputError) a caller can catch, naming the argument: never a TypeError from inside, nor
    91 s of retries against an address that could never work."""
    with pytest.raises(InputError, match=match):
        call()


@pytest.mark.parametrize("threshold", [None, "high", float("nan"), 1.5])
def test_a_deepeval_metric_names_a_bad_threshold(threshold):
    pytest.importorskip("deepeval", reason="deepeval is not installed: pip install 'role-rubric[deepeval]'")
    from calibration.connectors.deepeval.metric import RoleRubricMetric

    with pytest.raises(InputError, match=r"^threshold=.* Fix: set threshold to a number >= 0 and <= 1"):
        RoleRubricMetric(threshold=threshold)
