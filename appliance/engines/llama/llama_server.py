"""llama.cpp's own ``llama-server``, driven the way the parallel bench drives the engine.

``LlamaServer`` starts the binary on a free loopback port with N slots of the same
context per page (``-np N -c N*n_ctx``; without ``--kv-unified`` each slot has its own
KV stream, as in the engine), waits for ``/health`` and stops it again. ``complete``
sends one page through the OpenAI-compatible ``/v1/chat/completions``: the page image
as a PNG data URI at the model's input size, the engine's generic prompt, greedy,
exactly ``tokens`` tokens (``ignore_eos``; the server's ``n_predict`` overrides
``max_tokens``, see tools/server/server-schema.cpp). The bench calls it from N client
threads, as it calls the engine.

Only the standard library, Pillow and ``appliance.engines.chat``: this runs on a GPU
host without the daemon's packages.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from appliance.engines.chat import page_messages

log = logging.getLogger(__name__)

START_TIMEOUT_S = 600.0  # a 4B model from a cold page cache, on a slow disk
STOP_TIMEOUT_S = 15.0
REQUEST_TIMEOUT_S = 1800.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LlamaServer:
    """One ``llama-server`` process for N slots; a context manager."""

    def __init__(self, binary: Path, model: Path, mmproj: Path, *, parallel: int, n_ctx: int,
                 threads: int, n_gpu_layers: int = -1, flash_attn: bool = True,
                 log_path: Path | None = None, start_timeout_s: float = START_TIMEOUT_S):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [
            str(binary), "-m", str(model), "--mmproj", str(mmproj),
            "-np", str(parallel), "-c", str(parallel * n_ctx), "-b", "512", "-ub", "512",
            "--host", "127.0.0.1", "--port", str(self.port),
            "-t", str(threads), "-tb", str(threads),
            "-ngl", "all" if n_gpu_layers < 0 else str(n_gpu_layers),
            "-fa", "on" if flash_attn else "off",
            "--no-webui", "--cache-ram", "0",  # no prompt cache in RAM: the engine has none
            "--swa-full",  # as the engine's context (llama.cpp's library default)
        ]
        self.log_path = log_path
        self._start_timeout_s = start_timeout_s
        self.process: subprocess.Popen | None = None
        self._log = None

    def __enter__(self) -> LlamaServer:
        self._log = open(self.log_path, "ab") if self.log_path else None
        log.info("llama-server starting command=%s", " ".join(self.command))
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                        stdout=self._log or subprocess.DEVNULL,
                                        stderr=subprocess.STDOUT)
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    @property
    def pid(self) -> int:
        return self.process.pid

    def _wait_healthy(self) -> None:
        """``/health`` answers 503 while the model loads and 200 once it serves."""
        deadline = time.monotonic() + self._start_timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with {self.process.returncode} while "
                                   f"starting; see {self.log_path or 'its output'}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass  # not listening yet, or 503 while loading
            time.sleep(0.25)
        raise RuntimeError(f"llama-server did not become healthy within "
                           f"{self._start_timeout_s:.0f} s")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not end in time."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                log.warning("llama-server ignored SIGTERM for %.0f s; killing it", STOP_TIMEOUT_S)
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


def chat_request(image: Image.Image, prompt_text: str, side: int, tokens: int) -> dict:
    """One page as an OpenAI chat completion asking for exactly ``tokens`` tokens."""
    return {
        "messages": page_messages(image, prompt_text, side),
        "max_tokens": tokens, "n_predict": tokens, "ignore_eos": True,
        "temperature": 0.0, "seed": 0, "stream": False,
    }


@dataclass(frozen=True)
class ServedPage:
    latency_s: float  # request sent to answer read, as a client sees it
    completion_tokens: int
    prompt_tokens: int
    prompt_ms: float | None  # the server's own timings for this request
    predicted_ms: float | None


def complete(url: str, body: dict, timeout_s: float = REQUEST_TIMEOUT_S) -> ServedPage:
    data = json.dumps(body).encode()
    request = urllib.request.Request(url + "/v1/chat/completions", data=data,
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.load(response)
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"llama-server answered {exc.code}: "
                           f"{exc.read()[:500].decode(errors='replace')}") from exc
    latency = time.perf_counter() - started
    usage, timings = answer.get("usage") or {}, answer.get("timings") or {}
    return ServedPage(latency, int(usage.get("completion_tokens", 0)),
                      int(usage.get("prompt_tokens", 0)), timings.get("prompt_ms"),
                      timings.get("predicted_ms"))

