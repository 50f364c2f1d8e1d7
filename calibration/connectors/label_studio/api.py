"""Label Studio's REST API through rubric/transport/rest.py's `RestClient` (proxies except loopback, timeouts,
safe retries; no SDK, no extra dependency).

The API token is read by the caller from an environment variable and held only in this client's request
header: it is never printed, logged or written, and any text that echoes it is masked before it is shown.
Two kinds of token work: a personal access token (the default of Label Studio 1.13 and later: a JWT refresh
token, exchanged at /api/token/refresh for a short-lived access token sent as `Bearer ...`, and exchanged
again whenever the server refuses an expired one mid-import), and a legacy token (sent as `Authorization: Token ...`).
"""

from __future__ import annotations

from typing import Any

from rubric.errors import InputError
from rubric.secrets import mask_secrets, secret_in_env
from rubric.transport.rest import HttpRefused, NotJson, RestClient

PAGE = 500  # tasks per request when listing or adding tasks


class LabelStudio:
    """A client for one Label Studio server."""

    def __init__(self, url: str, token: str, *, timeout: float = 60.0):
        self.url = url.rstrip("/")
        self._token = token
        self._secrets = [token]  # masked out of every message, with the access tokens made from it
        self.timeout = timeout
        self._rest = RestClient(
            self.url,
            service="Label Studio",
            timeout=timeout,
            secrets=self._secrets,
            start_fix="start Label Studio or correct url= (e.g. http://localhost:8080).",
        )
        self._auth = ""
        self._auth = self._authorization(token)

    # -- what role-rubric uses ------------------------------------------------------------------------------
    def project(self, project: int) -> dict[str, Any]:
        return self._shaped(
            self._call("GET", f"/api/projects/{int(project)}", what=f"project {project}"), dict, f"project {project}"
        )

    def create_project(self, title: str, label_config: str, *, annotations_per_task: int = 1) -> int:
        # show_skip_button: Skip in the labelling view as well as the stream (a reply a reviewer cannot judge)
        body = {
            "title": title,
            "label_config": label_config,
            "maximum_annotations": int(annotations_per_task),
            "show_skip_button": True,
        }
        reply = self._shaped(self._call("POST", "/api/projects", body, what="a new project"), dict, "a new project")
        if isinstance(reply.get("id"), bool) or not isinstance(reply.get("id"), int):
            self._shaped(None, dict, "a new project (its id)")
        return int(reply["id"])

    def add_tasks(self, project: int, tasks: list[dict[str, Any]]) -> int:
        """Import tasks in batches; returns how many the server took."""
        added = 0
        for start in range(0, len(tasks), PAGE):
            reply = self._call(
                "POST",
                f"/api/projects/{int(project)}/import",
                tasks[start : start + PAGE],
                what=f"tasks of project {project}",
            )
            count = self._shaped(reply, dict, f"tasks of project {project}").get("task_count", 0)
            added += count if isinstance(count, int) else 0
        return added

    def tasks(self, project: int) -> list[dict[str, Any]]:
        """Every task of a project (data only), page by page."""
        found: list[dict[str, Any]] = []
        page = 1
        while True:
            reply = self._call(
                "GET",
                f"/api/tasks?project={int(project)}&page_size={PAGE}&page={page}",
                what=f"tasks of project {project}",
            )
            reply = self._shaped(reply, dict, f"tasks of project {project}")
            page_tasks = self._shaped(reply.get("tasks", []), list, f"tasks of project {project}")
            found += [t for t in page_tasks if isinstance(t, dict)]
            total = reply.get("total", 0)
            if not page_tasks or not isinstance(total, int) or len(found) >= total:
                return found
            page += 1

    def export(self, project: int) -> list[dict[str, Any]]:
        """The project's JSON export (every task with annotations)."""
        reply = self._call("GET", f"/api/projects/{int(project)}/export?exportType=JSON", what=f"project {project}")
        if not isinstance(reply, list):
            raise InputError(
                f"Label Studio at {self.url} sent no task list for project {project}.",
                fix="check the url= and project= (is it a Label Studio server?).",
            )
        return reply

    def users(self) -> dict[int, str]:
        """user id -> email, for annotations that name their annotator by id."""
        reply = self._call("GET", "/api/users/", what="users")
        users = reply.get("results", reply) if isinstance(reply, dict) else reply  # a page, or the plain list
        return {
            u["id"]: str(u.get("email") or "")
            for u in self._shaped(users, list, "users")
            if isinstance(u, dict) and isinstance(u.get("id"), int)
        }

    # -- plumbing -------------------------------------------------------------------------------------------
    def _shaped(self, reply: Any, kind: type, what: str) -> Any:
        """`reply` if it is a JSON `kind` (object or list), else one line: not what Label Studio sends."""
        if not isinstance(reply, kind):
            raise InputError(
                f"Label Studio at {self.url} sent no {'list' if kind is list else 'object'} for {what}; "
                "is it a Label Studio server?",
                fix="check url= (and project=).",
            )
        return reply

    def _authorization(self, token: str) -> str:
        """`Token ...` for a legacy token; for a personal access token (a JWT refresh token), `Bearer` and an
        access token fetched from /api/token/refresh (short-lived: fetched again when the server refuses it)."""
        if not is_personal_access_token(token):
            return f"Token {token}"
        reply = self._call("POST", "/api/token/refresh", {"refresh": token}, what="an access token", auth="")
        access = reply.get("access") if isinstance(reply, dict) else None
        if not isinstance(access, str) or not access:
            raise InputError(
                f"Label Studio at {self.url} sent no access token for the personal access token.",
                fix="check url= (a Label Studio server of version 1.13 or later) and the token.",
            )
        self._secrets.append(access)
        self._rest.secrets.append(access)
        return f"Bearer {access}"

    def _call(
        self, method: str, path: str, body: Any = None, *, what: str, auth: str | None = None, renew: bool = True
    ) -> Any:
        authorization = auth if auth is not None else self._auth
        try:
            reply = self._rest.request(
                method, path, what=what, body=body, headers={"Authorization": authorization} if authorization else {}
            )
        except HttpRefused as exc:
            if exc.status == 401 and auth is None and self._auth.startswith("Bearer ") and renew:
                self._auth = self._authorization(self._token)  # the access token expired: a new one, once per request
                return self._call(method, path, body, what=what, renew=False)
            raise self._refused(exc, what) from None
        except NotJson:
            raise InputError(
                f"{self.url}{path.split('?')[0]} did not answer JSON; is it Label Studio?",
                fix="set url= to the address Label Studio runs at (e.g. http://localhost:8080).",
            ) from None
        return {} if reply is None else reply

    def _refused(self, exc: HttpRefused, what: str) -> InputError:
        detail = f": {exc.detail}" if exc.detail else ""
        if exc.status in (401, 403):
            return InputError(
                f"Label Studio at {self.url} refused the API token for {what} (HTTP {exc.status}){detail}.",
                fix="put your personal access token (Label Studio: Account & Settings -> Personal "
                "Access Token) in the environment variable named by token_env=.",
            )
        if exc.status == 404:
            return InputError(
                f"Label Studio at {self.url} has no {what} (HTTP 404).",
                fix="check project= (the number in the project's address) and url=.",
            )
        return InputError(
            f"Label Studio at {self.url} refused {what} (HTTP {exc.status}){detail}.",
            fix="check the server's log; the request is as its API documents.",
        )

    def _mask(self, text: str) -> str:
        """`text` without the token, the access token made from it, or anything shaped like a token."""
        return mask_secrets(text, *self._secrets)


def api_token(token_env: str) -> str:
    """Label Studio's API token from the environment variable named `token_env` (the key token_env=), or one
    clear error: the variable unset or empty, or token_env= given what looks like the token itself."""
    name = str(token_env)
    token = secret_in_env(
        name,
        what="token",
        fix="export LABEL_STUDIO_API_KEY=<your token> and leave token_env= out (or name that variable); the token "
        "never goes on the command line.",
    )
    if not token:
        raise InputError(
            f"url= needs Label Studio's API token in the environment variable {name}, which is not set.",
            fix=f"export {name}=<your personal access token (Label Studio: Account & Settings -> "
            "Personal Access Token)>; it is read from there only and never written.",
        )
    return token


def is_personal_access_token(token: str) -> bool:
    """A personal access token is a JWT (three base64url parts, the first `eyJ`); a legacy token is hex."""
    return token.count(".") == 2 and token.startswith("eyJ")
