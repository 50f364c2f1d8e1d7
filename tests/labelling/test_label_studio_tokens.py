"""Label Studio's tokens against a server that speaks its token protocol over real HTTP (no patched client):
a personal access token (a JWT refresh token) is exchanged at /api/token/refresh for a short-lived access
token sent as Bearer, and exchanged again once when the server refuses an expired one; a legacy token goes
as `Token ...`. No form of either is ever printed or written, even where the server echoes it back or the
user passes the token itself as token_env=. (The real server checks the same in test_label_studio_server.py.)
"""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from calibration.cli import main
from calibration.labelling.items import dataset_conversations
from calibration.labelling.label_studio import make_tasks


def _jwt(kind: str, n: int) -> str:
    part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")  # noqa: E731
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part({'token_type': kind, 'jti': n})}.c2lnbmF0dXJlLXt{n}"


REFRESH = _jwt("refresh", 1)  # what Label Studio shows the user as their personal access token
LEGACY = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"


class LabelStudioLike(ThreadingHTTPServer):
    """The endpoints `import url=` uses, with Label Studio's auth: Token for the legacy token, Bearer for an
    access token, each access token good for `uses` requests (then 401, as an expired one)."""

    def __init__(self, tasks, *, uses=100, echo=False):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.tasks, self.uses, self.echo = tasks, uses, echo
        self.access: dict[str, int] = {}  # access token -> requests left
        self.seen: list[tuple[str, str, str]] = []  # (method, path, Authorization)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: LabelStudioLike

    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        auth = self.headers.get("Authorization", "")
        if auth == f"Token {LEGACY}":
            return True
        token = auth.removeprefix("Bearer ")
        if auth.startswith("Bearer ") and self.server.access.get(token, 0) > 0:
            self.server.access[token] -= 1
            return True
        return False

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.seen.append(("POST", self.path, self.headers.get("Authorization", "")))
        if self.path == "/api/token/refresh" and body.get("refresh") == REFRESH:
            access = _jwt("access", 100 + len(self.server.access))
            self.server.access[access] = self.server.uses
            return self._send(200, {"access": access})
        return self._send(401, {"detail": "Token is invalid or expired", "code": "token_not_valid"})

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        self.server.seen.append(("GET", self.path, auth))
        if self.server.echo or not self._authorized():
            return self._send(401, {"detail": f"Given token not valid: {auth} (refresh {REFRESH})"})
        if self.path.startswith("/api/projects/1/export"):
            return self._send(200, self.server.tasks)
        if self.path.startswith("/api/users"):
            return self._send(200, [{"id": 1, "email": "a@x.org"}])
        return self._send(404, {"detail": "Not found."})

    def log_message(self, *args):
        pass


@pytest.fixture()
def exported(labelling_dir):
    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    tasks = make_tasks([(cid, "0"), (cid, "1")], conversations)
    for i, task in enumerate(tasks):
        task.update(id=10 + i, drafts=[], annotations=[{
            "id": i + 1, "completed_by": 1, "was_cancelled": False, "updated_at": "2026-01-01T10:00:00Z",
            "result": [{"from_name": "scope", "to_name": "dialogue", "type": "choices", "value": {"choices": ["3"]}}],
        }])
    return tasks


def _serve(server):
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _pull(labelling_dir, url, out, *extra):
    return main(["import", "source=label-studio", f"data={labelling_dir}", f"url={url}", "project=1",
                 f"out={out}", *extra])


@pytest.mark.parametrize("token", [REFRESH, LEGACY], ids=["personal-access-token", "legacy-token"])
def test_either_token_imports_and_an_expired_access_token_is_renewed(labelling_dir, exported, tmp_path,
                                                                     monkeypatch, capsys, token):
    server = _serve(LabelStudioLike(exported, uses=1))  # every access token expires after one request
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", token)
    try:
        assert _pull(labelling_dir, server.url, tmp_path / "o") == 0
    finally:
        server.shutdown()
    labels = pd.read_csv(tmp_path / "o" / "labels.csv", dtype=str)
    assert sorted(labels["turn"]) == ["0", "1"] and set(labels["judge_id"]) == {"a@x.org"}
    gets = [auth for method, _, auth in server.seen if method == "GET"]
    if token == REFRESH:
        refreshes = [p for m, p, _ in server.seen if m == "POST"]
        assert refreshes == ["/api/token/refresh"] * 2  # the first access token, then one after it expired
        assert all(a.startswith("Bearer eyJ") for a in gets) and len(set(gets)) == 2
    else:
        assert set(gets) == {f"Token {LEGACY}"}
    printed = capsys.readouterr()
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    for secret in [token, *server.access]:
        assert secret not in printed.out + printed.err and secret.encode() not in written


def test_a_server_that_echoes_the_tokens_in_its_401_has_them_masked(labelling_dir, exported, tmp_path,
                                                                    monkeypatch, capsys):
    server = _serve(LabelStudioLike(exported, echo=True))
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", REFRESH)
    try:
        assert _pull(labelling_dir, server.url, tmp_path / "o") == 2
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused the API token" in err and "Bearer ***" in err, err
    for secret in [REFRESH, *server.access]:
        assert secret not in err
    assert "personal access token" in err  # the fix names what users have


@pytest.mark.parametrize("given", [REFRESH, LEGACY, "A" + LEGACY], ids=["jwt", "legacy", "legacy-name-like"])
def test_the_token_given_as_token_env_is_refused_and_not_echoed(labelling_dir, tmp_path, capsys, given):
    for argv in (["label-studio", f"data={labelling_dir}", "url=http://127.0.0.1:9"],
                 ["import", "source=label-studio", f"data={labelling_dir}", "url=http://127.0.0.1:9", "project=1",
                  f"out={tmp_path / 'o'}"]):
        assert main([*argv, f"token_env={given}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "token_env" in err and given not in err, err
        assert "not shown" in err
    assert not (tmp_path / "o").exists()
