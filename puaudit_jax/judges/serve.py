"""A real OpenAI-compatible server on loopback: llama.cpp's server serving a GGUF model.

llama.cpp's server (``llama-cpp-python[server]``, the ``serve`` extra) serving a GGUF model, by default
the bundled SmolLM2-135M-Instruct.

    with LocalServer(ServeConfig(port=8765)) as server:
        judge = OpenAIChatJudge(server.base_url, server.config.alias)

:class:`LocalServer` starts ``python -m llama_cpp.server`` as a child process in its own process
group, waits until ``GET /v1/models`` answers (or the process exits, or ``startup_timeout``
passes: then it raises with the tail of the server's log), and stops it with SIGTERM, then
SIGKILL after ``stop_timeout`` seconds. On Linux the server also gets SIGTERM when the process
that started it dies, so a killed run leaves no server behind. The server's output goes to ``log`` (default a temporary
file). The model's own chat template (GGUF metadata) renders chat requests; the completions
endpoint takes raw text and returns ``top_logprobs`` (the logprob judge). llama.cpp's server runs
one request at a time: concurrent clients queue.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from puaudit_runtime.launch import free_port

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeConfig:
    """Settings of :class:`LocalServer` (``puaudit serve-local``'s options are generated from them).

    Attributes:
        model: a bundled name (smollm2), a .gguf file or a folder holding one
        alias: the model name clients send (the requests' "model")
        host: loopback address to listen on
        port: TCP port; 0 picks a free one
        n_ctx: context window in tokens
        threads: CPU threads of the server (default: llama.cpp's choice)
        startup_timeout: seconds to wait for the server to answer
        stop_timeout: seconds between SIGTERM and SIGKILL when stopping
        log: file receiving the server's output (default: a temporary file)
    """

    model: str = "smollm2"
    alias: str = "smollm2"
    host: str = "127.0.0.1"
    port: int = 8765
    n_ctx: int = 8192
    threads: int | None = None
    startup_timeout: float = 180.0
    stop_timeout: float = 10.0
    log: str | None = None

    def __post_init__(self):
        if self.host not in LOOPBACK:
            raise ValueError(f"host must be a loopback address {LOOPBACK}, got {self.host!r}")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        if self.n_ctx < 256:
            raise ValueError(f"n_ctx must be >= 256 tokens, got {self.n_ctx}")


def server_available() -> bool:
    """Whether llama.cpp's server is installed (``pip install '.[serve]'``)."""
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None


def server_command(config: ServeConfig, port: int) -> list[str]:
    """The ``python -m llama_cpp.server`` command line of ``config`` on ``port``."""
    from probes.models.pretrained import gguf_file

    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_file(config.model))]
    cmd += ["--model_alias", config.alias, "--host", config.host, "--port", str(port)]
    cmd += ["--n_ctx", str(config.n_ctx)]
    if config.threads:
        cmd += ["--n_threads", str(config.threads), "--n_threads_batch", str(config.threads)]
    return cmd


class LocalServer:
    """llama.cpp's OpenAI-compatible server as a child process (module docstring).

    A context manager; ``start()`` / ``stop()`` for longer lives. ``base_url`` is ``http://host:port/v1``.
    """

    def __init__(self, config: ServeConfig = ServeConfig()):
        self.config = config
        self.port = config.port or free_port(config.host)
        self.base_url = f"http://{config.host}:{self.port}/v1"
        self.process: subprocess.Popen | None = None
        self.log_path = Path(config.log) if config.log else None

    def start(self) -> LocalServer:
        """Start the server (if not running) and wait until it answers; returns self.

        Raises:
            RuntimeError: the server is not installed, or exited while starting.
            TimeoutError: it was not ready after ``startup_timeout`` seconds.
        """
        if not server_available():
            raise RuntimeError("llama.cpp's server is not installed: pip install -e '.[serve]' (or make serve-install)")
        if self.process is not None and self.process.poll() is None:
            return self
        if self.log_path is None:
            fd, name = tempfile.mkstemp(prefix="puaudit-serve-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                server_command(self.config, self.port),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() ends it and its threads
                preexec_fn=_die_with_parent,
            )
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.config.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"llama.cpp server exited with code {self.process.returncode} while starting:\n{self.log_tail()}"
                )
            if self.ready():
                return
            time.sleep(0.25)
        raise TimeoutError(
            f"llama.cpp server not ready on {self.base_url} after {self.config.startup_timeout}s:\n{self.log_tail()}"
        )

    def ready(self) -> bool:
        """Whether ``GET /v1/models`` answers with the served alias."""
        try:
            with urllib.request.urlopen(self.base_url + "/models", timeout=2) as resp:
                ids = [m.get("id") for m in json.loads(resp.read()).get("data", [])]
            return self.config.alias in ids
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's log ("(no log)" without one)."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text("utf-8", "replace").splitlines()[-lines:])

    def stop(self) -> int | None:
        """SIGTERM to the server's process group, SIGKILL after ``stop_timeout``; its exit code."""
        proc, self.process = self.process, None
        if proc is None:
            return None
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(self.config.stop_timeout)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait(self.config.stop_timeout)
        return proc.returncode

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, SIGTERM when the process that started the server dies.

    A killed test run or experiment then leaves no server behind; elsewhere nothing.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
