"""A daemon to measure, driven through its REST API exactly as a client would drive it.

`appliance eval` and `appliance bench` both send their pages through here, so every
figure they report comes from the daemon's own pipeline: intake, dispatch, the worker
(raster, preprocessing, recognition) and the stored result. The daemon is started
in a throw-away directory (``LocalDaemon``) or reached by URL.
"""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

from appliance.config import Settings, dump_toml, settings_from_dict
from appliance.gpu import NvmlDevice

READY_TIMEOUT_S = 300
POLL_S = 0.5
MEMORY_SAMPLE_S = 0.25
LIST_PAGE = 500  # the API's largest page of the document listing


class Rejected(Exception):
    """The daemon refused an upload (other than "busy", which is retried)."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tree_rss_bytes(pid: int) -> tuple[int, int]:
    """(RSS of the process, RSS of it and its children)."""
    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    children = 0
    for child in proc.children(recursive=True):
        try:
            children += child.memory_info().rss
        except psutil.NoSuchProcess:  # a worker recycled between listing and reading
            pass
    return own, own + children


def idle_core_share(pid: int, seconds: float) -> float:
    """The share of one core the process and its children use over the next
    ``seconds`` (a worker that ends meanwhile is left out)."""
    parent = psutil.Process(pid)
    processes = [parent, *parent.children(recursive=True)]

    def cpu_s(process: psutil.Process) -> float | None:
        try:
            return sum(process.cpu_times()[:2])  # user and system
        except psutil.NoSuchProcess:
            return None
    before = [cpu_s(process) for process in processes]
    time.sleep(seconds)
    after = [cpu_s(process) for process in processes]
    return sum(b - a for a, b in zip(before, after) if a is not None and b is not None) / seconds


def daemon_config(settings: Settings, *, second_opinion: bool = True,
                  **engine_overrides) -> tuple[dict, Settings]:
    """The raw config a measuring daemon runs with, and the same as settings.

    Model paths are made absolute: the daemon's config file lives elsewhere. Review
    routing is off: pages are scored as usual, but none waits for a reviewer.
    ``second_opinion`` False turns the second reading of pages in doubt off too. An
    engine override of 0 or "" keeps the config's value; False is a value.
    """
    raw = tomllib.loads(settings.source.read_text()) if settings.source else {}
    # a measurement reads every page to the end: none may wait for a reviewer
    raw["review"] = {key: value for key, value in raw.get("review", {}).items()
                     if key != "required_fields"} | {"enabled": False}
    if not second_opinion:
        raw["review"]["second_opinion"] = False
    engine = raw.setdefault("engine", {})
    for key in ("model", "mmproj"):
        if getattr(settings.engine, key):
            engine[key] = str(getattr(settings.engine, key))
    engine.update({key: value for key, value in engine_overrides.items()
                   if value or value is False})
    base_dir = settings.source.parent if settings.source else Path.cwd()
    return raw, settings_from_dict(raw, base_dir=base_dir, source=settings.source)


class LocalDaemon:
    """A daemon in a subprocess with the given config, its data in ``workdir``."""

    def __init__(self, raw_config: dict, workdir: Path):
        raw = {**raw_config, "server": {**raw_config.get("server", {}), "host": "127.0.0.1",
                                        "port": _free_port()},
               "paths": {"data_dir": str(workdir / "data"), "output_dir": str(workdir / "output")}}
        self.database = Path(raw["paths"]["data_dir"]) / "appliance.db"  # read once it stops
        self.config = workdir / "daemon-config.toml"
        self.config.write_text(dump_toml(raw))
        self.url = f"http://127.0.0.1:{raw['server']['port']}"
        self.log_path = workdir / "daemon.log"
        self.log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "appliance.cli", "serve", "--config", str(self.config)],
            stdout=self.log, stderr=subprocess.STDOUT)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()

    def __enter__(self) -> LocalDaemon:
        return self

    def __exit__(self, *_exc) -> None:
        self.stop()


class PeakMemory:
    """Peak RSS of a process tree (when it runs here), and peak GPU memory where NVML
    answers, sampled while the block runs."""

    def __init__(self, pid: int | None, device_index: int = 0):
        self.pid = pid
        self.gpu = NvmlDevice(device_index) if NvmlDevice.available(device_index) else None
        self.rss_peak = self.vram_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.pid is not None:
                try:
                    self.rss_peak = max(self.rss_peak, tree_rss_bytes(self.pid)[1])
                except psutil.NoSuchProcess:
                    return
            if self.gpu is not None:
                self.vram_peak = max(self.vram_peak, self.gpu.sample().used_bytes)
            self._stop.wait(MEMORY_SAMPLE_S)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.gpu is not None:
            self.gpu.close()

    def report(self) -> dict:
        return {"rss_peak_mb": self.rss_peak / 2**20 if self.pid is not None else None,
                "vram_peak_mb": self.vram_peak / 2**20 if self.gpu is not None else None}


class ApplianceClient:
    """The REST calls a measurement needs, with a client's patience for 429s."""

    def __init__(self, url: str, daemon: LocalDaemon | None = None, timeout_s: float = 60):
        self.daemon = daemon
        self.http = httpx.Client(base_url=url, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApplianceClient:
        return self

    def __exit__(self, *_exc) -> None:
        self.close()

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.daemon is not None and self.daemon.process.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.daemon.process.returncode}:"
                                   f"\n{self.daemon.log_tail()}")
            try:
                response = self.http.get("/readyz")
                if response.status_code == 200:
                    return response.json()
            except httpx.TransportError:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"the daemon was not ready after {timeout_s:.0f} s")

    def submit(self, path: Path, form: dict | None = None) -> str:
        """Upload one file and return its document id; when the queue is full, wait as
        Retry-After says and send it again. Raises ``Rejected`` for any other refusal."""
        while True:
            with path.open("rb") as fh:
                response = self.http.post("/api/v1/documents", files={"file": (path.name, fh)},
                                          data=form or {})
            if response.status_code == 429:
                time.sleep(float(response.headers.get("Retry-After", 1)))
                continue
            if response.is_success:
                return response.json()["id"]
            try:
                error = response.json()["error"]
            except (ValueError, KeyError):
                error = {"code": f"http_{response.status_code}", "message": response.text[:500]}
            raise Rejected(error["code"], error["message"])

    def submit_all(self, uploads: list[tuple[Path, dict]],
                   concurrency: int) -> list[str | Rejected]:
        """Each upload's document id, or the ``Rejected`` error that refused it."""
        def submit(upload: tuple[Path, dict]) -> str | Rejected:
            try:
                return self.submit(*upload)
            except Rejected as exc:
                return exc

        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(submit, uploads))

    def wait_exported(self, ids: list[str]) -> dict[str, dict]:
        """Each document's listing entry once it is exported (final and written)."""
        pending, final = set(ids), {}
        while pending:  # list calls, not one call per document: polling must not load the daemon
            if self.daemon is not None and self.daemon.process.poll() is not None:
                raise RuntimeError(f"the daemon exited with {self.daemon.process.returncode}:"
                                   f"\n{self.daemon.log_tail()}")
            offset = 0
            while True:
                listing = self.http.get("/api/v1/documents",
                                        params={"limit": LIST_PAGE, "offset": offset}).json()
                for body in listing["documents"]:
                    if body["id"] in pending and body["exported_at"]:
                        final[body["id"]] = body
                        pending.discard(body["id"])
                if len(listing["documents"]) < LIST_PAGE:
                    break
                offset += LIST_PAGE
            if pending:
                time.sleep(POLL_S)
        return final

    def analyze(self, path: Path, model_id: str = "prebuilt-read") -> str:
        """Send one file as paperless-ngx does, through the Document Intelligence API (an
        AnalyzeDocumentRequest with base64Source, the PDF output asked for); answers its
        Operation-Location. Busy: wait as Retry-After says and send it again."""
        body = json.dumps({"base64Source": base64.b64encode(path.read_bytes()).decode()})
        while True:
            response = self.http.post(
                f"/documentintelligence/documentModels/{model_id}:analyze",
                params={"api-version": "2024-11-30", "outputContentFormat": "text",
                        "output": "pdf"},
                content=body, headers={"Content-Type": "application/json"})
            if response.status_code == 429:
                time.sleep(float(response.headers.get("Retry-After", 1)))
                continue
            if response.status_code == 202:
                return response.headers["Operation-Location"]
            error = response.json()["error"]
            raise Rejected(error["code"], error["message"])

    def analyze_all(self, paths: list[Path], concurrency: int) -> list[str]:
        with ThreadPoolExecutor(concurrency) as pool:
            return list(pool.map(self.analyze, paths))

    def wait_analyzed(self, locations: list[str]) -> dict[str, dict]:
        """Each analysis's last answer once it has succeeded or failed, polled as a
        Document Intelligence client polls: each operation by its Operation-Location, no
        sooner than its Retry-After says."""
        pending, final = list(locations), {}
        while pending:
            wait_s = POLL_S
            for location in list(pending):
                response = self.http.get(location)
                if response.json()["status"] in ("succeeded", "failed"):
                    final[location] = response.json()
                    pending.remove(location)
                else:
                    wait_s = max(wait_s, float(response.headers.get("Retry-After", 0)))
            if pending:
                time.sleep(wait_s)
        return final

    def result(self, document_id: str) -> dict:
        response = self.http.get(f"/api/v1/documents/{document_id}/result",
                                 params={"format": "json"})
        response.raise_for_status()
        return response.json()
