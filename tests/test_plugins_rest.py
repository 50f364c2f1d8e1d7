"""The plug-in registry (rubric/plugins.py) and the one REST client (rubric/transport/rest.py), against a real
HTTP server on this machine."""

from __future__ import annotations

import contextlib
import json

import pytest

from rubric.errors import InputError
from rubric.plugins import Plugin, Registry
from rubric.transport.rest import HttpRefused, RestClient, opener_for
from tests.loopback import LoopbackServer, QuietHandler


def test_registry_loads_lazily_and_names_the_choices():
    registry: Registry = Registry("thing", [Plugin("a", "json", "loads"), Plugin("b", "no_such_module_xyz", "x")])
    assert registry.names() == ["a", "b"] and "a" in registry and "c" not in registry
    assert registry.load("a")("[1]") == [1]  # the module that does not exist was never imported
    with pytest.raises(InputError, match=r"no thing is named 'c' \(the names are: a, b\)"):
        registry.load("c")
    with pytest.raises(ValueError, match="registered twice"):
        Registry("thing", [Plugin("a", "json", "loads"), Plugin("a", "json", "dumps")])


def test_registry_checks_the_extra_before_importing(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "mlflow", None)  # stands for an absent package
    registry: Registry = Registry("target", [Plugin("mlflow", "mlflow", "MlflowClient", extra="mlflow")])
    with pytest.raises(InputError, match=r"publish target=mlflow needs the optional extra \[mlflow\]"):
        registry.load("mlflow", by="publish target=mlflow")


def _scripted(script, seen):
    """A handler answering each request with the next (status, body) of `script`, recording what it got."""

    class Handler(QuietHandler):
        def _answer(self):
            length = int(self.headers.get("Content-Length") or 0)
            seen.append((self.command, self.path, self.rfile.read(length), self.headers.get("Authorization")))
            status, body = script.pop(0) if script else (200, b"{}")
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

    return Handler


@pytest.fixture
def server():
    """start(*script): a real HTTP server on the loopback answering from the script; `.seen` what it got."""
    with contextlib.ExitStack() as stack:

        def start(*script):
            seen: list[tuple[str, str, bytes, str]] = []
            running = stack.enter_context(LoopbackServer(_scripted(list(script), seen)))
            running.seen = seen
            return running

        yield start


def _client(url, **kw):
    return RestClient(url, service="Thing", sleep=lambda s: None, **kw)


def test_get_sends_query_and_headers_and_answers_json(server):
    s = server((200, json.dumps({"ok": [1, 2]}).encode()))
    reply = _client(s.url + "/", headers={"Authorization": "Bearer k"}).get("/v1/x", {"id": ["a", "b"]}, what="x")
    assert reply == {"ok": [1, 2]}
    assert s.seen == [("GET", "/v1/x?id=a&id=b", b"", "Bearer k")]


def test_retries_a_get_on_a_server_error_but_never_a_post(server):
    s = server((502, b"bad gateway"), (200, b"[1]"))
    assert _client(s.url).get("/a", what="a") == [1] and len(s.seen) == 2
    s2 = server((500, b"boom"), (200, b"{}"))
    with pytest.raises(HttpRefused, match=r"Thing at http://127.0.0.1:\d+ refused b \(HTTP 500\): boom\.") as err:
        _client(s2.url).post("/b", {"n": 1}, what="b")
    assert err.value.status == 500 and len(s2.seen) == 1  # not applied twice


def test_a_post_is_retried_where_the_server_did_not_act(server):
    s = server((429, b""), (503, b""), (200, b'{"id": 7}'))
    assert _client(s.url).post("/t", {"n": 1}, what="t") == {"id": 7}
    assert [body for _, _, body, _ in s.seen] == [b'{"n": 1}'] * 3


def test_errors_are_one_line_naming_the_url_with_secrets_masked(server):
    s = server((401, json.dumps({"detail": "bad token sk-secret123456"}).encode()))
    with pytest.raises(HttpRefused) as err:
        _client(s.url, secrets=["sk-secret123456"]).get("/p", what="the project")
    assert "sk-secret123456" not in str(err.value) and err.value.status == 401 and "\n" not in str(err.value)
    s2 = server((200, b"<html>not json</html>"))
    with pytest.raises(InputError, match=r"/q did not answer the q as JSON; is it a Thing server\?"):
        _client(s2.url).get("/q", what="the q")
    s3 = server((404, b""))
    assert _client(s3.url).get("/r", what="r", none_if_missing=True) is None


def test_an_unreachable_server_is_one_line_with_the_fix():
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = _client(f"http://127.0.0.1:{port}", start_fix="start it.", retries=1)
    with pytest.raises(InputError, match=rf"cannot reach Thing at http://127.0.0.1:{port} .* Fix: start it\."):
        client.get("/", what="anything")


def test_proxies_apply_except_to_this_machine(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")

    def proxies(url):
        return [getattr(h, "proxies", None) for h in opener_for(url).handlers if hasattr(h, "proxies")]

    assert all(not p for p in proxies("http://localhost:6006")) and all(not p for p in proxies("http://127.0.0.1"))
    assert {"http": "http://proxy.example:3128"}.items() <= proxies("http://phoenix.example.com")[0].items()
