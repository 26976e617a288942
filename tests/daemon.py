"""A real daemon in a subprocess on a free loopback port, for integration tests; and
``serving``, the API app alone behind a real uvicorn in a thread, where a test needs
the HTTP server but not the workers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import httpx

from appliance.config import Settings, dump_toml
from appliance.security import ApiKeys
from appliance.users import Users

READY_TIMEOUT_S = 240
SYSTEMD_ENV = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")  # only when a test asks


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(app, settings: Settings) -> Iterator[httpx.Client]:
    """``app`` served by uvicorn as the daemon configures it (``uvicorn_config``), on
    ``settings.server.host`` (a loopback address) and a free port; a client to it."""
    import uvicorn

    from appliance.server import uvicorn_config

    config = uvicorn_config(settings, app)
    config.port = 0  # any free port: the socket tells which
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    host, port = server.servers[0].sockets[0].getsockname()[:2]
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        with httpx.Client(base_url=f"http://{netloc}", timeout=10) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=15)


class Daemon:
    def __init__(self, tmp: Path, env: dict[str, str] | None = None, **sections):
        self.tmp = tmp
        self.env = env or {}  # added to the daemon's environment (NOTIFY_SOCKET, ...)
        self.port = free_port()
        self.data_dir = tmp / "data"
        self.output_dir = tmp / "output"
        # a short drain, so that stopping a test daemon mid-page stays quick
        config = {"server": {"host": "127.0.0.1", "port": self.port, "drain_timeout_s": 10},
                  "paths": {"data_dir": str(self.data_dir), "output_dir": str(self.output_dir)},
                  "engine": {"name": "classic", "threads": 1},
                  "workers": {"count": 1},
                  # tests not about review want every page read to the end
                  "review": {"enabled": False}}
        for section, values in sections.items():
            if isinstance(values, list):  # [[watch]] tables
                config[section] = values
            else:
                config.setdefault(section, {}).update(values)
        self.config = config
        self.config_path = tmp / "config.toml"
        self.config_path.write_text(dump_toml(config))
        self.log_path = tmp / "daemon.log"
        self.process: subprocess.Popen | None = None
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30)

    def start(self) -> "Daemon":
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "appliance.cli", "serve", "--config", str(self.config_path)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**{k: v for k, v in os.environ.items() if k not in SYSTEMD_ENV}, **self.env})
        return self

    @contextmanager
    def running(self) -> Iterator["Daemon"]:
        """Started and ready for the block; stopped after it, whatever happened."""
        self.start()
        try:
            self.wait_ready()
            yield self
        finally:
            self.stop()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"daemon exited with {self.process.returncode}:\n{self.log()}")
            try:
                response = self.client.get("/readyz")
                if response.status_code == 200:
                    return response.json()
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"daemon not ready after {timeout_s} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def upload(self, path: Path, **form) -> dict:
        with path.open("rb") as fh:
            response = self.client.post("/api/v1/documents", files={"file": (path.name, fh)},
                                        data=form)
        assert response.status_code == 201, response.text
        return response.json()

    def document(self, doc_id: str) -> dict:
        return self.client.get(f"/api/v1/documents/{doc_id}").json()

    def wait_final(self, doc_ids: list[str], timeout_s: float = 300) -> list[dict]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            docs = [self.document(d) for d in doc_ids]
            if all(d["status"] in ("done", "partial", "failed") for d in docs):
                return docs
            time.sleep(0.3)
        raise AssertionError(f"documents not final after {timeout_s} s: "
                             f"{[d['status'] for d in docs]}\n{self.log()}")

    def wait_exported(self, doc_ids: list[str], timeout_s: float = 120) -> list[dict]:
        """Until the documents' results are written (a final document is exported
        after its status turns final)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            docs = [self.document(d) for d in doc_ids]
            if all(d["exported_at"] for d in docs):
                return docs
            time.sleep(0.3)
        raise AssertionError(f"documents not exported after {timeout_s} s\n{self.log()}")

    def signal(self, sig: int) -> None:
        os.kill(self.process.pid, sig)

    def wait_exit(self, timeout_s: float = 60) -> int:
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"daemon still running after {timeout_s} s:\n{self.log()}") \
                from None

    def kill9(self) -> None:
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.client.close()


def with_accounts(tmp: Path, accounts: dict[str, str], password: str, review: dict,
                  **sections) -> Daemon:
    """A daemon with review on and sign-in accounts ({name: role}, each with
    ``password``): auth is on then, so the REST API wants a key, which its client
    sends."""
    users_file = tmp / "users.toml"
    for name, role in accounts.items():
        Users(users_file).add(name, role, password)
    keys_file = tmp / "api-keys.toml"
    key = ApiKeys(keys_file).add("tests")
    daemon = Daemon(tmp, review={"enabled": True, "users_file": str(users_file), **review},
                    auth={"api_keys_file": str(keys_file)}, **sections)
    daemon.client.headers["X-API-Key"] = key
    return daemon
