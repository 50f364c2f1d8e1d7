"""The OpenAI Batch API through the `openai` client: upload a batch file, create a batch, read its status,
download its output and error files (used by rubric/judge/batch/lines.py).

Every call that creates something remote can be found again after a kill: an upload carries a file name
made from its content hash (`find_upload`), and a batch is found by its input file (`find_batch`), so a
resumed gather adopts what an interrupted one created instead of paying for it twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rubric.errors import InputError
from rubric.judge.http import refused_at
from rubric.judge.settings import JudgeConfig
from rubric.secrets import mask_secrets

TERMINAL = ("completed", "failed", "expired", "cancelled")


class BatchAPI:
    def __init__(self, cfg: JudgeConfig):
        import openai

        key = cfg.resolved_api_key()
        if not key:
            raise InputError(
                f"no API key: the environment variable {cfg.api_key_env} is not set.",
                fix=f"export {cfg.api_key_env}=..., or write the files only with submit=false.",
            )
        if cfg.is_local:
            raise InputError(
                "judge.base_url=local serves no Batch API.",
                fix="write the files with submit=false and run them with vLLM's run_batch, or gather online.",
            )
        base_url = cfg.resolved_base_url() or "https://api.openai.com/v1"
        if refused_at(base_url):  # at once, not after the client's retries
            raise InputError(
                f"connection refused at {base_url}: nothing listens there.",
                fix="start the judge's server or correct judge.base_url (or write the files only with submit=false).",
            )
        self._key = key
        self._openai = openai
        # The client retries 408/409/429/5xx itself; timeouts and retries stated, as for online requests.
        self.client = openai.OpenAI(
            api_key=key, base_url=cfg.resolved_base_url(), timeout=cfg.timeout, max_retries=cfg.max_retries
        )

    def close(self) -> None:
        self.client.close()

    def upload(self, path: Path, name: str) -> str:
        return self._call(
            "upload the batch file",
            lambda: self.client.files.create(file=(name, path.read_bytes(), "application/jsonl"), purpose="batch"),
        ).id

    def find_upload(self, name: str, size: int) -> str | None:
        """The id of an earlier upload of this very file (same name, which holds its hash, and size)."""
        page = self._call("list the uploaded files", lambda: self.client.files.list(purpose="batch"))
        for n, f in enumerate(page):
            if f.filename == name and f.bytes == size:
                return f.id
            if n > 1000:
                break
        return None

    def create(self, file_id: str, endpoint: str, metadata: dict[str, str]) -> str:
        return self._call(
            "create the batch",
            lambda: self.client.batches.create(
                input_file_id=file_id,
                endpoint=endpoint,  # type: ignore[arg-type]  # lines.endpoint: a path the SDK's Literal names
                completion_window="24h",
                metadata=metadata,
            ),
        ).id

    def find_batch(self, file_id: str, since: float) -> str | None:
        """The batch an earlier run created from `file_id` (newest first; none older than `since`)."""
        page = self._call("list the batches", lambda: self.client.batches.list(limit=100))
        for b in page:
            if b.input_file_id == file_id:
                return b.id
            if b.created_at < since - 3600:
                break
        return None

    def retrieve(self, batch_id: str) -> Any:
        return self._call(f"read batch {batch_id}", lambda: self.client.batches.retrieve(batch_id))

    def download(self, file_id: str) -> bytes:
        return self._call(f"download file {file_id}", lambda: self.client.files.content(file_id)).content

    def _call(self, what: str, call: Any) -> Any:
        """One API call; what the client could not retry away becomes one line that says what to do."""
        errors = self._openai
        try:
            return call()
        except errors.AuthenticationError as exc:
            raise InputError(
                f"the endpoint refused the key when asked to {what} ({self._said(exc)}).",
                fix="check the judge's API key.",
            ) from None
        except errors.NotFoundError as exc:
            raise InputError(
                f"the endpoint could not {what} (HTTP 404: {self._said(exc)}).",
                fix="use an endpoint that serves the Batch API (OpenAI's), or write the files with "
                "submit=false and run them with vLLM's run_batch.",
            ) from None
        except errors.APIStatusError as exc:
            raise InputError(
                f"the endpoint could not {what} (HTTP {exc.status_code}: {self._said(exc)}).",
                fix="rerun later: what was submitted is recorded and picked up again.",
            ) from None
        except errors.APIConnectionError as exc:
            raise InputError(
                f"cannot reach the endpoint to {what} ({type(exc).__name__}).",
                fix="check judge.base_url and the network, then rerun: a submitted batch is picked up again.",
            ) from None

    def _said(self, exc: Any) -> str:
        return mask_secrets(str(getattr(exc, "message", exc)), self._key)[:200]
