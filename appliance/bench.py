"""`appliance bench`: throughput of the daemon against the bare engine, on the same pages.

The daemon is driven through its REST API (a daemon started here in a throw-away
data directory, or one given by --url). The bare loop runs the same engine class in
this process on the same page files, with the daemon stopped, so the two figures
are comparable and the ratio is the appliance's own overhead.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

from appliance.config import Settings, dump_toml
from appliance.engines import PageRequest, create_engine
from appliance.intake import SNIFF_BYTES
from appliance.intake.sniff import sniff_kind
from appliance.raster import count_pages, render_page
from appliance.raster.synthetic import render_text_page, sample_lines

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300
IDLE_SETTLE_S = 3.0
POLL_S = 0.25


def make_pages(directory: Path, count: int) -> list[Path]:
    """``count`` one-page PNG documents, A4 at 150 dpi, each with different text."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"bench-{i:03d}.png"
        render_text_page(sample_lines(seed=i, count=24), font_size=30).save(path)
        paths.append(path)
    return paths


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tree_rss_bytes(pid: int) -> tuple[int, int]:
    """(RSS of the process, RSS of it and its children)."""
    proc = psutil.Process(pid)
    own = proc.memory_info().rss
    return own, own + sum(c.memory_info().rss for c in proc.children(recursive=True))


class LocalDaemon:
    """A daemon in a subprocess with the given config, its data in a temp directory."""

    def __init__(self, settings: Settings, workdir: Path):
        raw = tomllib.loads(settings.source.read_text()) if settings.source else {}
        raw.pop("paths", None)
        raw.setdefault("server", {}).update(host="127.0.0.1", port=_free_port())
        raw["paths"] = {"data_dir": str(workdir / "data"), "output_dir": str(workdir / "output")}
        self.config = workdir / "bench-config.toml"
        self.config.write_text(dump_toml(raw))
        self.url = f"http://127.0.0.1:{raw['server']['port']}"
        self.log = (workdir / "daemon.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "appliance.cli", "serve", "--config", str(self.config)],
            stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _wait_ready(client: httpx.Client, timeout_s: float = READY_TIMEOUT_S) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            response = client.get("/readyz")
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the daemon was not ready after {timeout_s:.0f} s")


def _drive(client: httpx.Client, pages: list[Path], concurrency: int) -> dict:
    def upload(path: Path) -> str:
        with path.open("rb") as fh:
            response = client.post("/api/v1/documents", files={"file": (path.name, fh)})
        response.raise_for_status()
        return response.json()["id"]

    start = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        ids = list(pool.map(upload, pages))
    pending, statuses = set(ids), {}
    while pending:  # one list call per poll, so polling does not load the daemon
        listing = client.get("/api/v1/documents", params={"limit": len(ids)}).json()
        for body in listing["documents"]:
            if body["id"] in pending and body["status"] in ("done", "partial", "failed"):
                statuses[body["id"]] = body["status"]
                pending.discard(body["id"])
        time.sleep(POLL_S)
    elapsed = time.monotonic() - start
    done_pages = sum(1 for s in statuses.values() if s == "done")
    return {"pages": len(pages), "pages_done": done_pages, "elapsed_s": elapsed,
            "pages_per_min": len(pages) / elapsed * 60}


def _bare(settings: Settings, engine_name: str, pages: list[Path]) -> dict:
    """The same engine, in this process, on the same files: raster + recognise."""
    engine = create_engine(engine_name, {"threads": settings.engine.threads})
    try:
        start = time.monotonic()
        for path in pages:
            with path.open("rb") as fh:
                kind = sniff_kind(fh.read(SNIFF_BYTES))
            for index in range(count_pages(path, kind, settings.limits.max_pixels)):
                image = render_page(path, kind, index, settings.raster.pdf_dpi,
                                    settings.limits.max_pixels)
                engine.recognize(image, PageRequest())
        elapsed = time.monotonic() - start
    finally:
        engine.close()
    return {"pages": len(pages), "elapsed_s": elapsed, "pages_per_min": len(pages) / elapsed * 60}


def run_bench(settings: Settings, *, pages: int, concurrency: int, url: str | None,
              report: Path | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = make_pages(workdir / "pages", pages)
        daemon = None if url else LocalDaemon(settings, workdir)
        try:
            with httpx.Client(base_url=url or daemon.url, timeout=60) as client:
                ready = _wait_ready(client)
                engine_name = ready["engine"]
                idle = None
                if daemon:
                    time.sleep(IDLE_SETTLE_S)
                    own, tree = _tree_rss_bytes(daemon.process.pid)
                    idle = {"daemon_rss_mb": own / 2**20, "daemon_with_workers_rss_mb": tree / 2**20}
                appliance = _drive(client, files, concurrency)
        finally:
            if daemon:
                daemon.stop()
        bare = _bare(settings, engine_name, files)
    result = {"engine": engine_name, "concurrency": concurrency, "appliance": appliance,
              "bare": bare, "idle": idle,
              "ratio_appliance_over_bare": appliance["pages_per_min"] / bare["pages_per_min"]}
    if report:
        report.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_report(result: dict) -> str:
    a, b = result["appliance"], result["bare"]
    rows = [
        f"engine                      {result['engine']}",
        f"pages                       {a['pages']} (done {a['pages_done']})",
        f"appliance pages/min         {a['pages_per_min']:.1f}  ({a['elapsed_s']:.1f} s, "
        f"concurrency {result['concurrency']})",
        f"bare engine pages/min       {b['pages_per_min']:.1f}  ({b['elapsed_s']:.1f} s)",
        f"ratio appliance/bare        {result['ratio_appliance_over_bare']:.3f}",
    ]
    if result["idle"]:
        rows.append(f"idle RSS daemon             {result['idle']['daemon_rss_mb']:.0f} MiB "
                    f"(with workers {result['idle']['daemon_with_workers_rss_mb']:.0f} MiB)")
    return "\n".join(rows)
