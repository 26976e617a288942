"""`appliance bench`: throughput and latency of the daemon, against the bare engine.

The daemon is driven through its REST API (one started here in a throw-away data
directory, or one given by --url). Latency is split with the daemon's own clock:
queue wait (arrival to a worker's claim) and service (claim to stored result), and
service again by the stages the worker timed. The bare loop runs the same engine class
in this process on the same page files, before the daemon starts and again after it
stops, so the two figures are comparable and their ratio is the appliance's own
overhead; the daemon's time is set against the mean of the two bare runs, whose spread
shows how far the machine drifted meanwhile (on a shared machine, 23.8 s before and
32.0 s after one daemon run of 20 forms).
"""

from __future__ import annotations

import json
import logging
import random
import tempfile
import threading
import time
from pathlib import Path

from appliance.config import Settings, WatchFolder
from appliance.engine_choice import remote_specs, resolve_engine
from appliance.engines import bare_loop, registry
from appliance.errors import DatasetError, InvalidRequest
from appliance.intake.watch import FolderWatcher
from appliance.measure.driver import (
    ApplianceClient, LocalDaemon, PeakMemory, Rejected, daemon_config, idle_core_share,
    tree_rss_bytes,
)
from appliance.measure.stats import percentiles
from appliance.raster.synthetic import render_text_page, sample_lines
from appliance.store import Database, queries

log = logging.getLogger(__name__)

IDLE_SETTLE_S = 3.0
IDLE_CPU_S = 5.0  # how long the idle daemon's use of the cores is measured
# A second engine's reading of the pages in doubt: only some pages pay it, so it is
# reported on its own (how many pages, their mean, its share of all service time).
SECOND_OPINION = "second_opinion_ms"


def make_pages(directory: Path, count: int) -> list[Path]:
    """``count`` one-page PNG documents, A4 at 150 dpi, each with different text."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = directory / f"bench-{i:03d}.png"
        render_text_page(sample_lines(seed=i, count=24), font_size=30).save(path)
        paths.append(path)
    return paths


def dataset_pages(dataset: Path, count: int) -> list[Path]:
    """The first ``count`` page files of an evaluation dataset (any layout eval reads)."""
    from appliance.measure.datasets import find_datasets, load_dataset

    images = [s.image for d in find_datasets(dataset) for s in load_dataset(d)][:count]
    if len(images) < count:
        raise DatasetError(f"{dataset} holds {len(images)} pages; ask for at most that many")
    return images


def _drive(client: ApplianceClient, pages: list[Path], concurrency: int,
           form: dict | None = None) -> dict:
    """Upload the pages, wait until each is exported; the daemon's timestamps time it."""
    ids = client.submit_all([(path, form or {}) for path in pages], concurrency)
    rejected = [r for r in ids if isinstance(r, Rejected)]
    if rejected:
        raise RuntimeError(f"the daemon refused {len(rejected)} of {len(pages)} pages, "
                           f"e.g. {rejected[0]}")
    final = client.wait_exported(ids)
    # The daemon's own clock, from the first intake to the last export: the polling
    # interval and the client's clock do not enter the figure.
    elapsed = (max(b["exported_at"] for b in final.values())
               - min(b["created_at"] for b in final.values()))
    return {"pages": len(pages), "elapsed_s": elapsed, "pages_per_min": len(pages) / elapsed * 60,
            "pages_done": sum(1 for b in final.values() if b["status"] == "done"),
            "documents": final}


def _latency_and_stages(client: ApplianceClient,
                        documents: dict[str, dict]) -> tuple[dict, dict, dict, dict]:
    """Per-page latency split (seconds), mean milliseconds of each timed stage, what
    the second opinion on pages in doubt cost (``SECOND_OPINION``), and what a vision
    engine did: how many pages it read in strips, how idle its decode loop was."""
    total, wait, service, stages, strips, loops = [], [], [], {}, [], []
    for doc_id, doc in documents.items():
        total.append(doc["exported_at"] - doc["created_at"])
        for page in client.result(doc_id)["pages"]:
            if page["started_at"] is None:
                continue  # failed page: no accepted attempt to split
            wait.append(page["started_at"] - doc["created_at"])
            service.append(page["finished_at"] - page["started_at"])
            for stage, ms in (page["provenance"].get("timings_ms") or {}).items():
                stages.setdefault(stage, []).append(ms)
            if page["provenance"].get("tiles"):
                strips.append(page["provenance"]["tiles"])
            if page["provenance"].get("decode_loop"):
                loops.append(page["provenance"]["decode_loop"])
    latency = {"total": percentiles(total), "queue_wait": percentiles(wait),
               "service": percentiles(service)}
    second = stages.pop(SECOND_OPINION, [])
    second_opinion = {"pages": len(second), "of_pages": len(service),
                      "mean_ms": sum(second) / len(second) if second else None,
                      "share_of_service": sum(second) / 1000 / sum(service) if service else None}
    vision = {"tiled_pages": len(strips), "of_pages": len(service), "strips": sum(strips),
              "decode_loop_idle_share": _idle_share(loops)}
    # in the order the pages met them: a page's timings are in the order its stages ran
    return (latency, {stage: sum(times) / len(times) for stage, times in stages.items()},
            second_opinion, vision)


def _output_timings(database: Path, documents: dict[str, dict]) -> dict[str, float]:
    """Mean milliseconds per document of making and writing its outputs (the exported
    events' timings: ``export.Exporter``), read from the stopped daemon's store."""
    db = Database(database)
    stages: dict[str, list[float]] = {}
    for doc_id in documents:
        for event in queries.document_events(db, doc_id):
            if event.kind == "exported":
                for stage, ms in ((event.detail or {}).get("timings_ms") or {}).items():
                    stages.setdefault(stage, []).append(ms)
    return {stage: sum(times) / len(times) for stage, times in stages.items()}


def _idle_share(loops: list[dict]) -> float | None:
    """The share of time a vision engine's decode loop sat idle between the first page
    and the last one to end (their counters' growth), with one engine process."""
    if len(loops) < 2:
        return None
    first, last = min(loops, key=lambda c: c["wall_s"]), max(loops, key=lambda c: c["wall_s"])
    wall = last["wall_s"] - first["wall_s"]
    return (last["idle_s"] - first["idle_s"]) / wall if wall > 0 else None


def run_degenerate_experiment(settings: Settings, *, pages: int, concurrency: int) -> dict:
    """Healthy-page latency with and without a looping page in flight (seed 001).

    Healthy pages are read by the classic reader of the vision workers; the looping
    page goes to the vision model, which (the tiny test model always does) loops
    until the repetition guard stops it and then climbs the retry ladder.
    """
    raw, settings = daemon_config(settings)
    local = resolve_engine(settings)[0]
    fallback = local and registry.entry(local.engine).fallback
    if fallback is None:
        raise InvalidRequest(f"--inject-degenerate needs engine.name = "
                             f"'{registry.model_engine().name}' with a model")
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = make_pages(workdir / "pages", pages)
        looping = make_pages(workdir / "looping", 1)
        with LocalDaemon(raw, workdir) as daemon, ApplianceClient(daemon.url, daemon) as client:
            client.wait_ready()
            healthy = {"engine": fallback}
            runs = {"without_looping_page": _drive(client, files, concurrency, healthy)}
            loop_id = client.submit(looping[0])
            runs["with_looping_page"] = _drive(client, files, concurrency, healthy)
            looped = client.wait_exported([loop_id])[loop_id]
    result = {"pages": pages, "concurrency": concurrency, "workers": settings.workers.count,
              "looping_page_s": looped["exported_at"] - looped["created_at"]}
    for name, run in runs.items():
        latencies = [b["exported_at"] - b["created_at"] for b in run.pop("documents").values()]
        result[name] = run | {"latency_s": percentiles(latencies)}
    return result


def format_degenerate_report(result: dict) -> str:
    rows = [f"healthy pages {result['pages']}, workers {result['workers']}, "
            f"concurrency {result['concurrency']}"]
    for label, key in (("without a looping page", "without_looping_page"),
                       ("with a looping page   ", "with_looping_page")):
        latency = result[key]["latency_s"]
        rows.append(f"{label}  healthy latency p50 {latency['p50'] * 1000:.0f} ms, "
                    f"p95 {latency['p95'] * 1000:.0f} ms")
    rows.append(f"the looping page itself took {result['looping_page_s']:.1f} s "
                f"(guard, retry ladder, fallback)")
    return "\n".join(rows)


def _bare(settings: Settings, pages: list[Path]) -> float:
    """The seconds the engine's own library takes on the same page files, in this
    process (for remote endpoints: plain requests to the first, one page after
    another)."""
    spec = resolve_engine(settings)[0] or remote_specs(settings)[0]
    return bare_loop(spec.engine, spec.options, pages)


def _bare_around(runs_s: list[float], pages: int) -> dict:
    """The bare loop's figure from its runs before and after the daemon's: their mean."""
    elapsed = sum(runs_s) / len(runs_s)
    return {"pages": pages, "elapsed_s": elapsed, "pages_per_min": pages / elapsed * 60,
            "runs_s": runs_s}


def cost_per_million(seconds_per_page: float, cost_per_hour: float) -> float:
    """C1M: what a million pages cost at this speed on a host that costs this per hour
    (seed 001 §4.1): 1e6 x Tavg / 3600 x cost per hour."""
    return 1e6 * seconds_per_page / 3600 * cost_per_hour


def run_bench(settings: Settings, *, pages: int, concurrency: int, url: str | None = None,
              report: Path | None = None, tokens: int = 0, dataset: Path | None = None,
              cost_per_hour: float | None = None, model: tuple[Path, Path] | None = None,
              choices: bool = True, engine: dict | None = None) -> dict:
    """``model``: a (text, mmproj) pair to run instead of the configured engine.
    ``choices`` False: no auto-tiling and no second opinion, so the ratio to the bare
    engine is the pipeline's pure overhead (the bare loop reads each page once).
    ``engine``: more [engine] values for the daemon, applied last (e.g. ``name`` and
    ``remote`` endpoints, ``threads``, ``parallel``)."""
    overrides = ({"name": registry.model_engine().name, "model": str(model[0]),
                  "mmproj": str(model[1])} if model else {})
    overrides.update(engine or {})
    if not choices:
        overrides["auto_tiling"] = False
    raw, settings = daemon_config(settings, fixed_tokens=tokens, second_opinion=choices,
                                  **overrides)
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = (dataset_pages(dataset, pages) if dataset
                 else make_pages(workdir / "pages", pages))
        bare_runs = [_bare(settings, files)]
        daemon = None if url else LocalDaemon(raw, workdir)
        try:
            with ApplianceClient(url or daemon.url, daemon) as client:
                ready = client.wait_ready()
                idle = None
                if daemon:
                    time.sleep(IDLE_SETTLE_S)
                    own, tree = tree_rss_bytes(daemon.process.pid)
                    idle = {"daemon_rss_mb": own / 2**20,
                            "daemon_with_workers_rss_mb": tree / 2**20,
                            "core_share": idle_core_share(daemon.process.pid, IDLE_CPU_S)}
                with PeakMemory(daemon.process.pid if daemon else None,
                                settings.memory.device_index) as peak:
                    appliance = _drive(client, files, concurrency)
                documents = appliance.pop("documents")
                latency, stages, second_opinion, vision = _latency_and_stages(client, documents)
        finally:
            if daemon:
                daemon.stop()
        outputs = _output_timings(daemon.database, documents) if daemon else {}
        bare_runs.append(_bare(settings, files))
        bare = _bare_around(bare_runs, len(files))
    per_page_ms = {name: r["elapsed_s"] / r["pages"] * 1000
                   for name, r in (("appliance", appliance), ("bare", bare))}
    result = {"engine": ready["engine"], "tokens_per_page": tokens or None,
              "source": str(dataset) if dataset else "synthetic",
              "concurrency": concurrency, "appliance": appliance, "bare": bare,
              "latency_s": latency, "stage_ms": stages, "output_ms": outputs,
              "second_opinion": second_opinion,
              "pipeline_choices": choices, "vision": vision,
              "memory": {"idle": idle, "peak": peak.report()},
              "overhead_ms_per_page": per_page_ms["appliance"] - per_page_ms["bare"],
              "ratio_appliance_over_bare": appliance["pages_per_min"] / bare["pages_per_min"]}
    if cost_per_hour is not None:
        seconds_per_page = per_page_ms["appliance"] / 1000
        result["cost"] = {"cost_per_hour": cost_per_hour, "seconds_per_page": seconds_per_page,
                          "c1m": cost_per_million(seconds_per_page, cost_per_hour)}
    if report:
        report.write_text(json.dumps(result, indent=2) + "\n")
    return result


def run_docintel_bench(settings: Settings, *, pages: int, concurrency: int,
                       dataset: Path | None = None, report: Path | None = None) -> dict:
    """The same pages through the native REST API and through the Document Intelligence
    API on one daemon, each timed on the client's clock from the first request to the
    last result in hand. The pages go in two halves, native, Document Intelligence, then
    Document Intelligence, native (a load that drifts during the run weighs on both
    alike), with the result cache off, so every run reads its pages afresh."""
    raw, settings = daemon_config(settings, result_cache=False)
    with tempfile.TemporaryDirectory(prefix="appliance-bench-") as tmp:
        workdir = Path(tmp)
        files = (dataset_pages(dataset, pages) if dataset
                 else make_pages(workdir / "pages", pages))
        halves = (files[:len(files) // 2], files[len(files) // 2:])
        with LocalDaemon(raw, workdir) as daemon, ApplianceClient(daemon.url, daemon) as client:
            ready = client.wait_ready()
            apis = {"native": (lambda part: client.submit_all([(f, {}) for f in part],
                                                              concurrency),
                               client.wait_exported),
                    "docintel": (lambda part: client.analyze_all(part, concurrency),
                                 client.wait_analyzed)}
            runs = {name: {"pages": 0, "elapsed_s": 0.0, "answered": 0} for name in apis}
            for name, part in (("native", halves[0]), ("docintel", halves[0]),
                               ("docintel", halves[1]), ("native", halves[1])):
                send, wait = apis[name]
                started = time.monotonic()
                sent = send(part)
                if rejected := [r for r in sent if isinstance(r, Rejected)]:
                    raise RuntimeError(f"the daemon refused {len(rejected)} of {len(part)} "
                                       f"pages, e.g. {rejected[0]}")
                answered = wait(sent)
                runs[name]["elapsed_s"] += time.monotonic() - started
                runs[name]["pages"] += len(part)
                runs[name]["answered"] += len(answered)
    for run in runs.values():
        run["pages_per_min"] = run["pages"] / run["elapsed_s"] * 60
    result = {"engine": ready["engine"], "source": str(dataset) if dataset else "synthetic",
              "concurrency": concurrency, **runs,
              "ratio_docintel_over_native": (runs["docintel"]["pages_per_min"]
                                             / runs["native"]["pages_per_min"])}
    if report:
        report.write_text(json.dumps(result, indent=2) + "\n")
    return result


def format_docintel_report(result: dict) -> str:
    native, docintel = result["native"], result["docintel"]
    return "\n".join([
        f"engine                      {result['engine']}",
        f"pages                       {native['pages']} ({result['source']}, concurrency "
        f"{result['concurrency']}, result cache off)",
        f"native API pages/min        {native['pages_per_min']:.1f}  ({native['elapsed_s']:.1f} s,"
        f" upload to exported)",
        f"Document Intelligence       {docintel['pages_per_min']:.1f}  "
        f"({docintel['elapsed_s']:.1f} s, analyze to succeeded)",
        f"ratio docintel/native       {result['ratio_docintel_over_native']:.3f}",
    ])


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.0f}"


def format_report(result: dict) -> str:
    a, b = result["appliance"], result["bare"]
    rows = [
        f"engine                      {result['engine']}",
        f"pages                       {a['pages']} (done {a['pages_done']}, {result['source']})",
        f"appliance pages/min         {a['pages_per_min']:.1f}  ({a['elapsed_s']:.1f} s, "
        f"concurrency {result['concurrency']})",
        f"bare engine pages/min       {b['pages_per_min']:.1f}  ({b['elapsed_s']:.1f} s: "
        f"{b['runs_s'][0]:.1f} before the appliance, {b['runs_s'][1]:.1f} after)",
        f"ratio appliance/bare        {result['ratio_appliance_over_bare']:.3f}",
        f"overhead per page           {result['overhead_ms_per_page']:+.1f} ms",
        "latency ms                  p50    p95    p99",
    ]
    for name, label in (("total", "  arrival to export"), ("queue_wait", "  queue wait"),
                        ("service", "  service")):
        pct = result["latency_s"][name]
        rows.append(f"{label:<26}{_ms(pct['p50']):>5}  {_ms(pct['p95']):>5}  {_ms(pct['p99']):>5}")
    rows.append("stages (mean ms per page)   " + ", ".join(
        f"{stage.removesuffix('_ms')} {ms:.1f}" for stage, ms in result["stage_ms"].items()))
    rows.append("outputs (mean ms per doc)   " + (", ".join(
        f"{stage.removesuffix('_ms')} {ms:.1f}" for stage, ms in result["output_ms"].items())
        or "none written (output.upload_formats; made when fetched)"))
    if not result["pipeline_choices"]:
        rows.append("pipeline choices            off: no auto-tiling, no second opinion "
                    "(the pure overhead)")
    vision = result["vision"]
    if vision["decode_loop_idle_share"] is not None:
        rows.append(f"decode loop idle            {vision['decode_loop_idle_share']:.1%} of "
                    f"the time between the first and the last page's end")
    if vision["tiled_pages"]:
        rows.append(f"read in strips              {vision['tiled_pages']} of "
                    f"{vision['of_pages']} pages, {vision['strips']} strips")
    second = result["second_opinion"]
    if second["pages"]:
        rows.append(f"second opinion              {second['pages']} of {second['of_pages']} "
                    f"pages in doubt read again, {second['mean_ms']:.0f} ms each, "
                    f"{second['share_of_service']:.1%} of service time")
    if result["tokens_per_page"]:
        rows.insert(1, f"tokens per page             {result['tokens_per_page']} (fixed)")
    memory = result["memory"]
    if memory["idle"]:
        rows.append(f"idle RSS daemon             {memory['idle']['daemon_rss_mb']:.0f} MiB "
                    f"(with workers {memory['idle']['daemon_with_workers_rss_mb']:.0f} MiB)")
        rows.append(f"idle CPU daemon             {memory['idle']['core_share']:.1%} of a core "
                    "(with workers)")
    peak = memory["peak"]
    if peak["rss_peak_mb"] is not None:
        rows.append(f"peak RSS with workers       {peak['rss_peak_mb']:.0f} MiB")
    rows.append("peak GPU memory             " + (f"{peak['vram_peak_mb']:.0f} MiB (whole card)"
                                                  if peak["vram_peak_mb"] is not None
                                                  else "- (no NVML here)"))
    if "cost" in result:
        cost = result["cost"]
        rows.append(f"C1M                         {cost['c1m']:.2f} per million pages "
                    f"({cost['seconds_per_page']:.3f} s/page at {cost['cost_per_hour']} per hour)")
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
        pct = percentiles(latencies)
        result.update(p50_ms=round(pct["p50"], 1), p95_ms=round(pct["p95"], 1),
                      max_ms=round(max(latencies), 1))
    return result
