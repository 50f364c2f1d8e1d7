"""A small HTTP server of the tests' own on a free port of the loopback (a collector, a proxy, another service):
the test gives the request handler; the server answers from a thread while in a `with` block."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that writes no access log to stderr."""

    def log_message(self, *args):
        pass


class LoopbackServer:
    """Serves `handler` at `url` (http://127.0.0.1:PORT) while in a `with` block."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"

    def __enter__(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
