"""`import source=phoenix`: a Phoenix server -> `Span`s and reviewers' `Annotation`s, through its REST API
(rubric/transport/rest.py's `RestClient`: no client package needed).

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
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from calibration.connectors.phoenix.spans import annotation_of, span_of
from calibration.connectors.trace_import import import_traces
from calibration.schema.source_keys import PhoenixKeys
from rubric.errors import InputError
from rubric.notices import warn_data
from rubric.secrets import secret_in_env
from rubric.traces.assemble import TraceSelection
from rubric.traces.spans import Annotation, Span
from rubric.transport.rest import HttpRefused, NotJson, RestClient, base_url

TOKEN_ENV = "PHOENIX_API_KEY"
"""Where the API key is read from by default (the variable Phoenix's own clients read)."""

PAGE = 1000
"""Spans per request: the most Phoenix's API gives, and the most span ids one annotations request may name."""

FIRST_CONTACT_S = 10.0
"""The first request waits at most this long, so that a server that is not there is one line within seconds."""

HUMAN = "HUMAN"


class PhoenixTraces:
    """source=phoenix (calibration/connectors/sources.py's contract)."""

    settings: ClassVar[type[PhoenixKeys]] = PhoenixKeys

    def __init__(self, settings: PhoenixKeys):
        self.keys = settings

    def import_into(self, out: Path, *, progress: bool) -> dict[str, int]:
        keys = self.keys

        def reader(selection: TraceSelection) -> PhoenixSource:
            token_env = None if keys.token_env == TOKEN_ENV else keys.token_env  # the default: optional
            return PhoenixSource(keys.url, keys.project, token_env=token_env, timeout=keys.timeout)

        return import_traces(keys, reader, out=out, progress=progress, label_map=keys.label_map)


class PhoenixSource:
    """The spans and HUMAN annotations of one project of a Phoenix server (`url` as its UI's address, e.g.
    http://localhost:6006). The server and the project are checked as this is made: unreachable, refused or
    unknown is one InputError before anything is read."""

    def __init__(
        self, url: str, project: str, *, token_env: str | None = None, timeout: float = 60.0, page_size: int = PAGE
    ):
        self.url = base_url(url, strip=("/v1",))
        self.page_size = min(int(page_size), PAGE)
        self.project = str(project)
        self.timeout = float(timeout)
        self.description = f"Phoenix project {self.project!r} at {self.url}"
        self.token_env = token_env or TOKEN_ENV
        self._token = api_key(token_env)
        self._rest = RestClient(
            self.url,
            service="Phoenix",
            headers={"Authorization": f"Bearer {self._token}"} if self._token else {},
            timeout=self.timeout,
            secrets=[self._token] if self._token else [],
            start_fix="start Phoenix (phoenix serve) or correct url= (its UI's address, e.g. http://localhost:6006).",
        )
        self._users: dict[str, str] | None = None
        self._annotations: list[Annotation] = []
        self._seen: set[str] = set()  # annotation ids: a trace's spans may come on several pages
        self._read = False
        self.project_id = self._project_id()

    @property
    def record(self) -> dict[str, Any]:
        """Where the conversations came from, for the records' "source" field (with "kind": "phoenix")."""
        return {"url": self.url, "project": self.project}

    # -- SpanReader ----------------------------------------------------------------------------------------------
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
        try:
            reply = self._rest.get(path, params, what=what, timeout=timeout, none_if_missing=none_if_missing)
        except HttpRefused as exc:
            raise self._refused(exc, what) from None
        except NotJson:
            reply = None
        if reply is None and none_if_missing:
            return None
        if not isinstance(reply, dict):
            raise InputError(
                f"{self.url}{path} did not answer {what} as Phoenix's API does; is it a Phoenix server?",
                fix="set url= to Phoenix's address (its UI's, e.g. http://localhost:6006).",
            )
        return reply

    def _refused(self, exc: HttpRefused, what: str) -> InputError:
        detail = f": {exc.detail}" if exc.detail else ""
        if exc.status in (401, 403):
            return InputError(
                f"Phoenix at {self.url} refused "
                + ("the API key" if self._token else "a request without an API key")
                + f" for {what} (HTTP {exc.status}){detail}.",
                fix=f"put a Phoenix API key (Settings -> API Keys) in the environment variable {self.token_env} "
                "(token_env= names another); it is read from there only and never written.",
            )
        return InputError(
            f"Phoenix at {self.url} refused {what} (HTTP {exc.status}){detail}.",
            fix="check url= (Phoenix's address) and project=, and the server's log.",
        )


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


def api_key(token_env: str | None) -> str | None:
    """The API key from `token_env` (None: PHOENIX_API_KEY, optional: a Phoenix without authentication needs
    none); a variable named on purpose must be set, and a name that looks like the key itself is refused."""
    name = token_env or TOKEN_ENV
    key = secret_in_env(
        name,
        what="API key",
        fix=f"export {TOKEN_ENV}=<your key> and leave token_env= out; the key never goes on the command line.",
    )
    if not key and token_env:
        raise InputError(
            f"token_env={name} names an environment variable that is not set.",
            fix=f"export {name}=<your Phoenix API key>, or leave token_env= out for a Phoenix without "
            f"authentication (or a key in {TOKEN_ENV}).",
        )
    return key or None
