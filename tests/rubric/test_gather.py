"""The gather stage against a real HTTP server speaking the OpenAI protocol, with injected faults."""

from __future__ import annotations

import hashlib
import json
import math

import pytest
from conftest import make_conversations
from openai_server import codes_in, judge_distribution

from rubric.judge.extraction import with_floor
from rubric.judge.gather import gather
from rubric.judge.http import HTTP_CLIENTS
from rubric.judge.outputs import LLM_COLUMNS
from rubric.notices import cli_notices

N_PAIRS = 2 * 3 * 5  # conversations x turns x questions


@pytest.fixture(params=HTTP_CLIENTS)
def http_client(request):
    """Every test here runs with each way of sending requests: they must behave the same."""
    return request.param


def expected_probs(prompt_text: str) -> list[float]:
    """What the fake judge's top-k implies after extraction (the 'Okay' mass removed)."""
    return list(with_floor(judge_distribution(prompt_text, codes_in(prompt_text)), 1e-4))


def check_valid(llm):
    assert list(llm.columns) == LLM_COLUMNS
    sums = llm.groupby(["conversation_id", "turn", "question_id"])["prob"].sum()
    assert sums.to_numpy() == pytest.approx(1.0)
    assert (llm["prob"] > 0).all()


def test_clean_run_matches_the_judge_and_covers_every_pair(server, judge, conversations, rubric):
    server.keep_bodies = True
    res = gather(conversations, rubric, judge)
    llm = res.llm
    check_valid(llm)
    assert len(llm) == N_PAIRS * 4 and set(llm["source"]) == {"logprobs"}
    assert llm["coverage"].to_numpy() == pytest.approx(0.9)  # 0.1 of the mass is on "Okay"
    assert list(llm["option"].unique()) == ["1", "2", "3", "4"]
    assert sorted(llm["turn"].unique()) == [0, 1, 2]
    for body in server.bodies[:5]:
        assert body["max_tokens"] == 3 and body["logprobs"] is True and body["top_logprobs"] == 20
        assert body["temperature"] == 0.0
        prompt = "\n".join(m["content"] for m in body["messages"])
        h = hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:16]
        rows = llm[llm["prompt_hash"] == h]
        assert rows["prob"].tolist() == pytest.approx(expected_probs(prompt), rel=1e-6)
    s = res.summary
    assert (s.pairs, s.answered, s.cached, s.failures, s.http_requests) == (N_PAIRS, N_PAIRS, 0, 0, N_PAIRS)
    assert s.prompt_tokens > 0 and s.completion_tokens == N_PAIRS


def test_rerun_from_cache_makes_zero_requests(server, judge, conversations, rubric, tmp_path):
    first = gather(conversations, rubric, judge, cache=tmp_path / "c.sqlite")
    before = server.requests
    again = gather(conversations, rubric, judge, cache=tmp_path / "c.sqlite")
    assert server.requests == before
    assert again.summary.cached == N_PAIRS and again.summary.http_requests == 0
    assert again.llm.equals(first.llm)


@pytest.mark.parametrize("fault", ["429", "500", "timeout", "malformed", "no_logprobs", "slow"])
def test_transient_faults_end_in_the_right_distribution(server, judge, conversations, rubric, fault):
    clean = gather(conversations, rubric, judge).llm
    server.faults.extend([fault] * 3)
    res = gather(conversations, rubric, judge)
    check_valid(res.llm)
    assert res.llm.equals(clean)
    assert res.summary.failures == 0
    if fault != "slow":
        assert res.summary.retries >= 3 and res.summary.http_requests >= N_PAIRS + 3


def test_retry_after_is_honoured(server, judge, rubric):
    server.retry_after = "0.3"
    server.faults.append("429")
    judge = {**judge, "backoff": 0.0, "concurrency": 1}
    res = gather(make_conversations(1, 1)[:1], rubric.with_target(None), judge)
    assert res.summary.retries == 1
    assert res.summary.wall_s >= 0.3


def test_persistent_failures_are_counted_and_left_out(server, judge, conversations, rubric, tmp_path):
    server.faults.extend(["500"] * 4)  # more than max_retries + 1 for whichever pair gets them first
    judge = {**judge, "concurrency": 1}
    res = gather(conversations, rubric, judge, cache=tmp_path / "c.sqlite")
    assert res.summary.failures == 1 and len(res.failures) == 1
    assert "HTTP 500" in res.failures["error"].iloc[0]
    # what the failed pair spent is counted: 1 + max_retries requests
    assert res.summary.http_requests == N_PAIRS - 1 + 4 and res.summary.retries == 3
    assert len(res.llm) == (N_PAIRS - 1) * 4  # never a made-up distribution for it
    check_valid(res.llm)
    # the failed pair was not cached: a rerun asks for it, and only it
    before = server.requests
    again = gather(conversations, rubric, judge, cache=tmp_path / "c.sqlite")
    assert server.requests - before == 1 and again.summary.failures == 0 and len(again.llm) == N_PAIRS * 4


def test_missing_options_get_the_floor(server, judge, conversations, rubric):
    server.faults.append("missing_options")
    res = gather(conversations, rubric, {**judge, "concurrency": 1})
    first = res.llm.iloc[:4]
    assert first["coverage"].iloc[0] == pytest.approx(0.7)
    assert sorted(first["prob"])[-1] > 0.99 and (first["prob"] > 0).all()
    assert first["prob"].sum() == pytest.approx(1.0)


def test_no_option_token_is_re_asked_then_a_flagged_fallback(server, judge, conversations, rubric):
    server.keep_bodies = True
    server.faults.append("no_option")
    res = gather(conversations, rubric, {**judge, "concurrency": 1})
    assert res.summary.fallbacks == 0 and res.summary.http_requests == N_PAIRS + 1
    assert "Reply with exactly one option code" in server.bodies[1]["messages"][-1]["content"]
    server.modes.add("no_option")  # an instruction-tuned model that always starts with "Okay"
    res = gather(conversations, rubric, {**judge, "concurrency": 1})
    assert res.summary.fallbacks == N_PAIRS and set(res.llm["source"]) == {"fallback"}
    assert (res.llm["coverage"] == 0).all()
    assert res.llm["prob"].to_numpy() == pytest.approx(0.25)


def test_rejected_logprobs_switch_to_sampling_once_and_loudly(server, judge, conversations, rubric, capsys):
    server.modes.update({"reject_logprobs", "ignore_n"})
    with cli_notices():  # the warning on stderr, as the command line prints it
        res = gather(conversations, rubric, judge)
    err = capsys.readouterr().err
    assert err.count("WARNING") == 1 and "samples" in err
    assert set(res.llm["source"]) == {"sampled"}
    check_valid(res.llm)
    # ignore_n: one answer per request, so each pair needed `samples` requests
    assert res.summary.http_requests >= N_PAIRS * 8


def test_sampling_estimates_the_judge(server, judge, rubric):
    server.keep_bodies = True
    res = gather(make_conversations(1, 1), rubric, {**judge, "answer_mode": "sampled", "samples": 50})
    body = server.bodies[0]
    assert body["n"] == 50 and body["temperature"] == 1.0 and "logprobs" not in body
    prompt = "\n".join(m["content"] for m in body["messages"])
    truth = judge_distribution(prompt, codes_in(prompt))
    assert res.llm["prob"].iloc[:4].to_numpy() == pytest.approx(truth, abs=0.03)


def test_binary_mode_puts_the_mass_on_the_answer(server, judge, rubric):
    server.keep_bodies = True
    res = gather(make_conversations(1, 1), rubric, {**judge, "output_mode": "binary"})
    assert server.bodies[0]["temperature"] == 0.0 and "logprobs" not in server.bodies[0]
    assert set(res.llm["source"]) == {"binary"}
    top = res.llm.groupby("question_id")["prob"].max()
    assert (top > 0.99).all()


def test_completions_endpoint(server, judge, conversations, rubric):
    server.keep_bodies = True
    res = gather(conversations, rubric, {**judge, "backend": "completions", "top_logprobs": 5})
    assert "prompt" in server.bodies[0] and server.bodies[0]["logprobs"] == 5
    check_valid(res.llm)
    assert set(res.llm["source"]) == {"logprobs"}


def test_conversation_granularity_and_reasons(server, judge, conversations, rubric):
    res = gather(conversations, rubric, judge, granularity="conversation", include_reason=True)
    assert res.llm["turn"].isna().all() and len(res.llm) == 2 * 5 * 4
    assert len(res.reasons) == 2 and res.reasons["reason"].str.len().min() > 10


def test_cost_is_reported_when_prices_are_set(server, judge, conversations, rubric, monkeypatch):
    priced = {**judge, "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0}
    assert gather(conversations, rubric, priced).summary.cost_usd is None  # a loopback server costs nothing
    monkeypatch.setattr("rubric.judge.outputs.is_loopback", lambda url: False)  # as if it were a hosted API
    s = gather(conversations, rubric, priced).summary
    assert s.cost_usd == pytest.approx((s.prompt_tokens + 2 * s.completion_tokens) / 1e6)
    assert math.isfinite(s.cost_usd)


def test_endpoint_that_never_returns_logprobs_switches_to_sampling(server, judge, conversations, rubric, capsys):
    server.modes.add("no_logprobs")
    with cli_notices():
        res = gather(conversations, rubric, {**judge, "concurrency": 1})
    assert capsys.readouterr().err.count("WARNING") == 1
    assert set(res.llm["source"]) == {"sampled"} and res.summary.failures == 0
    check_valid(res.llm)


def test_explicit_logprobs_mode_refuses_to_fall_back(server, judge, conversations, rubric):
    from rubric.errors import InputError

    server.modes.add("reject_logprobs")
    with pytest.raises(InputError, match="answer_mode"):
        gather(conversations, rubric, {**judge, "answer_mode": "logprobs"})


def test_missing_key_is_one_setup_error(monkeypatch, conversations, rubric):
    from rubric.errors import InputError

    monkeypatch.delenv("RR_TEST_KEY", raising=False)
    with pytest.raises(InputError, match="RR_TEST_KEY"):
        gather(conversations, rubric, {"api_key_env": "RR_TEST_KEY", "base_url": "http://127.0.0.1:9/v1"})


def test_judge_config_by_name_with_overrides():
    from rubric import judge_config
    from rubric.errors import InputError

    cfg = judge_config("vllm", model="m", concurrency=3)
    assert (cfg.backend, cfg.model, cfg.concurrency, cfg.api_key) == ("chat", "m", 3, "EMPTY")
    assert judge_config("embedding").backend == "embedding"
    with pytest.raises(InputError, match="unknown judge"):
        judge_config("nope")
    with pytest.raises(InputError, match="unknown judge setting"):
        judge_config({"modle": "x"})


def test_requests_carry_the_key_and_the_clients_headers(server, judge, conversations, rubric):
    gather(conversations, rubric, {**judge, "api_key": "sk-test-123"})
    sent = server.last_headers
    assert sent["authorization"] == "Bearer sk-test-123"
    assert sent["content-type"] == "application/json"
    assert sent["user-agent"].startswith("AsyncOpenAI/Python")  # the openai client's conventions


@pytest.mark.parametrize("http_client", ["aiohttp", "openai"])
def test_an_address_where_nothing_listens_is_one_line_within_seconds(
    judge, conversations, rubric, monkeypatch, http_client
):
    """Not minutes of backoff ending in a failure per pair: a refused connection before the endpoint ever
    answered is retried every half second for REFUSED_WAIT_S (a judge started a moment earlier gets that
    long), then one line naming the URL."""
    import socket
    import time

    from rubric.errors import InputError
    from rubric.judge import backends

    monkeypatch.setattr(backends, "REFUSED_WAIT_S", 0.5)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    with pytest.raises(InputError, match=rf"connection refused at {url}: nothing listens there") as info:
        gather(conversations, rubric, {**judge, "base_url": url, "http_client": http_client})
    assert time.monotonic() - started < 5 and "judge.base_url" in info.value.one_line()


def test_a_judge_that_starts_late_is_waited_for(judge, conversations, rubric, monkeypatch):
    """The README starts the fake judge in the background and gathers at once: a refusal while the server
    starts is waited out, not counted as failed pairs."""
    import threading

    from rubric.servers.fake import FakeOpenAI

    server = FakeOpenAI()
    server.port = _free_port()
    timer = threading.Timer(1.0, server.__enter__)
    timer.start()
    try:
        res = gather(conversations, rubric, {**judge, "base_url": server.base_url})
    finally:
        timer.join()
        server.__exit__(None, None, None)
    assert res.summary.failures == 0 and len(res.llm) > 0


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unknown_http_client_is_one_setup_error(judge, conversations, rubric):
    from rubric.errors import InputError

    with pytest.raises(InputError, match="http_client"):
        gather(conversations, rubric, {**judge, "http_client": "curl"})


@pytest.mark.parametrize(
    ("env", "url", "expected"),
    [
        ({}, "https://api.example.com/v1", None),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "https://api.example.com/v1", "http://proxy:3128"),
        ({"HTTPS_PROXY": "http://proxy:3128"}, "http://127.0.0.1:8000/v1", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "internal.lan"}, "http://vllm.internal.lan/v1", None),
        ({"HTTP_PROXY": "http://p:1", "NO_PROXY": "internal.lan"}, "http://other.org/v1", "http://p:1"),
    ],
)
def test_proxy_comes_from_the_environment_once(monkeypatch, env, url, expected):
    from rubric.judge.http import env_proxy

    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert env_proxy(url) == expected


def test_a_cache_that_cannot_be_written_stops_the_run(server, judge, rubric, tmp_path):
    """Commits are batched per event-loop iteration; a failing one must still stop the gather, not
    vanish into the event loop's log while requests go on."""
    import sqlite3

    from rubric.judge.cache import RequestCache

    class FullDisk(RequestCache):
        def put_many(self, rows):
            raise sqlite3.OperationalError("database or disk is full")

    store = FullDisk(tmp_path / "c.sqlite")
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        gather(make_conversations(20), rubric, {**judge, "concurrency": 2}, cache=store)
    assert server.requests < 20 * 3 * 5  # stopped early
    store.close()


def test_requests_start_before_every_prompt_is_prepared(monkeypatch, rubric):
    """In one process, prompts are rendered, hashed and looked up chunk by chunk while the first
    requests are already out."""
    import asyncio
    import importlib

    from rubric.judge.backends import Answer
    from rubric.judge.extraction import uniform_fallback

    gathering = importlib.import_module("rubric.judge.gather")  # the module; rubric.judge.gather is the function
    events: list[str] = []

    class RecordingJudge:
        async def judge(self, prompt):
            events.append("request")
            await asyncio.sleep(0)
            return Answer(uniform_fallback(len(prompt.codes)))

    real_chunks = gathering._prompt_chunks

    def chunks(*args, **kwargs):
        for chunk in real_chunks(*args, size=2):
            events.append("chunk")
            yield chunk

    monkeypatch.setattr(gathering, "_prompt_chunks", chunks)
    res = gather(make_conversations(4), rubric, {"api_key": "EMPTY", "concurrency": 3}, backend=RecordingJudge())
    assert events.count("chunk") == 6 and events.count("request") == 4 * 3 * 5
    assert events.index("request") < len(events) - events[::-1].index("chunk") - 1  # before the last chunk
    assert res.summary.answered == 60 and res.summary.processes == 1


def test_a_rerun_from_the_cache_builds_no_client(server, judge, conversations, rubric, tmp_path, monkeypatch):
    """Everything cached: no judge client is made, so not even a key is needed."""
    first = gather(conversations, rubric, judge, cache=tmp_path / "c.sqlite")
    monkeypatch.delenv("RR_NO_KEY", raising=False)
    keyless = {**judge, "api_key": None, "api_key_env": "RR_NO_KEY"}
    again = gather(conversations, rubric, keyless, cache=tmp_path / "c.sqlite")
    assert again.llm.equals(first.llm) and again.summary.processes == 0
    with pytest.raises(Exception, match="RR_NO_KEY"):  # the key is needed as soon as one pair is missing
        gather(make_conversations(3), rubric, keyless, cache=tmp_path / "c.sqlite")


def test_https_trusts_what_the_openai_client_trusts():
    import ssl

    from rubric.judge.http import ssl_context_for

    assert ssl_context_for("http://127.0.0.1:8000/v1") is True
    ctx = ssl_context_for("https://api.openai.com/v1")
    assert isinstance(ctx, ssl.SSLContext) and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.cert_store_stats()["x509_ca"] > 0  # a CA bundle is loaded


def test_https_endpoint_with_a_private_ca(judge, conversations, rubric, tmp_path, monkeypatch):
    """Over TLS, with the certificate checked: trusted through SSL_CERT_FILE (as for the openai client),
    refused (a counted failure, not a crash) without it."""
    import ssl

    import trustme
    from openai_server import FakeOpenAI

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with FakeOpenAI(ssl_context=server_ctx) as secure:
        https_judge = {**judge, "base_url": secure.base_url, "max_retries": 0}
        assert https_judge["base_url"].startswith("https://")
        monkeypatch.delenv("SSL_CERT_FILE", raising=False)
        untrusted = gather(conversations, rubric, https_judge)
        assert untrusted.summary.failures == N_PAIRS and secure.requests == 0
        monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
        trusted = gather(conversations, rubric, https_judge)
        assert trusted.summary.failures == 0 and secure.requests == N_PAIRS
        check_valid(trusted.llm)
