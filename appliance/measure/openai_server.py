"""llama-cpp-python's own OpenAI-compatible server, for `appliance bench --remote` and
the tests: the counterpart of an [[engine.remote]] endpoint, on a loopback port.

``python -m llama_cpp.server`` with a model pair and its projector (``--chat_format
mtmd``), as a site could run it on a GPU host, optionally with an API key and TLS.
It reads one request at a time; ``--interrupt_requests false`` makes a second request
wait its turn instead of cutting the first off. ``kill`` ends it as a crash would,
and ``start`` brings it back on the same port.
"""

from __future__ import annotations

import importlib
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from appliance.engines.llama.llama_server import free_port
from appliance.errors import InvalidRequest

START_TIMEOUT_S = 120.0  # a small model; a shaped one from a cold page cache
STOP_TIMEOUT_S = 10.0


def require_server() -> None:
    """llama-cpp-python's server needs its extras (uvicorn, fastapi, ...)."""
    try:
        importlib.import_module("llama_cpp.server.app")
    except ImportError as exc:
        raise InvalidRequest(f"llama-cpp-python's own server is needed, and its packages are "
                             f"missing (no module {exc.name or exc}): install "
                             f"'llama-cpp-python[server]' (pip install "
                             f"'llama-cpp-python[server]') in this environment") from None


class OpenAIServer:
    """One server process for one model pair; a context manager. ``url`` is the API
    base (ending in /v1), as an [[engine.remote]] table wants it."""

    def __init__(self, model: Path, mmproj: Path, log_path: Path, *, alias: str,
                 threads: int = 1, n_ctx: int = 4096, n_batch: int = 512,
                 n_gpu_layers: int = -1, flash_attn: bool = True, api_key: str | None = None,
                 tls: tuple[Path, Path] | None = None, start_timeout_s: float = START_TIMEOUT_S):
        self.port = free_port()
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}/v1"
        self.alias = alias
        self.command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model),
                        "--clip_model_path", str(mmproj), "--chat_format", "mtmd",
                        "--model_alias", alias, "--host", "127.0.0.1", "--port", str(self.port),
                        "--n_ctx", str(n_ctx), "--n_batch", str(n_batch),
                        "--n_threads", str(threads), "--n_threads_batch", str(threads),
                        "--n_gpu_layers", str(n_gpu_layers),
                        "--flash_attn", "true" if flash_attn else "false",
                        "--interrupt_requests", "false"]
        if api_key:
            self.command += ["--api_key", api_key]
        if tls:  # (certificate, key)
            self.command += ["--ssl_certfile", str(tls[0]), "--ssl_keyfile", str(tls[1])]
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # the test certificates are self-signed: the certificate is its own CA
        self._verify = ssl.create_default_context(cafile=str(tls[0])) if tls else True
        self.log_path = log_path
        self.start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> OpenAIServer:
        """Start it (again, on the same port) and wait until it lists its model."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode} "
                                   f"while starting:\n{self.log_tail()}")
            try:
                if httpx.get(self.url + "/models", headers=self._headers, verify=self._verify,
                             timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            time.sleep(0.2)
        raise RuntimeError(f"llama_cpp.server did not answer within {self.start_timeout_s:.0f} s"
                           f"; see {self.log_path}")

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def kill(self) -> None:
        """SIGKILL, as a crash or a pulled cable would end it."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        """SIGTERM to its process group, then SIGKILL if it does not end in time."""
        if self.process is None or self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.kill()
