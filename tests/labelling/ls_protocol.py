"""A small HTTP server speaking Label Studio's protocol as role-rubric uses it (the token refresh, a project's
export, its users), for tests in the default suite; the real server's tests are marked labelstudio."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


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
        self.users: object = [{"id": 1, "email": "a@x.org"}]  # what /api/users/ answers
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
            return self._send(200, self.server.users)
        return self._send(404, {"detail": "Not found."})

    def log_message(self, *args):
        pass


def serve(server: LabelStudioLike) -> LabelStudioLike:
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def annotated_tasks(labelling_dir) -> list[dict]:
    """An export as Label Studio writes it: two tasks (turns 0 and 1 of the first conversation), each
    answered by user 1 (a@x.org, named as a file saved by `import url=` names it) with scope=3."""
    from calibration.connectors.label_studio.tasks import make_tasks
    from calibration.labelling.items import dataset_conversations

    conversations = dataset_conversations(labelling_dir)
    cid = next(iter(conversations))
    tasks = make_tasks([(cid, "0"), (cid, "1")], conversations)
    for i, task in enumerate(tasks):
        task.update(
            id=10 + i,
            drafts=[],
            annotations=[
                {
                    "id": i + 1,
                    "completed_by": {"id": 1, "email": "a@x.org"},
                    "was_cancelled": False,
                    "updated_at": "2026-01-01T10:00:00Z",
                    "result": [
                        {"from_name": "scope", "to_name": "dialogue", "type": "choices", "value": {"choices": ["3"]}}
                    ],
                }
            ],
        )
    return tasks


def import_labels(data: Any, out: Any, *keys: str) -> int:
    """The exit status of `role-rubric import source=label-studio data=DATA KEYS... out=OUT`."""
    from calibration.cli import main

    return main(["import", "source=label-studio", f"data={data}", *keys, f"out={out}"])
