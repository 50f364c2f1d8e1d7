"""What a real model does that the plain fake judge does not: a space before the digit (" " then "3"),
an empty reply (end-of-text sampled first), a chat template without a system role; and every request
stating its sampling parameters. Against the fake OpenAI-protocol server, taught these habits."""

from __future__ import annotations

import math

import pytest
from conftest import make_conversations
from openai_server import FakeOpenAI, codes_in, judge_distribution

from rubric.judge.extraction import AnswerStep, TokenLogprob, from_answer_steps, from_samples, with_floor
from rubric.judge.gather import gather
from rubric.judge.prompts import SYSTEM
from rubric.notices import cli_notices

N_PAIRS = 2 * 3 * 5  # conversations x turns x questions


class RealisticServer(FakeOpenAI):
    """modes: "split" (a space first, then the digit: Gemma's " " + "3"); "empty" (every reply is empty,
    finish_reason stop, no logprobs). Fault "empty": one empty reply."""

    def _chat(self, body, prompt, fault):
        out = super()._chat(body, prompt, fault)
        return self._reshape(out, body, prompt, fault, chat=True)

    def _completion(self, body, prompt, fault):
        out = super()._completion(body, prompt, fault)
        return self._reshape(out, body, prompt, fault, chat=False)

    def _reshape(self, out, body, prompt, fault, *, chat):
        choice = out["choices"][0]
        codes = codes_in(prompt)
        if fault == "empty" or "empty" in self.modes:
            choice.update(finish_reason="stop", logprobs={"content": []} if chat else None)
            choice.update({"message": {"role": "assistant", "content": ""}} if chat else {"text": ""})
        elif "split" in self.modes and codes and body.get("logprobs"):
            probs = judge_distribution(prompt, codes)
            best = codes[max(range(len(codes)), key=probs.__getitem__)]
            first = [(" ", 0.8), ("\n", 0.1)] + [(" " + c, 0.1 * p) for c, p in zip(codes, probs, strict=True)]
            second = [(c, 0.9 * p) for c, p in zip(codes, probs, strict=True)] + [("Okay", 0.1)]
            steps = [((" ", 0.8), first), ((best, 0.9 * max(probs)), second)][: body["max_tokens"]]
            text = "".join(tok for (tok, _), _ in steps)
            if chat:
                choice["message"]["content"] = text
                choice["logprobs"] = {"content": [_chat_pos(s, top) for s, top in steps]}
            else:
                choice["text"] = text
                choice["logprobs"] = {
                    "tokens": [tok for (tok, _), _ in steps],
                    "token_logprobs": [math.log(p) for (_, p), _ in steps],
                    "top_logprobs": [{t: math.log(p) for t, p in top} for _, top in steps],
                }
        return out


def _chat_pos(sampled, top):
    alts = [{"token": t, "logprob": math.log(p), "bytes": None} for t, p in top]
    return {"token": sampled[0], "logprob": math.log(sampled[1]), "bytes": None, "top_logprobs": alts}


@pytest.fixture
def server():
    with RealisticServer(timeout_s=3.0) as srv:
        yield srv


@pytest.mark.parametrize("backend", ["chat", "completions"])
def test_a_space_before_the_digit_is_read_through(server, judge, conversations, rubric, backend):
    server.modes.add("split")
    server.keep_bodies = True
    res = gather(conversations, rubric, {**judge, "backend": backend})
    assert res.summary.fallbacks == 0 and set(res.llm["source"]) == {"logprobs"}
    # P(" 3" at once) + P(" ") * P("3" | " ") = 0.1 p + 0.8 * 0.9 p
    assert res.llm["coverage"].to_numpy() == pytest.approx(0.82)
    first = server.bodies[0]
    prompt = "\n".join(m["content"] for m in first["messages"]) if backend == "chat" else first["prompt"]
    expected = with_floor(judge_distribution(prompt, codes_in(prompt)), 1e-4)
    assert res.llm["prob"].iloc[:4].to_numpy() == pytest.approx(expected, rel=1e-6)


def test_one_answer_token_cannot_see_past_the_space(server, judge, conversations, rubric):
    server.modes.add("split")
    res = gather(conversations, rubric, {**judge, "answer_tokens": 1})
    assert res.llm["coverage"].to_numpy() == pytest.approx(0.1)  # only " 3"-style tokens at position 0


def test_an_empty_reply_is_re_asked_not_taken_for_missing_logprobs(server, judge, conversations, rubric, capsys):
    server.faults.append("empty")
    res = gather(conversations, rubric, {**judge, "concurrency": 1})
    assert res.summary.http_requests == N_PAIRS + 1 and res.summary.fallbacks == 0
    assert set(res.llm["source"]) == {"logprobs"}
    server.modes.add("empty")  # a model that always ends at once: fallbacks, never a switch to sampling
    with cli_notices():  # the command line would print the switch's warning on stderr
        res = gather(conversations, rubric, {**judge, "concurrency": 1, "answer_mode": "auto"})
    assert "WARNING" not in capsys.readouterr().err
    assert res.summary.fallbacks == N_PAIRS and res.summary.http_requests == 2 * N_PAIRS
    assert res.summary.warning is not None and "fallbacks" in res.summary.warning


def test_every_request_states_its_sampling_parameters(server, judge, rubric):
    server.keep_bodies = True
    extra = {"top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}
    convs = make_conversations(1, 1)
    gather(convs, rubric, {**judge, "extra_body": extra}, include_reason=True)
    gather(convs, rubric, {**judge, "extra_body": extra, "answer_mode": "sampled"})
    assert len(server.bodies) == 5 + 1 + 5
    for body in server.bodies:
        assert "temperature" in body and {k: body[k] for k in extra} == extra
    answers, reason, sampled = server.bodies[:5], server.bodies[5], server.bodies[6:]
    assert all(b["temperature"] == 0.0 and b["max_tokens"] == 3 and b["logprobs"] for b in answers)
    assert reason["temperature"] == 0.0 and reason["max_tokens"] == 120
    assert all(b["temperature"] == 1.0 for b in sampled)


def test_sampling_parameters_are_part_of_the_cache_key(server, judge, rubric, tmp_path):
    convs, cache = make_conversations(1, 1), tmp_path / "c.sqlite"
    gather(convs, rubric, judge, cache=cache)
    again = gather(convs, rubric, {**judge, "extra_body": {"top_k": 0}}, cache=cache)
    assert again.summary.cached == 0
    again = gather(convs, rubric, {**judge, "concurrency": 1, "timeout": 2.0}, cache=cache)
    assert again.summary.cached == 5


def test_without_a_system_role_the_guard_opens_the_user_message(server, judge, rubric):
    server.keep_bodies = True
    gather(make_conversations(1, 1), rubric.with_target(None), {**judge, "system_role": False})
    msgs = server.bodies[0]["messages"]
    assert [m["role"] for m in msgs] == ["user"]
    assert msgs[0]["content"].startswith(SYSTEM) and "<conversation>" in msgs[0]["content"]


def test_answer_steps_stop_at_the_first_word():
    lp = math.log
    ws = AnswerStep(TokenLogprob("\n", lp(0.5)), [TokenLogprob("\n", lp(0.5)), TokenLogprob("2", lp(0.2))])
    word = AnswerStep(TokenLogprob("The", lp(0.6)), [TokenLogprob("The", lp(0.6)), TokenLogprob("1", lp(0.2))])
    late = AnswerStep(TokenLogprob(" 3", lp(0.9)), [TokenLogprob(" 3", lp(0.9))])
    d = from_answer_steps([ws, word, late], ("1", "2", "3"), floor=0.0)
    assert d.coverage == pytest.approx(0.2 + 0.5 * 0.2)  # nothing after "The" counts
    assert d.probs == pytest.approx((1 / 3, 2 / 3, 0.0))
    assert from_answer_steps([word], ("2", "3")) is None


def test_samples_are_read_at_their_first_word():
    d = from_samples([" 3\n\nBecause", "\n2.", "Okay 3"], ("1", "2", "3"), floor=0.0)
    assert d.probs == pytest.approx((0.0, 0.5, 0.5)) and d.coverage == pytest.approx(2 / 3)
