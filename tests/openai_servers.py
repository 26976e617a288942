"""OpenAI-compatible servers on loopback ports, for the remote engine's tests.

``tiny_server`` is the real thing: llama-cpp-python's own server
(``appliance.measure.openai_server``) serving the tiny test model with its projector,
as a site would run it on a GPU host (optionally with an API key and TLS).

``ScriptedServer`` speaks just enough of ``/v1/chat/completions`` and ``/v1/models``
to fail the ways real servers fail (a 500, silence, an answer that is not JSON, a
completion with no choice), or to answer a fixed text after a delay while reading
many requests at once: a server with more capacity than this 2-core machine has. A
test may ``hold`` its completions and ``release`` them: it then says when each one is
answered, not this machine's load.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from appliance.measure.openai_server import OpenAIServer


def tiny_server(model: Path, mmproj: Path, log_dir: Path, **options) -> OpenAIServer:
    """llama-cpp-python's server with this model pair, listing it as "tiny"; a context
    manager. ``kill`` it (as a crash would) and ``start`` it again on the same port."""
    return OpenAIServer(model, mmproj, log_dir / f"llama-cpp-server-{next(_SERVERS)}.log",
                        alias="tiny", **options)


_SERVERS = itertools.count(1)


class ScriptedServer:
    """A loopback server whose behaviour a test sets (``mode``); a context manager.

    ``ok``: after ``delay_s`` stream ``text`` (with token logprobs unless told not
    to), then [DONE];
    ``error500``: answer 500; ``hang``: accept and never answer (until closed);
    ``nonsense``: a 200 event stream whose data is not JSON; ``no_choice``: a
    completion whose ``choices`` is empty. ``/v1/models`` answers 200 in every mode
    but ``error500``. After ``hold``, a completion waits for ``release`` first.
    """

    def __init__(self, mode: str = "ok", *, delay_s: float = 0.0, text: str = "Total 1.00",
                 model: str = "scripted", logprobs: bool = True):
        self.mode, self.delay_s, self.text, self.model = mode, delay_s, text, model
        self.logprobs = logprobs  # False: a server that sends none (as Ollama)
        self.requests = 0  # chat completions received
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._holding = False
        self._held: list[threading.Event] = []  # completions waiting for release()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> ScriptedServer:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._closing.set()
        self.release()  # unanswered: the server is closing
        self._server.shutdown()
        self._server.server_close()

    def hold(self) -> None:
        """From now on each completion waits for ``release`` before it is answered."""
        self._holding = True

    @property
    def held(self) -> int:
        """Completions waiting for ``release``."""
        with self._lock:
            return len(self._held)

    def release(self) -> int:
        """Answer the completions held now (later ones wait for the next call); how many."""
        with self._lock:
            held, self._held = self._held, []
        for gate in held:
            gate.set()
        return len(held)

    def _handler(self):
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if scripted.mode == "error500":
                    return self._send(500, b'{"error": "scripted failure"}')
                self._send(200, json.dumps({"object": "list", "data": [
                    {"id": scripted.model, "object": "model"}]}).encode())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                gate = threading.Event() if scripted._holding else None
                with scripted._lock:
                    scripted.requests += 1
                    scripted.in_flight += 1
                    scripted.peak_in_flight = max(scripted.peak_in_flight, scripted.in_flight)
                    if gate is not None:
                        scripted._held.append(gate)
                try:
                    if gate is not None:
                        gate.wait()
                        if scripted._closing.is_set():  # released by the close
                            return
                    self._answer(scripted.mode)
                finally:
                    with scripted._lock:
                        scripted.in_flight -= 1

            def _answer(self, mode: str) -> None:
                if mode == "error500":
                    return self._send(500, b'{"error": "scripted failure"}')
                if mode == "hang":
                    scripted._closing.wait()
                    return None
                if mode == "no_choice":
                    return self._send(200, json.dumps({"model": scripted.model,
                                                       "choices": []}).encode())
                scripted._closing.wait(scripted.delay_s)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if mode == "nonsense":
                    self.wfile.write(b"data: <html>not json</html>\n\n")
                    return None
                for word in scripted.text.split(" "):
                    logprobs = {"content": [{"token": word + " ", "logprob": -0.01, "top_logprobs": [
                        {"token": word + " ", "logprob": -0.01}]}]} if scripted.logprobs else None
                    self._event({"delta": {"content": word + " "}, "logprobs": logprobs,
                                 "finish_reason": None})
                self._event({"delta": {}, "finish_reason": "stop"})
                self.wfile.write(b"data: [DONE]\n\n")
                return None

            def _event(self, choice: dict) -> None:
                chunk = {"model": scripted.model, "choices": [{"index": 0, **choice}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler


def endpoint(url: str, model: str, name: str, **options) -> dict:
    """An [[engine.remote]] table for a test config."""
    return {"url": url, "model": model, "name": name, "image_side": 224, **options}


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key, made with openssl."""
    cert, key = directory / "server.crt", directory / "server.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key
