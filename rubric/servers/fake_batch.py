"""The OpenAI Batch API on the fake judge (rubric/servers/fake.py): files and batches, for trying
`gather mode=batch` without an account and for the tests.

    POST /v1/files (multipart: purpose=batch, file)   GET /v1/files, /v1/files/{id}, /v1/files/{id}/content
    POST /v1/batches (input_file_id, endpoint, completion_window, metadata)
    GET  /v1/batches, /v1/batches/{id}                 POST /v1/batches/{id}/cancel

A batch moves validating -> in_progress -> finalizing -> completed, one step per retrieve, so a client
polling it sees every status. While in progress each retrieve runs `lines_per_poll` more lines through the
fake judge (the same answers as online requests, `server.faults` consumed one per line: "500" puts the
line in the error file with its status). `expire_after_polls` = k: the batch expires after k retrieves in
progress, its unrun lines in the error file with code batch_expired, as OpenAI does after 24 h. A file
whose lines are not valid batch requests (or `reject_line` = n: its nth line) makes the batch `failed`
with the line in `errors`.
`calls` records every request (method, path, JSON body or form fields) for tests of the wire shapes.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import time
from typing import Any

ENDPOINTS = ("/v1/chat/completions", "/v1/completions")


class FakeBatchAPI:
    def __init__(self, server: Any):
        self.server = server
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.work: dict[str, dict[str, Any]] = {}  # batch id -> lines, position, outputs, errors
        self.calls: list[tuple[str, str, Any]] = []
        self.lines_per_poll = 1_000_000
        self.expire_after_polls: int | None = None
        self.reject_line: int | None = None  # validation fails at this line, as for a malformed request

    # routing ---------------------------------------------------------------------------------------
    def respond(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict, Any]:
        route, _, query = path.partition("?")
        parts = route.strip("/").split("/")[1:]  # ["files", id, "content"] or ["batches", id, "cancel"]
        with self.server._lock:
            self.server.requests += 1
            if "bad_key" in self.server.modes:
                return 401, {}, _error("Incorrect API key provided", "invalid_api_key")
            if parts[0] == "files":
                return self._files(method, parts[1:], headers, raw, query)
            return self._batches(method, parts[1:], raw)

    def _files(
        self, method: str, rest: list[str], headers: dict[str, str], raw: bytes, query: str
    ) -> tuple[int, dict, Any]:
        if method == "POST" and not rest:
            fields = _multipart(headers.get("content-type", ""), raw)
            self.calls.append((method, "/v1/files", {k: v for k, v in fields.items() if k != "file"}))
            if fields.get("purpose") != "batch" or "file" not in fields:
                return 400, {}, _error("expected purpose=batch and a file", "invalid_request_error")
            name, data = fields["file"]
            fid = f"file-{len(self.files) + 1:06d}"
            self.contents[fid] = data
            self.files[fid] = _file(fid, name, len(data), "batch")
            return 200, {}, self.files[fid]
        self.calls.append((method, "/v1/files" + "".join("/" + r for r in rest), None))
        if method == "GET" and not rest:
            wanted = dict(p.split("=", 1) for p in query.split("&") if "=" in p).get("purpose")
            data = [f for f in self.files.values() if wanted in (None, f["purpose"])]
            return 200, {}, {"object": "list", "data": data[::-1], "has_more": False}
        if method == "GET" and rest[0] in self.files:
            return 200, {}, self.contents[rest[0]] if rest[1:] == ["content"] else self.files[rest[0]]
        return 404, {}, _error(f"No such File object: {rest[0] if rest else ''}", "not_found")

    def _batches(self, method: str, rest: list[str], raw: bytes) -> tuple[int, dict, Any]:
        body = json.loads(raw) if raw else None
        self.calls.append((method, "/v1/batches" + "".join("/" + r for r in rest), body))
        if method == "POST" and not rest:
            return self._create(body if body is not None else {})  # no body: refused as one without the keys
        if method == "GET" and not rest:
            data = sorted(self.batches.values(), key=lambda b: -b["created_at"])
            return 200, {}, {"object": "list", "data": data, "has_more": False}
        if not rest or rest[0] not in self.batches:
            return 404, {}, _error("No such Batch object", "not_found")
        batch = self.batches[rest[0]]
        if method == "POST" and rest[1:] == ["cancel"]:
            self._finish(batch, "cancelled")
            return 200, {}, batch
        if method == "GET" and not rest[1:]:
            self._advance(batch)
            return 200, {}, batch
        return 404, {}, _error("not found", "not_found")

    # batches ---------------------------------------------------------------------------------------
    def _create(self, body: dict[str, Any]) -> tuple[int, dict, Any]:
        fid = body.get("input_file_id")
        if fid not in self.files or body.get("endpoint") not in ENDPOINTS or body.get("completion_window") != "24h":
            return (
                400,
                {},
                _error("bad input_file_id, endpoint or completion_window", "invalid_request_error"),
            )
        bid = f"batch_{len(self.batches) + 1:06d}"
        now = int(time.time())
        self.batches[bid] = {
            "id": bid,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": fid,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now + len(self.batches),  # strictly increasing, for newest-first lists
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        self.work[bid] = {"lines": [], "at": 0, "polls": 0, "out": [], "err": []}
        return 200, {}, self.batches[bid]

    def _advance(self, batch: dict[str, Any]) -> None:
        """One step of the batch's life per retrieve (see the module docstring)."""
        status, work = batch["status"], self.work[batch["id"]]
        if status == "validating":
            problem = self._validate(batch, work)
            if problem is not None:
                batch.update(status="failed", failed_at=int(time.time()), errors={"object": "list", "data": [problem]})
                return
            batch.update(status="in_progress", in_progress_at=int(time.time()))
            batch["request_counts"]["total"] = len(work["lines"])
        elif status == "in_progress":
            work["polls"] += 1
            if self.expire_after_polls is not None and work["polls"] > self.expire_after_polls:
                self._finish(batch, "expired")
                return
            for line in work["lines"][work["at"] : work["at"] + self.lines_per_poll]:
                self._run_line(batch, work, line)
                work["at"] += 1
            if work["at"] == len(work["lines"]):
                batch.update(status="finalizing", finalizing_at=int(time.time()))
        elif status == "finalizing":
            self._finish(batch, "completed")

    def _validate(self, batch: dict[str, Any], work: dict[str, Any]) -> dict[str, Any] | None:
        ids: set[str] = set()
        for n, raw in enumerate(self.contents[batch["input_file_id"]].splitlines(), 1):
            try:
                line = json.loads(raw)
                ok = (
                    isinstance(line, dict)
                    and isinstance(line.get("custom_id"), str)
                    and line["custom_id"] not in ids
                    and line.get("method") == "POST"
                    and line.get("url") == batch["endpoint"]
                    and isinstance(line.get("body"), dict)
                    and line["body"].get("model")
                )
            except json.JSONDecodeError:
                ok = False
            if not ok or n == self.reject_line:
                return {"code": "invalid_request", "message": f"line {n} is not a valid request", "line": n}
            ids.add(line["custom_id"])
            work["lines"].append(line)
        return None

    def _run_line(self, batch: dict[str, Any], work: dict[str, Any], line: dict[str, Any]) -> None:
        fault = self.server.faults.popleft() if self.server.faults else None
        self.server.answered["batch_line"] += 1
        status, payload = self.server.answer(line["url"], line["body"], fault)
        n = len(work["out"]) + len(work["err"]) + 1
        result = {
            "id": f"batch_req_{batch['id']}_{n}",
            "custom_id": line["custom_id"],
            "response": {"status_code": status, "request_id": f"req_{n}", "body": payload},
            "error": None,
        }
        counts = batch["request_counts"]
        if status == 200:
            work["out"].append(result)
            counts["completed"] += 1
        else:
            work["err"].append(result)
            counts["failed"] += 1

    def _finish(self, batch: dict[str, Any], status: str) -> None:
        work = self.work[batch["id"]]
        if status in ("expired", "cancelled"):  # the unrun lines fail, the finished ones are kept
            code = "batch_expired" if status == "expired" else "batch_cancelled"
            for line in work["lines"][work["at"] :]:
                work["err"].append(
                    {
                        "id": f"batch_req_{batch['id']}_x{len(work['err'])}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": f"This request could not be executed ({code})."},
                    }
                )
            work["at"] = len(work["lines"])
        for key, rows in (("output_file_id", work["out"]), ("error_file_id", work["err"])):
            if rows:
                fid = f"file-{len(self.files) + 1:06d}"
                data = b"".join(json.dumps(r).encode() + b"\n" for r in rows)
                self.contents[fid] = data
                self.files[fid] = _file(fid, f"{batch['id']}_{key[:-8]}.jsonl", len(data), "batch_output")
                batch[key] = fid
        batch.update({"status": status, f"{status}_at": int(time.time())})


def _file(fid: str, name: str, size: int, purpose: str) -> dict[str, Any]:
    return {
        "id": fid,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": name,
        "purpose": purpose,
        "status": "processed",
    }


def _multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """Form fields of a multipart/form-data body: text values, and (filename, bytes) for files."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"content-type: {content_type}\r\n\r\n".encode() + raw
    )
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)  # the part's bytes (None where it has none)
        data = payload if isinstance(payload, bytes) else b""
        filename = part.get_filename()
        if isinstance(name, str):  # a form field names itself: name="purpose", name="file"
            fields[name] = (filename, data) if filename else data.decode()
    return fields


def _error(message: str, code: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": code, "code": code, "param": None}}
