"""A Phoenix server -> `Span`s and reviewers' `Annotation`s, through its REST API (the standard library's
urllib: no client package needed).

The project's spans are read page by page (`GET /v1/projects/{id}/spans`, in order of start), each page handed
on as it arrives, so memory does not grow with the project. Phoenix answers with OpenInference's attributes
already flattened to dotted keys, as OTLP carried them, except for what it changed on the way in: the span kind
is moved out of the attributes (put back as `openinference.span.kind`) and a few attributes OpenInference sends
as JSON text (`metadata`, `llm.prompt_template.variables`, `tool.parameters`, `document.metadata`) are stored
parsed (put back as JSON text). Phoenix keeps no resource attributes: a span's `resource` names its project.
(Phoenix's JSON of one span or annotation -> `Span` / `Annotation`: phoenix_spans.py.)

Reviewers' labels are Phoenix annotations whose annotator kind is HUMAN, on a span, a trace or a session
(LLM and CODE annotations, and notes, are not labels). They are fetched with the spans: for each page, the
annotations of its spans and traces; at the end, those of the sessions seen. The reviewer is the annotation's
identifier, else its user, else its source (`phoenix-app`: given in Phoenix's UI; `phoenix-api`).

The API key (Phoenix with authentication on) comes from an environment variable, PHOENIX_API_KEY unless
token_env= names another; it is sent as a bearer token and never shown: every message is masked.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from rubric.errors import InputError
from rubric.notices import warn_data
from rubric.secrets import looks_like_secret, mask_secrets
from rubric.traces.phoenix_spans import annotation_of, span_of
from rubric.traces.spans import Annotation, Span, TraceSource

TOKEN_ENV = "PHOENIX_API_KEY"
"""Where the API key is read from by default (the variable Phoenix's own clients read)."""

PAGE = 1000
"""Spans per request: the most Phoenix's API gives, and the most span ids one annotations request may name."""

FIRST_CONTACT_S = 10.0
"""The first request waits at most this long, so that a server that is not there is one line within seconds."""

HUMAN = "HUMAN"


class PhoenixSource(TraceSource):
    """The spans and HUMAN annotations of one project of a Phoenix server (`url` as its UI's address, e.g.
    http://localhost:6006). The server and the project are checked as this is made: unreachable, refused or
    unknown is one InputError before anything is read."""

    def __init__(
        self, url: str, project: str, *, token_env: str | None = None, timeout: float = 60.0, page_size: int = PAGE
    ):
        self.url = _base_url(url)
        self.page_size = min(int(page_size), PAGE)
        self.project = str(project)
        self.timeout = float(timeout)
        self.description = f"Phoenix project {self.project!r} at {self.url}"
        self.token_env = token_env or TOKEN_ENV
        self._token = api_key(token_env)
        self._opener = _opener(self.url)
        self._users: dict[str, str] | None = None
        self._annotations: list[Annotation] = []
        self._seen: set[str] = set()  # annotation ids: a trace's spans may come on several pages
        self._read = False
        self.project_id = self._project_id()
        self.record = {"url": self.url, "project": self.project}
        """Where the conversations came from, for the records' "source" field (with "kind": "phoenix")."""

    @classmethod
    def from_config(cls, cfg: Any) -> PhoenixSource:
        """From an `import source=phoenix` command's typed object (attributes read one by one). token_env=
        left at the Label Studio default it shares with other commands means Phoenix's own variable."""
        token_env = getattr(cfg, "token_env", None)
        if token_env == "LABEL_STUDIO_API_KEY":  # the shared key's default (calibration/schema/keys.py)
            token_env = None
        return cls(str(cfg.url), str(cfg.project), token_env=token_env, timeout=float(getattr(cfg, "timeout", 60)))

    # -- TraceSource ---------------------------------------------------------------------------------------------
    def spans(self) -> Iterator[Span]:
        """Every span of the project, oldest first, page by page; the annotations on them are collected on the
        way (`annotations()`)."""
        self._annotations, self._seen = [], set()
        sessions: set[str] = set()
        cursor: str | None = None
        first = True
        while True:
            params: dict[str, Any] = {"limit": self.page_size, "sort": "start_time", "order": "asc"}
            if cursor:
                params["cursor"] = cursor
            page = self._get(f"/v1/projects/{self._quoted_id}/spans", params, what="the project's spans")
            raw_spans = [s for s in _list(page.get("data"), self, "spans") if isinstance(s, dict)]
            if first and not raw_spans:
                raise InputError(
                    f"{self.description} has no spans.",
                    fix="check project= (the project the chatbot's spans are sent to: the resource attribute "
                    "openinference.project.name, or PHOENIX_PROJECT_NAME) and that its traces were exported.",
                )
            first = False
            spans = [span_of(s, self.project) for s in raw_spans]
            self._collect_annotations(spans)
            sessions.update(str(s.attributes["session.id"]) for s in spans if s.attributes.get("session.id"))
            yield from spans
            cursor = page.get("next_cursor")
            if not cursor or not raw_spans:
                break
        sessions_sorted = sorted(sessions)
        for start in range(0, len(sessions_sorted), self.page_size):
            self._fetch_annotations("session", sessions_sorted[start : start + self.page_size], {})
        self._read = True

    def annotations(self) -> Iterator[Annotation]:
        """The HUMAN annotations on the project's spans, traces and sessions (read with the spans: when the
        spans have not been read yet, they are read here)."""
        if not self._read:
            for _ in self.spans():
                pass
        yield from self._annotations

    # -- spans ---------------------------------------------------------------------------------------------------
    @property
    def _quoted_id(self) -> str:
        return urllib.parse.quote(self.project_id, safe="")

    # -- annotations ---------------------------------------------------------------------------------------------
    def _collect_annotations(self, spans: list[Span]) -> None:
        """The annotations on this page's spans and on their traces."""
        trace_of = {s.span_id: s.trace_id for s in spans}
        self._fetch_annotations("span", list(trace_of), trace_of)
        self._fetch_annotations("trace", sorted({s.trace_id for s in spans}), {})

    def _fetch_annotations(self, level: str, ids: list[str], trace_of: Mapping[str, str]) -> None:
        if not ids:
            return
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {f"{level}_ids": ids, "limit": self.page_size, "exclude_annotation_names": "note"}
            if cursor:
                params["cursor"] = cursor
            page = self._get(
                f"/v1/projects/{self._quoted_id}/{level}_annotations",
                params,
                what=f"the {level} annotations",
                none_if_missing=True,
            )
            if page is None:  # none of these ids is the project's: a session id used in another project first
                return
            for raw in _list(page.get("data"), self, f"{level} annotations"):
                if not isinstance(raw, dict) or raw.get("annotator_kind") != HUMAN:
                    continue
                ident = f"{level} {raw.get('id')}" if raw.get("id") else None
                if ident is None or ident not in self._seen:
                    self._seen.add(ident or "")
                    annotation = annotation_of(level, raw, trace_of, reviewer=self._reviewer(raw), project=self.project)
                    self._annotations.append(annotation)
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def _reviewer(self, raw: Mapping[str, Any]) -> str:
        """Who gave it: the identifier (how API writers name a reviewer), else the user, else the source."""
        identifier = str(raw.get("identifier") or "").strip()
        if identifier:
            return identifier
        user = raw.get("user_id")
        if user:
            return self._user_name(str(user))
        return f"phoenix-{str(raw.get('source') or 'api').lower()}"

    def _user_name(self, user_id: str) -> str:
        """A user's name; listing users needs an admin's key: without one, `phoenix-user-N` (N: the user's
        number in Phoenix), with a warning, since the same reviewer is then named differently."""
        if self._users is None:
            self._users = {}
            try:
                page = self._get("/v1/users", {"limit": PAGE}, what="the users")
                for user in _list(page.get("data"), self, "users"):
                    if isinstance(user, dict) and user.get("id"):
                        self._users[str(user["id"])] = str(user.get("username") or user.get("email") or user["id"])
            except InputError:
                warn_data(
                    "import",
                    [
                        "reviewers who annotated as Phoenix users are named phoenix-user-N: listing Phoenix's "
                        f"users (for their names) needs an admin's API key in ${self.token_env}."
                    ],
                )
        if user_id not in self._users:
            self._users[user_id] = "phoenix-user-" + _node_number(user_id)
        return self._users[user_id]

    # -- the project ---------------------------------------------------------------------------------------------
    def _project_id(self) -> str:
        """The project's id, found by its exact name among the server's projects."""
        names: list[str] = []
        cursor: str | None = None
        first = True
        while True:
            params: dict[str, Any] = {"limit": 100}
            if cursor:
                params["cursor"] = cursor
            page = self._get("/v1/projects", params, what="its projects", timeout=FIRST_CONTACT_S if first else None)
            first = False
            for project in _list(page.get("data"), self, "projects"):
                if isinstance(project, dict) and project.get("name") == self.project and project.get("id"):
                    return str(project["id"])
                if isinstance(project, dict):
                    names.append(str(project.get("name")))
            cursor = page.get("next_cursor")
            if not cursor:
                break
        shown = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        raise InputError(
            f"Phoenix at {self.url} has no project {self.project!r}"
            + (f" (it has {shown})." if names else " (it has no projects)."),
            fix="set project= to one of its projects' names, as its UI lists them.",
        )

    # -- HTTP ----------------------------------------------------------------------------------------------------
    def _get(
        self,
        path: str,
        params: Mapping[str, Any],
        *,
        what: str,
        timeout: float | None = None,
        none_if_missing: bool = False,
    ) -> Any:
        """The JSON object a GET answers; none_if_missing: None for HTTP 404 (Phoenix's "none of these ids
        exist in this project": a session belongs to the project that used its id first)."""
        query = urllib.parse.urlencode(params, doseq=True)
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        request = urllib.request.Request(f"{self.url}{path}?{query}", headers=headers, method="GET")
        wait = self.timeout if timeout is None else min(self.timeout, timeout)
        try:
            with self._opener.open(request, timeout=wait) as reply:
                body = reply.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 404 and none_if_missing:
                return None
            raise self._refused(exc, what) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise InputError(
                f"cannot reach Phoenix at {self.url} ({self._mask(str(reason))}).",
                fix="start Phoenix (phoenix serve) or correct url= (its UI's address, e.g. http://localhost:6006).",
            ) from None
        try:
            reply_json = json.loads(body or b"{}")
        except json.JSONDecodeError:
            reply_json = None
        if not isinstance(reply_json, dict):
            raise InputError(
                f"{self.url}{path} did not answer {what} as Phoenix's API does; is it a Phoenix server?",
                fix="set url= to Phoenix's address (its UI's, e.g. http://localhost:6006).",
            )
        return reply_json

    def _refused(self, exc: urllib.error.HTTPError, what: str) -> InputError:
        try:
            body = exc.read().decode("utf-8", "replace")
        except OSError:
            body = ""
        try:  # FastAPI's {"detail": ...}, or Phoenix's own plain text ("Invalid token")
            payload = json.loads(body)
            detail = str(payload.get("detail") or "") if isinstance(payload, dict) else body
        except json.JSONDecodeError:
            detail = body
        detail = " ".join(detail.split())[:200].rstrip(".")
        detail = f": {self._mask(detail)}" if detail else ""
        if exc.code in (401, 403):
            return InputError(
                f"Phoenix at {self.url} refused "
                + ("the API key" if self._token else "a request without an API key")
                + f" for {what} (HTTP {exc.code}){detail}.",
                fix=f"put a Phoenix API key (Settings -> API Keys) in the environment variable {self.token_env} "
                "(token_env= names another); it is read from there only and never written.",
            )
        return InputError(
            f"Phoenix at {self.url} refused {what} (HTTP {exc.code}){detail}.",
            fix="check url= (Phoenix's address) and project=, and the server's log.",
        )

    def _mask(self, text: str) -> str:
        return mask_secrets(text, self._token)


def _node_number(global_id: str) -> str:
    """Phoenix's ids are base64 of "Type:N": N ('VXNlcjoz' -> '3'); the id itself where it is not one."""
    try:
        kind, _, number = base64.b64decode(global_id, validate=True).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return global_id
    return number if kind and number.isdigit() else global_id


def _list(value: Any, source: PhoenixSource, what: str) -> list:
    if not isinstance(value, list):
        raise InputError(
            f"Phoenix at {source.url} sent no list of {what}; is it a Phoenix server?",
            fix="set url= to Phoenix's address (its UI's, e.g. http://localhost:6006).",
        )
    return value


def _base_url(url: str) -> str:
    """The server's address without a trailing slash or /v1 (both are commonly copied along)."""
    url = str(url).strip().rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


def api_key(token_env: str | None) -> str | None:
    """The API key from `token_env` (None: PHOENIX_API_KEY, optional: a Phoenix without authentication needs
    none); a variable named on purpose must be set, and a name that looks like the key itself is refused."""
    name = token_env or TOKEN_ENV
    if looks_like_secret(name):
        raise InputError(
            "token_env= is given what looks like the API key itself (not shown here); it takes the name of an "
            "environment variable.",
            fix=f"export {TOKEN_ENV}=<your key> and leave token_env= out; the key never goes on the command line.",
        )
    key = os.environ.get(name, "").strip()
    if not key and token_env:
        raise InputError(
            f"token_env={name} names an environment variable that is not set.",
            fix=f"export {name}=<your Phoenix API key>, or leave token_env= out for a Phoenix without "
            f"authentication (or a key in {TOKEN_ENV}).",
        )
    return key or None


def _opener(url: str) -> urllib.request.OpenerDirector:
    """The environment's proxies, except for a server on this machine (a proxy cannot reach our loopback)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    try:
        local = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        local = False
    return urllib.request.build_opener(urllib.request.ProxyHandler({} if local else None))
