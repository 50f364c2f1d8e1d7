"""One small JSON-over-HTTP client for the servers role-rubric talks to (Phoenix, Label Studio, MLflow probes).

Every REST call of the trace sources and publish targets goes through `RestClient`, so they all behave the
same way: the environment's proxies (HTTPS_PROXY, NO_PROXY) except for a server on this machine, which a
proxy cannot reach; a timeout on every request; a few retries with backoff where retrying is safe; and every
failure as one `InputError` line naming the URL, with secrets masked.

Retrying is safe for a request the server did not act on: any method on 429 / 503 or a refused connection,
and the idempotent methods (GET, PUT, DELETE) also on the other 5xx answers and timeouts. A POST that timed
out may have been applied, so it is not sent twice.
"""

from __future__ import annotations

import ipaddress
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rubric.errors import InputError
from rubric.secrets import mask_secrets

__all__ = ["HttpRefused", "NotJson", "RestClient", "Unreachable", "base_url", "on_this_machine", "opener_for"]

_RETRY_ANY_METHOD = frozenset({429, 503})
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})


class HttpRefused(InputError):
    """The server answered with an HTTP error status; `status` and the server's `detail` (masked, one line)
    let the caller say what it means for its service (a 401 is a token problem, a 404 a missing project)."""

    def __init__(self, problem: str, *, status: int, detail: str, fix: str = ""):
        self.status = status
        self.detail = detail
        super().__init__(problem, fix=fix)


class Unreachable(InputError):
    """The server could not be reached (refused, timed out, unknown host); `reason`: why, masked, one line."""

    def __init__(self, problem: str, *, reason: str, fix: str = ""):
        self.reason = reason
        super().__init__(problem, fix=fix)


class NotJson(InputError):
    """The server answered something that is not JSON (it is likely not the service named)."""


def base_url(url: str, *, strip: Sequence[str] = ()) -> str:
    """The server's address without a trailing slash or a copied-along suffix such as "/v1".

    >>> base_url("http://localhost:6006/v1/", strip=("/v1",))
    'http://localhost:6006'
    """
    url = str(url).strip().rstrip("/")
    for suffix in strip:
        if url.endswith(suffix):
            url = url[: -len(suffix)]
    return url


def on_this_machine(url: str) -> bool:
    """Whether `url` names a server on this machine (localhost, a loopback address), which no proxy can reach.

    >>> [on_this_machine(u) for u in ("http://127.0.0.1:6006", "http://localhost:5000", "https://example.com")]
    [True, True, False]
    """
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def opener_for(url: str) -> urllib.request.OpenerDirector:
    """The environment's proxies, except for a server on this machine (a proxy cannot reach our loopback)."""
    return urllib.request.build_opener(urllib.request.ProxyHandler({} if on_this_machine(url) else None))


class RestClient:
    """JSON requests to one server.

    url: the server's address (no trailing slash); service: its name in messages ("Phoenix");
    headers: sent with every request (authorization); secrets: strings masked out of every message;
    start_fix: what to do when the server cannot be reached; retries: further tries where safe.
    """

    def __init__(
        self,
        url: str,
        *,
        service: str,
        headers: Mapping[str, str] | None = None,
        timeout: float = 60.0,
        retries: int = 2,
        secrets: Sequence[str] = (),
        start_fix: str = "",
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.url = base_url(url)
        self.service = service
        self.headers = dict(headers or {})
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.secrets = [s for s in secrets if s]
        self.start_fix = start_fix or f"start {service} or correct url=."
        self._opener = opener_for(self.url)
        self._sleep = sleep

    def get(self, path: str, params: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
        """The JSON a GET of `path` answers (params: the query, lists repeated)."""
        return self.request("GET", path, params=params, **kwargs)

    def post(self, path: str, body: Any, **kwargs: Any) -> Any:
        return self.request("POST", path, body=body, **kwargs)

    def request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        timeout: float | None = None,
        headers: Mapping[str, str] | None = None,
        none_if_missing: bool = False,
    ) -> Any:
        """The JSON the server answers (None for an empty body, or for HTTP 404 with none_if_missing).

        what: what is asked for, in words ("the project's spans"), named in every error.
        Raises HttpRefused for an HTTP error status, InputError when the server cannot be reached or does
        not answer JSON.
        """
        url = self.url + path + (("?" + urllib.parse.urlencode(params, doseq=True)) if params else "")
        all_headers = {"Accept": "application/json", **self.headers, **(headers or {})}
        data = None
        if body is not None:
            all_headers["Content-Type"] = "application/json"
            data = json.dumps(body).encode()
        wait = self.timeout if timeout is None else min(self.timeout, timeout)
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
            try:
                with self._opener.open(request, timeout=wait) as reply:
                    text = reply.read()
                break
            except urllib.error.HTTPError as exc:
                if exc.code == 404 and none_if_missing:
                    return None
                if not last and self._retryable(method, exc.code):
                    self._sleep(0.5 * 2**attempt)
                    continue
                raise self._refused(exc, what) from None
            except (urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                if not last and self._retryable(method, None, refused=isinstance(reason, ConnectionRefusedError)):
                    self._sleep(0.5 * 2**attempt)
                    continue
                raise Unreachable(
                    f"cannot reach {self.service} at {self.url} ({self.mask(str(reason))}).",
                    reason=self.mask(str(reason)),
                    fix=self.start_fix,
                ) from None
        return self._json(text, path, what)

    def mask(self, text: str) -> str:
        """`text` without any of the secrets, or anything shaped like a token."""
        return mask_secrets(text, *self.secrets)

    @staticmethod
    def _retryable(method: str, status: int | None, *, refused: bool = False) -> bool:
        if status in _RETRY_ANY_METHOD or refused:
            return True  # the server did not act on it
        if method.upper() not in _IDEMPOTENT:
            return False
        return status is None or status >= 500  # a timeout or a server error: safe to ask again

    def _json(self, text: bytes, path: str, what: str) -> Any:
        if not text:
            return None
        try:
            return json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise NotJson(
                f"{self.url}{path.split('?')[0]} did not answer {what} as JSON; is it a {self.service} server?",
                fix=f"set url= to {self.service}'s address.",
            ) from None

    def _refused(self, exc: urllib.error.HTTPError, what: str) -> HttpRefused:
        detail = self.mask(_detail(exc))
        return HttpRefused(
            f"{self.service} at {self.url} refused {what} (HTTP {exc.code})" + (f": {detail}." if detail else "."),
            status=exc.code,
            detail=detail,
            fix="check url= and the server's log.",
        )


def _detail(exc: urllib.error.HTTPError) -> str:
    """The server's reason in one line: FastAPI's {"detail": ...}, Django's validation_errors, or plain text."""
    try:
        body = exc.read().decode("utf-8", "replace")
    except OSError:
        body = ""
    try:
        payload = json.loads(body)
    except json.JSONDecodeError:
        payload = body
    if isinstance(payload, dict):
        payload = payload.get("validation_errors") or payload.get("detail") or payload.get("message") or ""
    return " ".join(str(payload).split())[:200].rstrip(".")
