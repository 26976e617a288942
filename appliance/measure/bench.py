"""`appliance bench`: throughput of the daemon against the bare engine, on the same pages.

The daemon is driven through its REST API (a daemon started here in a throw-away
data directory, or one given by --url). The bare loop runs the same engine class in
this process on the same page files, with the daemon stopped, so the two figures
are comparable and the ratio is the appliance's own overhead.
"""

from __future__ import annotations

import json
import math
import random
import threading
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

from appliance.config import Settings, WatchFolder, dump_toml, settings_from_dict
from appliance.daemon import resolve_engine
from appliance.engines import bare_loop
from appliance.errors import InvalidRequest
from appliance.intake.watch import FolderWatcher
from appliance.raster.synthetic import render_text_page, sample_lines

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 300
IDLE_SETTLE_S = 3.0
POLL_S = 0.5


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

    def __init__(self, raw_config: dict, workdir: Path):
        raw = {**raw_config, "server": {**raw_config.get("server", {}), "host": "127.0.0.1",
                                        "port": _free_port()},
               "paths": {"data_dir": str(workdir / "data"), "output_dir": str(workdir / "output")}}
        self.config = workdir / "bench-config.toml"
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


def _wait_ready(client: httpx.Client, daemon: LocalDaemon | None,
                timeout_s: float = READY_TIMEOUT_S) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon is not None and daemon.process.poll() is not None:
            raise RuntimeError(f"the daemon exited with {daemon.process.returncode}:\n"
                               f"{daemon.log_tail()}")
        try:
            response = client.get("/readyz")
            if response.status_code == 200:
                return response.json()
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the daemon was not ready after {timeout_s:.0f} s")


def _drive(client: httpx.Client, pages: list[Path], concurrency: int,
           form: dict | None = None) -> dict:
    """Upload the pages, wait until each is exported; the daemon's timestamps time it."""
    def upload(path: Path) -> str:
        with path.open("rb") as fh:
            response = client.post("/api/v1/documents", files={"file": (path.name, fh)},
                                   data=form or {})
        response.raise_for_status()
        return response.json()["id"]

    with ThreadPoolExecutor(concurrency) as pool:
        ids = list(pool.map(upload, pages))
    final = _wait_exported(client, ids)
    # The daemon's own clock, from the first intake to the last export: the polling
    # interval and the client's clock do not enter the figure.
    elapsed = (max(b["exported_at"] for b in final.values())
               - min(b["created_at"] for b in final.values()))
    done_pages = sum(1 for b in final.values() if b["status"] == "done")
    latencies = sorted(b["exported_at"] - b["created_at"] for b in final.values())
    return {"pages": len(pages), "pages_done": done_pages, "elapsed_s": elapsed,
            "pages_per_min": len(pages) / elapsed * 60, "ids": ids,
            "latency_p50_s": _percentile(latencies, 50),
            "latency_p95_s": _percentile(latencies, 95)}


def _wait_exported(client: httpx.Client, ids: list[str]) -> dict[str, dict]:
    pending, final = set(ids), {}
    while pending:  # one list call per poll, so polling does not load the daemon
        listing = client.get("/api/v1/documents", params={"limit": 500}).json()
        for body in listing["documents"]:
            if body["id"] in pending and body["exported_at"]:
                final[body["id"]] = body
                pending.discard(body["id"])
        time.sleep(POLL_S)
    return final


def _percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile of sorted values."""
    return values[max(0, math.ceil(pct / 100 * len(values)) - 1)]


def run_degenerate_experiment(settings: Settings, *, pages: int, concurrency: int) -> dict:
    """Healthy-page latency with and without a looping page in flight (seed 001).

    Healthy pages are read by the classic reader of the vision workers; the looping
    page goes to the vision model, which (the tiny test model always does) loops
    until the repetition guard stops it and then climbs the retry ladder.
    """
    raw, settings = bench_config(settings, tokens=0)
    if resolve_engine(settings)[0].engine != "llama":
        raise InvalidRequest("--inject-degenerate needs engine.name = 'llama' with a model")
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = make_pages(workdir / "pages", pages)
        looping = make_pages(workdir / "looping", 1)
        daemon = LocalDaemon(raw, workdir)
        try:
            with httpx.Client(base_url=daemon.url, timeout=60) as client:
                _wait_ready(client, daemon)
                healthy = {"engine": "classic"}
                baseline = _drive(client, files, concurrency, healthy)
                with looping[0].open("rb") as fh:
                    loop_id = client.post("/api/v1/documents",
                                          files={"file": ("looping.png", fh)}).json()["id"]
                injected = _drive(client, files, concurrency, healthy)
                looped = _wait_exported(client, [loop_id])[loop_id]
        finally:
            daemon.stop()
    for run in (baseline, injected):
        run.pop("ids")
    return {"pages": pages, "concurrency": concurrency, "workers": settings.workers.count,
            "without_looping_page": baseline, "with_looping_page": injected,
            "looping_page_s": looped["exported_at"] - looped["created_at"]}


def format_degenerate_report(result: dict) -> str:
    rows = [f"healthy pages {result['pages']}, workers {result['workers']}, "
            f"concurrency {result['concurrency']}"]
    for label, key in (("without a looping page", "without_looping_page"),
                       ("with a looping page   ", "with_looping_page")):
        run = result[key]
        rows.append(f"{label}  healthy latency p50 {run['latency_p50_s'] * 1000:.0f} ms, "
                    f"p95 {run['latency_p95_s'] * 1000:.0f} ms")
    rows.append(f"the looping page itself took {result['looping_page_s']:.1f} s "
                f"(guard, retry ladder, fallback)")
    return "\n".join(rows)


def _bare(settings: Settings, pages: list[Path]) -> dict:
    """The engine's own library on the same page files, in this process."""
    spec, _notice = resolve_engine(settings)
    elapsed = bare_loop(spec.engine, spec.options, pages)
    return {"pages": len(pages), "elapsed_s": elapsed, "pages_per_min": len(pages) / elapsed * 60}


def bench_config(settings: Settings, tokens: int) -> tuple[dict, Settings]:
    """The raw config the benchmark's daemon runs with, and the same as settings.

    The model paths in it are made absolute: the daemon's config file lives elsewhere.
    """
    raw = tomllib.loads(settings.source.read_text()) if settings.source else {}
    engine = raw.setdefault("engine", {})
    for key in ("model", "mmproj"):
        if getattr(settings.engine, key):
            engine[key] = str(getattr(settings.engine, key))
    if tokens:
        engine["fixed_tokens"] = tokens
    base_dir = settings.source.parent if settings.source else Path.cwd()
    return raw, settings_from_dict(raw, base_dir=base_dir, source=settings.source)


def _stage_ms(client: httpx.Client, ids: list[str]) -> dict[str, float]:
    """Mean milliseconds per page of each stage the workers timed."""
    totals: dict[str, list[float]] = {}
    for doc_id in ids:
        body = client.get(f"/api/v1/documents/{doc_id}/result", params={"format": "json"})
        for page in body.json()["pages"]:
            for stage, ms in ((page["provenance"] or {}).get("timings_ms") or {}).items():
                totals.setdefault(stage, []).append(ms)
    return {stage: sum(values) / len(values) for stage, values in totals.items()}


def run_bench(settings: Settings, *, pages: int, concurrency: int, url: str | None,
              report: Path | None, tokens: int = 0) -> dict:
    raw, settings = bench_config(settings, tokens)
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = make_pages(workdir / "pages", pages)
        daemon = None if url else LocalDaemon(raw, workdir)
        try:
            with httpx.Client(base_url=url or daemon.url, timeout=60) as client:
                ready = _wait_ready(client, daemon)
                idle = None
                if daemon:
                    time.sleep(IDLE_SETTLE_S)
                    own, tree = _tree_rss_bytes(daemon.process.pid)
                    idle = {"daemon_rss_mb": own / 2**20,
                            "daemon_with_workers_rss_mb": tree / 2**20}
                appliance = _drive(client, files, concurrency)
                stages = _stage_ms(client, appliance.pop("ids"))
        finally:
            if daemon:
                daemon.stop()
        bare = _bare(settings, files)
    per_page_ms = {name: r["elapsed_s"] / r["pages"] * 1000
                   for name, r in (("appliance", appliance), ("bare", bare))}
    result = {"engine": ready["engine"], "tokens_per_page": tokens or None,
              "concurrency": concurrency, "appliance": appliance, "bare": bare, "idle": idle,
              "stage_ms": stages,
              "overhead_ms_per_page": per_page_ms["appliance"] - per_page_ms["bare"],
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
        f"overhead per page           {result['overhead_ms_per_page']:+.1f} ms",
        "stages (mean ms per page)   " + ", ".join(
            f"{stage.removesuffix('_ms')} {ms:.1f}" for stage, ms in result["stage_ms"].items()),
    ]
    if result["tokens_per_page"]:
        rows.insert(1, f"tokens per page             {result['tokens_per_page']} (fixed)")
    if result["idle"]:
        rows.append(f"idle RSS daemon             {result['idle']['daemon_rss_mb']:.0f} MiB "
                    f"(with workers {result['idle']['daemon_with_workers_rss_mb']:.0f} MiB)")
    return "\n".join(rows)


def measure_detection_latency(mode: str, files: int = 20, stability_s: float = 0.0,
                              poll_interval_s: float = 1.0, *,
                              parent: str | Path | None = None) -> dict:
    """Time from a file's close to its ``offer``, through a real FolderWatcher.

    Creates a temp folder (under ``parent``, e.g. a mounted share, or the system temp
    dir), writes ``files`` small files one by one at random intervals and returns
    p50/p95/max in milliseconds. An ``early_offers`` count above zero means a file was
    offered before it was complete (only possible with ``stability_s`` 0).
    """
    payload = bytes(range(256)) * 16  # 4 KiB
    closed: dict[Path, float] = {}
    offered: dict[Path, float] = {}
    early = 0
    lock = threading.Lock()
    all_offered = threading.Event()

    def offer(path: Path, tags: list[str]) -> bool:
        nonlocal early
        at = time.monotonic()
        try:
            complete = path.stat().st_size == len(payload)
        except OSError:
            complete = False
        with lock:
            if not complete:
                early += 1
            elif path not in offered:
                offered[path] = at
                if len(offered) == files:
                    all_offered.set()
        return True

    rng = random.Random()
    with tempfile.TemporaryDirectory(prefix="appliance-watch-latency-", dir=parent) as tmp:
        folder = WatchFolder(path=Path(tmp), name="latency", mode=mode, stability_s=stability_s,
                             poll_interval_s=poll_interval_s, rescan_interval_s=3600.0,
                             disposition="keep")
        watcher = FolderWatcher(folder, offer)
        watcher.start()
        try:
            if not watcher.wait_ready(30):
                raise RuntimeError(f"the watcher on {tmp} did not start within 30 s")
            for i in range(files):
                time.sleep(rng.uniform(0.05, 0.25))
                path = watcher.root / f"doc-{i:04d}.pdf"
                with open(path, "wb") as fh:
                    fh.write(payload)
                closed[path] = time.monotonic()
            all_offered.wait(stability_s + 2 * poll_interval_s + 10)
        finally:
            watcher.stop()
        fs_type, used_mode = watcher.fs_type, watcher.mode
    with lock:
        latencies = [max(0.0, offered[p] - closed[p]) * 1000 for p in offered if p in closed]
        early_offers = early
    result = {"mode": used_mode, "fs": fs_type, "files": files, "offered": len(latencies),
              "missed": files - len(latencies), "early_offers": early_offers,
              "stability_s": stability_s, "poll_interval_s": poll_interval_s,
              "p50_ms": None, "p95_ms": None, "max_ms": None}
    if latencies:
        result.update(p50_ms=round(_percentile(sorted(latencies), 50), 1),
                      p95_ms=round(_percentile(sorted(latencies), 95), 1),
                      max_ms=round(max(latencies), 1))
    return result
