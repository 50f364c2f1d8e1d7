"""target=phoenix: the calibrated scores as Phoenix span annotations and session annotations.

Per judged turn, one annotation on the span of the reply: name `role_rubric/adherence`, annotator kind LLM,
score the calibrated adherence, label adheres / violates, the one-line rationale as its explanation, and the
metadata of every target (each question's calibrated and raw expected answer, the shift check, the judge).
Per conversation, one session annotation `role_rubric/session_adherence` (score the conversation's score,
label pass / fail). Every annotation carries the identifier `role-rubric` (IDENTIFIER), whatever the model, and
the model's checksum in its metadata (`model_sha256`): Phoenix keeps one annotation per (name, span or session,
identifier), so a second publish replaces the first, never adds to it, a stopped publish resumes by running
it again, and a retrained model's scores replace the earlier model's (one current score per turn; Phoenix
keeps no history of a replaced annotation). Sessions are looked up first, and Phoenix refuses a batch
that names a span it does not have as a whole: traces deleted since the import are one line, with nothing of
that batch written.

compare-judges' disagreement rows (disagreements=) become span annotations `role_rubric/disagreement/<question>`
on their turns' spans, identified by the judge and the reviewer (replaced by a second publish).
`PhoenixTarget` is this module's `PublishTarget` (calibration/connectors/targets.py).

The API key comes from the environment variable token_env= names (PHOENIX_API_KEY by default) and is never
printed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from calibration.connectors.targets import Job, PublishTarget
from calibration.publish.disagreements import Disagreements
from calibration.publish.results import EVALUATION_NAME, SESSION_NAME, Scored
from calibration.publish.state import mask_url
from calibration.schema.commands_publish import PhoenixKeys
from rubric.errors import InputError
from rubric.transport.rest import on_this_machine, opener_for

BATCH = 1000
"""Annotations per request."""
IDENTIFIER = "role-rubric"
"""Every role-rubric annotation's identifier: the same for every model, so that a new model's replaces the old."""


def score_annotations(scored: Scored) -> tuple[list[dict], list[dict]]:
    """(span annotations, session annotations) as Phoenix's REST API takes them."""
    identifier = IDENTIFIER
    spans = [
        {
            "name": EVALUATION_NAME,
            "annotator_kind": "LLM",
            "span_id": t.span_id,
            "identifier": identifier,
            "result": {
                "score": t.adherence,
                "label": "adheres" if t.adheres else "violates",
                "explanation": scored.rationale(t),
            },
            "metadata": scored.metadata(t),
        }
        for t in scored.turns
    ]
    sessions = [
        {
            "name": SESSION_NAME,
            "annotator_kind": "LLM",
            "session_id": s.conversation_id,
            "identifier": identifier,
            "result": {
                "score": s.score,
                "label": "pass" if s.success else "fail",
                "explanation": scored.session_rationale(s),
            },
            "metadata": {**scored.session_metadata(s), "success": str(s.success).lower()},
        }
        for s in scored.sessions
        if s.turns
    ]
    return spans, sessions


def disagreement_annotations(rows: Disagreements) -> list[dict]:
    """compare-judges' rows on a span as Phoenix span annotations: name `role_rubric/disagreement/<question>`,
    identifier the judge and the reviewer (so a second publish replaces each), score the gap; the reviewers'
    own rows `role_rubric/reviewer_disagreement/<question>`, identifier `role-rubric/reviewers`, score the
    spread."""
    return [
        {
            "name": r.name,
            "annotator_kind": r.annotator_kind,
            "span_id": r.span_id,
            "identifier": r.identifier,
            "result": {"score": r.value, "label": r.label, "explanation": r.rationale()},
            "metadata": r.metadata(),
        }
        for r in rows.rows
        if r.span_id
    ]


class PhoenixTarget(PublishTarget[PhoenixKeys]):
    """target=phoenix: every span annotation, then every session annotation, then compare-judges' disagreement
    rows (the API key read from $token_env; progress: a bar or status lines over the annotations sent)."""

    address_key = "url"

    def publish(self, job: Job) -> dict[str, Any]:
        from phoenix.client.exceptions import PhoenixException

        from calibration.connectors.phoenix.source import TOKEN_ENV, api_key

        keys = self.keys
        url = str(keys.url).rstrip("/")
        token_env = keys.token_env
        key = api_key(None if token_env in (None, TOKEN_ENV) else token_env)  # one named on purpose must be set
        _probe(url, float(keys.timeout))
        try:
            client = _client(url, key, float(keys.timeout))
            out: dict[str, Any] = {}
            if job.scored is not None:
                out |= self._scores(client, url, key, job.scored)
            for rows in job.disagreement_lists():
                out[rows.result_key] = self._disagreements(client, url, key, rows)
            return out
        except PhoenixException as exc:  # its client asks the server's version first: another server has none
            raise InputError(
                f"the server at {mask_url(url)} does not answer as a Phoenix server does ({exc}).",
                fix="check url= (the Phoenix server's own address and port); a second publish replaces what was sent.",
            ) from None

    def _scores(self, client: Any, url: str, key: str | None, scored: Scored) -> dict[str, Any]:
        from rubric.progress import progress_bar

        spans, sessions = score_annotations(scored)
        _check_sessions(client, url, key, [a["session_id"] for a in sessions], scored)
        with progress_bar(len(spans) + len(sessions), self.progress, desc="publish", unit="annotation") as bar:
            for start in range(0, len(spans), BATCH):
                batch = spans[start : start + BATCH]
                _send(url, key, partial(client.spans.log_span_annotations, span_annotations=batch, sync=True),
                      scored.scores)  # fmt: skip
                bar.update(len(batch))
            for start in range(0, len(sessions), BATCH):
                batch = sessions[start : start + BATCH]
                _send(
                    url,
                    key,
                    partial(client.sessions.log_session_annotations, session_annotations=batch, sync=True),
                    scored.scores,
                )
                bar.update(len(batch))
        self.say(
            f"publish: {len(spans)} span and {len(sessions)} session annotations on {mask_url(url)} "
            f"(identifier {IDENTIFIER}, model {scored.model.source_id}: a later publish, of any model, replaces them)"
        )
        return {"span_annotations": len(spans), "session_annotations": len(sessions)}

    def _disagreements(self, client: Any, url: str, key: str | None, rows: Disagreements) -> dict[str, int]:
        from rubric.progress import progress_bar

        found = disagreement_annotations(rows)
        with progress_bar(len(found), self.progress, desc=f"publish: {rows.kind}s", unit="annotation") as bar:
            for start in range(0, len(found), BATCH):
                batch = found[start : start + BATCH]
                _send(url, key, partial(client.spans.log_span_annotations, span_annotations=batch, sync=True),
                      rows.path)  # fmt: skip
                bar.update(len(batch))
        no_span = [r.where for r in rows.rows if not r.span_id]
        untraced = rows.untraced_line()
        self.say(
            f"publish: {len(found)} {rows.kind} span annotations on {mask_url(url)} (a later publish replaces them)"
            + (f"; {len(no_span)} rows have a trace but no span id, not published: {', '.join(no_span[:3])}"
               if no_span else "")
            + (f"; {untraced}" if untraced else "")
        )  # fmt: skip
        return {"span_annotations": len(found), "untraced": len(rows.untraced) + len(no_span)}


def _probe(url: str, timeout: float) -> None:
    try:
        with opener_for(url).open(url + "/healthz", timeout=timeout) as reply:
            if reply.status == 200:
                return
    except OSError as exc:
        raise InputError(
            f"the Phoenix server at {mask_url(url)} does not answer ({getattr(exc, 'reason', None) or exc}).",
            fix="start it (`phoenix serve`) or pass url= the address it listens on.",
        ) from None
    raise InputError(f"{mask_url(url)} is not a Phoenix server (its /healthz did not answer OK).", fix="check url=.")


def _client(url: str, key: str | None, timeout: float) -> Any:
    import httpx
    from phoenix.client import Client

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    # the environment's proxies, as every request of publish, except for a server on this machine
    client = httpx.Client(base_url=url, headers=headers, timeout=timeout, trust_env=not on_this_machine(url))
    return Client(http_client=client)


def _check_sessions(client: Any, url: str, key: str | None, ids: list[str], scored: Scored) -> None:
    """Every conversation's session must be there before anything is written."""
    import httpx

    missing = []
    for sid in ids:
        try:
            client.sessions.get(session_id=sid)
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise _refused(url, key, exc) from None
            missing.append(sid)
        except httpx.HTTPError as exc:
            raise _refused(url, key, exc) from None
    if missing:
        raise InputError(
            f"{len(missing)} of the {len(ids)} conversations of these scores are no session on {mask_url(url)} "
            f"(deleted since the import, another server, or conversations not keyed by session.id): "
            f"{', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}; nothing was published.",
            path=scored.scores,
            fix="publish to the server the conversations were imported from, or import and score them again.",
        )


def _send(url: str, key: str | None, call: Callable[[], Any], path: Path | None) -> None:
    import httpx

    try:
        call()
    except httpx.HTTPStatusError as exc:
        text = exc.response.text
        gone = re.search(r"Spans with IDs (.+?) do not exist", text)
        if exc.response.status_code == 404 and gone:
            ids = gone.group(1).split(", ")
            raise InputError(
                f"{len(ids)} span(s) of these scores are not on {mask_url(url)} (deleted since the import, or another "
                f"server): {', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''}; Phoenix wrote none of that batch.",
                path=path,
                fix="publish to the server the conversations were imported from, or import and score them again.",
            ) from None
        raise _refused(url, key, exc) from None
    except httpx.HTTPError as exc:
        raise _refused(url, key, exc) from None


def _refused(url: str, key: str | None, exc: Exception) -> InputError:
    from rubric.secrets import mask_secrets

    response = getattr(exc, "response", None)
    detail = f"HTTP {response.status_code}: {response.text[:200]}" if response is not None else str(exc)
    auth = (
        " (a Phoenix with authentication on needs an API key in token_env=)"
        if response is not None and response.status_code in (401, 403)
        else ""
    )
    return InputError(
        f"the Phoenix server at {mask_url(url)} refused the annotations{auth}: {mask_secrets(detail, key)}",
        fix="check url= and the API key, then publish again: it resumes.",
    )
