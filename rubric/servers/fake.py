"""A local judge speaking the OpenAI protocol on 127.0.0.1: for trying role-rubric without an API key,
for the README's worked example and for the tests (with injectable faults).

    role-rubric serve-fake-judge            # prints its base URL; then gather with judge=fake
    python -m rubric.servers.fake --port 0   # the same, on a free port

It answers /v1/chat/completions and /v1/completions the way an LLM judge would: the first token's top
logprobs spread over the option codes it finds in the prompt ("... option code (1, 2, 3 or 4) ..."), with
a distribution fixed by a hash of the prompt, so every run sees the same answers. A chat request that is
no judge request (no option codes, no conversation under review) is answered as a chatbot would be, with a
reply fixed by a hash of the conversation (rubric/servers/fake_chatbot.py): the tests' instrumented chatbot
talks to it, on /v1/chat/completions or on the Responses API's /v1/responses (non-streaming; it keeps each
response's conversation for `previous_response_id`). It reads nothing of the
conversation's meaning: its answers are deterministic noise, so a calibrator trained on them learns
nothing true about your chatbot. Use it to check plumbing, never to measure adherence. It also serves the
OpenAI Batch API (files and batches, rubric/servers/fake_batch.py) for `gather mode=batch`.

Faults are consumed in arrival order from `server.faults`; `server.modes` holds persistent behaviours.
Faults: "429" (with Retry-After), "500", "timeout" (sleeps past any sane client timeout), "malformed"
(200 with a broken JSON body), "no_logprobs", "missing_options" (only one option in the top-k),
"no_option" (top-k of "Okay"-like tokens only), "slow" (sleeps `slow_s`).
Modes: "reject_logprobs" (400 whenever logprobs are requested, like providers without them), "no_logprobs",
"ignore_n" (one choice whatever n asks for), "no_option" (every answer lacks an option token), "bad_key"
(401 for everything), "tools" (a chatbot request that offers tools and ends with the user's message gets
a call to the first tool, as an agent's first step; the request carrying the tool's result gets the answer). `server.fail_when = "text"`: HTTP 500 for every request whose prompt contains it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import os
import re
import sys
import threading
from collections import Counter, deque
from typing import Any

from rubric.servers.fake_chatbot import chatbot_completion, chatbot_response, text_of, usage

_CODES_RE = re.compile(r"option code \(([^)]*)\)")
_JUDGE_CONTEXT = "</role>\n<conversation>"  # every judge request carries it (rubric/judge/prompts.py render_context)


def codes_in(prompt: str) -> list[str]:
    """The option codes a rendered prompt asks for, e.g. ['1', '2', '3', '4']."""
    m = _CODES_RE.findall(prompt)
    if not m:
        return []
    return [c.strip() for c in re.split(r",| or ", m[-1]) if c.strip()]


def judge_distribution(prompt: str, codes: list[str]) -> list[float]:
    """A fixed, prompt-dependent distribution over the codes (what this fake judge believes)."""
    digest = hashlib.sha256(prompt.encode()).digest()
    weights = [1.0 + digest[i] / 32.0 for i in range(len(codes))]
    weights[digest[-1] % len(codes)] *= 4  # a clear favourite, like a real judge
    total = sum(weights)
    return [w / total for w in weights]


class FakeOpenAI:
    """Start with `with FakeOpenAI(latency=0.05) as server: server.base_url`."""

    def __init__(
        self,
        *,
        latency: float = 0.0,
        slow_s: float = 0.3,
        timeout_s: float = 5.0,
        retry_after: str = "0.2",
        ssl_context: Any = None,
    ):
        self.ssl_context = ssl_context  # an ssl.SSLContext: serve HTTPS
        self.latency = latency
        self.slow_s = slow_s
        self.timeout_s = timeout_s
        self.retry_after = retry_after
        self.faults: deque[str] = deque()
        self.modes: set[str] = set()
        self.fail_when: str | None = None
        self.requests = 0
        self.answered: Counter[int] = Counter()  # HTTP status of each reply -> count
        self.bodies: list[dict[str, Any]] = []
        self.keep_bodies = False
        self.last_headers: dict[str, str] = {}  # of the latest request, names in lower case
        self.stored_responses: dict[str, list[dict[str, Any]]] = {}  # Responses API: id -> its conversation
        self._lock = threading.Lock()
        from rubric.servers.fake_batch import FakeBatchAPI

        self.batch_api = FakeBatchAPI(self)  # /v1/files and /v1/batches
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port = 0  # before `with`: the port to listen on (0: a free one); after: the one it listens on

    # lifecycle -------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeOpenAI:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _run(self, ready: threading.Event) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.port, backlog=512, ssl=self.ssl_context)
        )
        self.port = server.sockets[0].getsockname()[1]
        ready.set()
        self._loop.run_forever()
        server.close()
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def serve_forever(self, port: int = 0, *, announce: bool = False, sock: Any = None) -> None:
        """Run on the current loop (standalone use); prints the port, or a sentence with the base URL.
        sock: a socket already listening (`serve-fake-judge background=true` binds it before detaching)."""
        if sock is not None:
            server = await asyncio.start_server(self._handle, sock=sock, backlog=1024)
        else:
            server = await asyncio.start_server(self._handle, "127.0.0.1", port, backlog=1024)
        self.port = server.sockets[0].getsockname()[1]
        if announce:
            print(
                f"fake judge (OpenAI protocol, answers are deterministic noise) at {self.base_url}"
                " -- gather with judge=fake" + ("" if self.port == 8765 else f" judge.base_url={self.base_url}"),
                flush=True,
            )
        elif sock is None:
            print(self.port, flush=True)
        async with server:
            await server.serve_forever()

    # HTTP ------------------------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.strip().lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:] if ":" in h)}
                self.last_headers = headers
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if path.startswith(("/v1/files", "/v1/batches")):  # rubric/servers/fake_batch.py
                    status, extra, payload = self.batch_api.respond(method, path, headers, body)
                else:
                    status, extra, payload = await self._respond(path, body)
                out = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                hdrs = "".join(f"{k}: {v}\r\n" for k, v in extra.items())
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(out)}\r\n{hdrs}\r\n".encode()
                    + out
                )
                await writer.drain()
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
            IndexError,
            ValueError,
        ):
            pass
        finally:
            writer.close()

    async def _respond(self, path: str, raw: bytes) -> tuple[int, dict[str, str], Any]:
        body = json.loads(raw or b"{}")
        with self._lock:
            self.requests += 1
            fault = self.faults.popleft() if self.faults else None
            if self.keep_bodies:
                self.bodies.append(body)
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault == "429":
            return self._count(429, {"retry-after": self.retry_after}, _error("rate limited", "rate_limit_exceeded"))
        if fault == "timeout":
            await asyncio.sleep(self.timeout_s)
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        status, payload = self.answer(path, body, fault)
        return self._count(status, {}, payload)

    def answer(self, path: str, body: dict[str, Any], fault: str | None) -> tuple[int, Any]:
        """The status and body for one completion request: what an online request gets after the
        transport faults (429, timeout, slow), and what one line of a batch gets (rubric/servers/fake_batch.py)."""
        if "bad_key" in self.modes:
            return 401, _error("Incorrect API key provided", "invalid_api_key")
        if fault == "500" or (self.fail_when and self.fail_when in json.dumps(body)):
            return 500, _error("internal error", "server_error")
        if fault == "malformed":
            return 200, b'{"id": "x", "choices": [{"index": 0, "mess'
        if body.get("logprobs") and "reject_logprobs" in self.modes:
            return 400, _error("logprobs are not supported by this model", "invalid_request_error")
        if path.endswith("/chat/completions"):
            prompt = "\n".join(text_of(m.get("content", "")) for m in body.get("messages", []))
            if not codes_in(prompt) and _JUDGE_CONTEXT not in prompt:
                return 200, chatbot_completion(body, prompt, tools="tools" in self.modes)
            return 200, self._chat(body, prompt, fault)
        if path.endswith("/responses"):  # the Responses API: a chatbot's request (judges use chat completions)
            with self._lock:
                return 200, chatbot_response(body, self.stored_responses, tools="tools" in self.modes)
        if path.endswith("/completions"):
            return 200, self._completion(body, body.get("prompt", ""), fault)
        return 404, _error("not found", "not_found")

    def _count(self, status: int, extra: dict[str, str], payload: Any) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.answered[status] += 1
        return status, extra, payload

    # model behaviour -------------------------------------------------------------------------------
    def _top(self, prompt: str, fault: str | None, k: int) -> list[tuple[str, float]]:
        codes = codes_in(prompt)
        if not codes or fault == "no_option" or "no_option" in self.modes:
            return [("Okay", math.log(0.6)), ("Sure", math.log(0.3)), ("I", math.log(0.1))][:k]
        probs = judge_distribution(prompt, codes)
        if fault == "missing_options":
            best = max(range(len(codes)), key=probs.__getitem__)
            return [(codes[best], math.log(0.7)), ("Okay", math.log(0.2))][:k]
        cands = [(" " + c, math.log(0.6 * p)) for c, p in zip(codes, probs, strict=True)]
        cands += [(c, math.log(0.3 * p)) for c, p in zip(codes, probs, strict=True)]
        cands.append(("Okay", math.log(0.1)))
        return sorted(cands, key=lambda t: -t[1])[:k]

    def _samples(self, prompt: str, n: int) -> list[str]:
        codes = codes_in(prompt)
        if not codes:
            return ["Okay"] * n
        probs, out, acc = judge_distribution(prompt, codes), [], 0.0
        cdf = [acc := acc + p for p in probs]
        for i in range(n):  # deterministic quantiles instead of random draws
            q = (i + 0.5) / n
            out.append(codes[next(j for j, c in enumerate(cdf) if q <= c + 1e-12)])
        return out

    def _text(self, body: dict[str, Any], prompt: str, fault: str | None) -> tuple[str, list[tuple[str, float]]]:
        top = self._top(prompt, fault, 20)
        if (body.get("max_tokens") or 1) > 1 and not codes_in(prompt):
            return "The reply stays within the role and offers a next step.", top
        return top[0][0], top

    def _chat(self, body: dict[str, Any], prompt: str, fault: str | None) -> dict[str, Any]:
        n = 1 if "ignore_n" in self.modes else int(body.get("n") or 1)
        k = int(body.get("top_logprobs") or 0)
        want_logprobs = bool(body.get("logprobs")) and fault != "no_logprobs" and "no_logprobs" not in self.modes
        text, top = self._text(body, prompt, fault)
        texts = self._samples(prompt, n) if n > 1 else [text]
        choices = []
        for i, t in enumerate(texts):
            choice: dict[str, Any] = {
                "index": i,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": t},
            }
            if want_logprobs:
                alts = [{"token": tok, "logprob": lp, "bytes": None} for tok, lp in top[: max(k, 1)]]
                choice["logprobs"] = {
                    "content": [{"token": t, "logprob": top[0][1], "bytes": None, "top_logprobs": alts}]
                }
            else:
                choice["logprobs"] = None
            choices.append(choice)
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": choices,
            "usage": usage(prompt, n),
        }

    def _completion(self, body: dict[str, Any], prompt: str, fault: str | None) -> dict[str, Any]:
        k = int(body.get("logprobs") or 0)
        text, top = self._text(body, prompt, fault)
        logprobs = None
        if k and fault != "no_logprobs" and "no_logprobs" not in self.modes:
            logprobs = {
                "tokens": [text],
                "token_logprobs": [top[0][1]],
                "top_logprobs": [dict(top[:k])],
                "text_offset": [0],
            }
        return {
            "id": "cmpl-fake",
            "object": "text_completion",
            "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "text": text, "logprobs": logprobs, "finish_reason": "length"}],
            "usage": usage(prompt, 1),
        }


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code, "param": None}}


def run_serve(port: int = 8765, latency: float = 0.0, background: bool = False) -> None:
    """`role-rubric serve-fake-judge [port=8765] [latency=0] [background=false]`: serve until interrupted.

    The port is bound here, in the foreground, so a port already taken (by another user's judge) is one
    line and exit 2, never a server that died unseen behind `&` while the gather talks to someone else's.
    background=true then hands the listening socket to a detached process and returns: stdout is the base
    URL alone (for `JUDGE=$(role-rubric serve-fake-judge port=0 background=true)`), stderr says how to stop it.
    """
    import socket

    from rubric.errors import InputError

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio does; a live listener still refuses
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        raise InputError(
            f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}): another judge (or program) has it.",
            fix="pass port=0 for a free port (then set judge.base_url to the URL it prints).",
        ) from None
    if not background:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(FakeOpenAI(latency=latency).serve_forever(announce=True, sock=sock))
        return
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    pid = _detach(sock, latency)
    print(url, flush=True)
    print(
        f"fake judge (OpenAI protocol, answers are deterministic noise) at {url}, running in the background "
        f"as process {pid}: gather with judge=fake judge.base_url={url}; stop it with `kill {pid}`",
        file=sys.stderr,
        flush=True,
    )


def _detach(sock: Any, latency: float) -> int:
    """Serve `sock` (listening already: a client connecting now waits in its backlog) from a new process
    in its own session, with no terminal output, that outlives this one. Returns its pid."""
    import subprocess

    fd = sock.fileno()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rubric.servers.fake", "--fd", str(fd), "--latency", str(latency)],
        pass_fds=(fd,),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    )
    sock.close()
    return proc.pid


def main() -> None:
    parser = argparse.ArgumentParser(description="A local OpenAI-protocol judge (role-rubric's fake judge).")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds before each answer")
    parser.add_argument("--port", type=int, default=0, help="0 = a free port (printed)")
    parser.add_argument("--announce", action="store_true", help="print the base URL in a sentence")
    parser.add_argument("--fd", type=int, default=None, help="serve this listening socket (background=true)")
    args = parser.parse_args()
    sock = None
    if args.fd is not None:
        import socket

        sock = socket.socket(fileno=args.fd)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(FakeOpenAI(latency=args.latency).serve_forever(args.port, announce=args.announce, sock=sock))


if __name__ == "__main__":
    main()
