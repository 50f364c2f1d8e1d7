"""The wire: one JSON POST to an OpenAI-compatible endpoint, and what came back.

Two ways to send it (`judge.http_client`), with the same contract: `post(path, body)` returns a `Reply`
(status, headers, raw body) for any HTTP status, and raises `Retryable` on a timeout or a broken
connection. Everything about statuses, retries and answers is decided by the caller (rubric/judge/backends.py),
so both behave the same to the fault tests.

- `aiohttp` (default): aiohttp directly, with the headers and base URL the `openai` client would use
  (auth, organization, project, user agent; `OPENAI_BASE_URL`). About 0.3 ms of CPU per request.
- `openai`: the `openai` client's own request path (its aiohttp transport where installed). About 1.1 ms
  of CPU per request, most of it building typed request options, URLs and headers for every call. At
  concurrency 64 against a 50 ms endpoint that alone needs more than one core
  (benchmarks/gather_throughput.py), so it is the choice only where the client's extras matter (custom
  auth providers, Azure-specific clients, debugging against the SDK).
"""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import json
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

HTTP_CLIENTS = ("aiohttp", "openai")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Any
    """Case-insensitive mapping (aiohttp's or httpx's headers)."""
    content: bytes


class Retryable(Exception):
    """A failure worth another attempt; `wait`: seconds the server asked for (Retry-After), if any;
    `refused`: nothing listens at the address (the connection was refused), which the caller treats as
    a wrong address, not a busy server, until the endpoint has answered once."""

    def __init__(self, why: str, wait: float | None = None, *, refused: bool = False):
        super().__init__(why)
        self.wait = wait
        self.refused = refused


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (retry-after-ms, retry-after as seconds or an HTTP date)."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            return max(0.0, float(raw) / scale)
        except ValueError:
            try:
                parsed = email.utils.parsedate_to_datetime(raw) if name == "retry-after" else None
            except (TypeError, ValueError, IndexError):  # "soon": not a date either, so no advice
                parsed = None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def error_message(content: bytes) -> str:
    """The server's own words from an error body ({"error": {"message": ...}} or anything else)."""
    try:
        body = json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return content[:200].decode("utf-8", "replace")
    err = body.get("error", body) if isinstance(body, dict) else body
    return str(err.get("message") if isinstance(err, dict) else err)[:200]


def env_proxy(url: str) -> str | None:
    """The proxy that HTTP(S)_PROXY / NO_PROXY choose for `url`, as the openai client would use; None
    for a direct connection."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(url)
    if parts.hostname is None or proxy_bypass(parts.hostname):
        return None
    return getproxies().get(parts.scheme)


def refused_at(url: str | None, timeout: float = 3.0) -> bool:
    """True when nothing listens at `url`'s host and port (the connection is refused at once); False when
    something answers, when it cannot be told in `timeout`, or when a proxy would carry the request."""
    import socket
    from urllib.parse import urlsplit

    if not url or env_proxy(url) is not None:
        return False
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return False
    if not parts.hostname:
        return False
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            return False
    except ConnectionRefusedError:
        return True
    except OSError:
        return False


def ssl_context_for(url: str) -> Any:
    """For https: the SSL context the openai client's transports build (httpx's create_ssl_context:
    certifi's CA bundle, SSL_CERT_FILE / SSL_CERT_DIR honoured), so both ways of sending trust the same
    certificates. True (aiohttp's default) for plain http, where it is never used."""
    if not url.lower().startswith("https:"):
        return True
    return _sdk_httpx().create_ssl_context()


def make_channel(kind: str, api_key: str, base_url: str | None, timeout: float, connections: int) -> Any:
    import openai  # both need it: it knows the endpoint's URL and headers conventions

    http_client = _sdk_http_client(openai, timeout) if kind == "openai" else None  # None: the client's default
    client = openai.AsyncOpenAI(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
    )
    if kind == "openai":
        return OpenAIClientChannel(client)
    return AiohttpChannel(client, timeout, connections)


class AiohttpChannel:
    """aiohttp with the openai client's URL and headers. The session is made on first use, inside the
    running event loop (a gather's worker processes each make their own)."""

    def __init__(self, client: Any, timeout: float, connections: int):
        headers = {**client.default_headers, **client.auth_headers}
        self._headers = {k: v for k, v in headers.items() if isinstance(v, str)}  # drops the SDK's Omit
        self._base = str(client.base_url).rstrip("/")
        self.base_url = self._base  # named in errors ("connection refused at ...")
        self._timeout = timeout
        self._connections = connections
        self._session: Any = None

    async def post(self, path: str, body: dict[str, Any]) -> Reply:
        import aiohttp

        if self._session is None:
            # Not trust_env=True: it reads the proxy variables again on every request (0.6 ms each).
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self._timeout),
                connector=aiohttp.TCPConnector(limit=self._connections, ssl=ssl_context_for(self._base)),
                proxy=env_proxy(self._base),
            )
        try:
            async with self._session.post(self._base + path, data=json.dumps(body), headers=self._headers) as resp:
                return Reply(resp.status, resp.headers, await resp.read())
        except asyncio.TimeoutError:
            raise Retryable("timeout") from None
        except aiohttp.ClientError as exc:
            refused = isinstance(getattr(exc, "os_error", None), ConnectionRefusedError)
            raise Retryable(f"connection error ({type(exc).__name__})", refused=refused) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()


class OpenAIClientChannel:
    """The openai client's own request path, raw response (no typed parsing)."""

    def __init__(self, client: Any):
        self.client = client
        self.base_url = str(client.base_url).rstrip("/")

    async def post(self, path: str, body: dict[str, Any]) -> Reply:
        import openai

        try:
            resp = await self.client.post(path, body=body, cast_to=_sdk_httpx().Response)
        except openai.APIStatusError as exc:
            return Reply(exc.status_code, exc.response.headers, exc.response.content)
        except openai.APIConnectionError as exc:  # APITimeoutError included
            raise Retryable(_what_went_wrong(exc), refused=_refused(exc)) from None
        return Reply(resp.status_code, resp.headers, resp.content)

    async def close(self) -> None:
        await self.client.close()


def _what_went_wrong(exc: BaseException) -> str:
    """Say "timeout" or "connection error (...)" from the cause chain: the SDK's aiohttp transport reports
    a refused connection as a timeout."""
    chain = [exc]
    while chain[-1].__cause__ is not None and len(chain) < 10:
        chain.append(chain[-1].__cause__)
    if any(isinstance(e, TimeoutError) for e in chain):
        return "timeout"
    return f"connection error ({type(chain[-1]).__name__})"


def _refused(exc: BaseException) -> bool:
    """A refused connection anywhere in the cause or context chain (the SDK wraps it in two layers)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo and len(seen) < 20:
        e = todo.pop()
        if e is None or any(e is s for s in seen):
            continue
        if isinstance(e, ConnectionRefusedError) or isinstance(getattr(e, "os_error", None), ConnectionRefusedError):
            return True
        seen.append(e)
        todo += [e.__cause__, e.__context__]
    return False


def _sdk_http_client(openai: ModuleType, timeout: float) -> Any:
    """The openai client's aiohttp transport (the `openai[aiohttp]` extra) where installed: 1.0 ms of
    CPU per request against 1.7 ms for its default httpx transport, whose pool scans every connection on
    each request. None: the client's default."""
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return None
    factory = getattr(openai, "DefaultAioHttpClient", None)
    return None if factory is None else factory(timeout=timeout)


def _sdk_httpx() -> ModuleType:
    """The openai client's HTTP library: httpx2 for openai>=3, httpx before."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:  # pragma: no cover - older openai releases
        return importlib.import_module("httpx")
