"""Parallel decoding, measured: the llama engine at N pages at once in the daemon's own
worker process, against the raw batched-decode loop and, optionally, llama.cpp's own
``llama-server``.

For each N a worker is started as the daemon starts one: the daemon's settings (its
config file) give ``engine_choice.resolve_engine`` the worker's spec, and ``host.WorkerHandle``
spawns it (the worker's entry point, imports, model load and warm-up). It gets
``engine.parallel = N`` and N pages kept in flight (the next goes as one is answered),
every answer exactly ``tokens`` tokens long (``engine.fixed_tokens``). What would measure
something besides the model is off: the result cache, the second opinion and the
classic engine's word placement; greedy decoding only, no tiling.

The report gives generated tokens/s, pages/min, P50/P95 page latency (sent to answered),
the worker's peak RSS, the card's peak GPU memory above what was in use before the
worker started where NVML answers (against what ``appliance.memory_plan`` plans), the
ratio to N = 1, and from the engine's decode-loop counters (in each page's provenance)
the share of time the loop sat idle and its generation rate. That rate is held against
the raw loop (``raw_decode``) at B = N on the same model, threads and context per page:
the engine's own per-step cost is the gap. With ``--against-llama-server BIN`` the same
pages go through llama-server with N slots. Each N's figures are written as a JSON
line as soon as they are measured (``--jsonl``), so a run cut short still reports.

    python -m appliance.engines.llama.parallel_bench --model M --mmproj P \\
        --parallel 1,2,4,8 --tokens 64 [--pages 8] [--config FILE] \\
        [--against-llama-server BIN] [--json out.json] [--jsonl runs.jsonl]

Threads, context per page, offload and flash attention are the config's ``[engine]``
keys; ``--threads``, ``--n-ctx`` and ``--n-gpu-layers`` override them.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PIL import Image

from appliance.config import EngineSettings, Settings, load_settings
from appliance.engine_choice import resolve_engine
from appliance.engines import registry
from appliance.engines.llama.llama_server import LlamaServer, chat_request, complete
from appliance.engines.llama.raw_decode import RawDecoder
from appliance.engines.messages import Job, PageDone, StartFailed
from appliance.engines.prompts import prompt_for
from appliance.errors import EngineUnavailable
from appliance.gguf.pair import ModelInfo, inspect_model
from appliance.measure.stats import percentiles
from appliance.memory_plan import estimate_worker_bytes
from appliance.pipeline.host import WorkerHandle
from appliance.raster.synthetic import render_text_page, sample_lines

try:
    import pynvml
except ImportError:  # no nvidia-ml-py: no GPU memory figures
    pynvml = None

log = logging.getLogger(__name__)

DEFAULT_TOKENS = 64
TEMPLATE_TOKENS = 12  # the chat turn's markup and the image's start and end markers
MIB = 2**20
VRAM_SAMPLE_S = 0.05
PROMPT = prompt_for("generic")


def render_pages(count: int) -> list[Image.Image]:
    """``count`` A4 pages at 150 dpi, each with different text (as `appliance bench`'s)."""
    return [render_text_page(sample_lines(seed=i, count=24), font_size=30) for i in range(count)]


def page_count(parallel: int, pages: int | None) -> int:
    """Pages per run: ``pages`` or 2 N, at least 4, and at least one per client thread."""
    return max(pages or 2 * parallel, 4, parallel)


def fan_out(count: int, parallel: int, work: Callable[[int], object]) -> tuple[list, list, float]:
    """``work(page)`` for every page from ``parallel`` client threads, page i on thread
    i mod N, one after another on each. Returns the results and per-page seconds in page
    order, and the seconds from the first start to the last end."""
    results, latencies = [None] * count, [0.0] * count
    failures: list[BaseException] = []

    def client(index: int) -> None:
        try:
            for page in range(index, count, parallel):
                started = time.perf_counter()
                results[page] = work(page)
                latencies[page] = time.perf_counter() - started
        except BaseException as exc:  # raised below, once every client has stopped
            failures.append(exc)

    threads = [threading.Thread(target=client, args=(i,), name=f"bench-client-{i}")
               for i in range(min(parallel, count))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise failures[0]
    return results, latencies, elapsed


def _status_kib(pid: int, field: str) -> int | None:
    try:
        match = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(), re.M)
    except OSError:
        return None
    return int(match.group(1)) if match else None


def _vram_used_bytes() -> int | None:
    if pynvml is None:
        return None
    try:
        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0)).used
        finally:
            pynvml.nvmlShutdown()
    except pynvml.NVMLError:  # no driver, no card, no permission
        return None


class ProcessPeaks:
    """Peak RSS of one process (its VmHWM; this process's own is reset on entry) and
    the peak of GPU 0's used memory while the block runs, sampled through NVML, above
    ``vram_before`` (bytes in use before the process loaded its model; default: on
    entry). The card's total counts, not the process's: container PIDs need not match
    the driver's, and nothing else runs on a measuring host."""

    def __init__(self, pid: int, vram_before: int | None = None):
        self.pid, self.vram_before = pid, vram_before
        self.rss_start_mb = self.rss_peak_mb = self.vram_peak_mb = None
        self._stop = threading.Event()
        self._vram_peak = 0
        self._sampler: threading.Thread | None = None

    def __enter__(self) -> ProcessPeaks:
        if self.pid == os.getpid():
            try:
                Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
            except OSError:
                log.warning("peak RSS cannot be reset here; it counts since the bench began")
        rss = _status_kib(self.pid, "VmRSS")
        self.rss_start_mb = rss / 1024 if rss else None
        if self.vram_before is None:
            self.vram_before = _vram_used_bytes()
        if self.vram_before is not None:
            self._sampler = threading.Thread(target=self._sample_vram, name="vram", daemon=True)
            self._sampler.start()
        return self

    def _sample_vram(self) -> None:
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            while True:
                used = pynvml.nvmlDeviceGetMemoryInfo(handle).used
                self._vram_peak = max(self._vram_peak, used)
                if self._stop.wait(VRAM_SAMPLE_S):
                    break
        finally:
            pynvml.nvmlShutdown()

    def __exit__(self, *exc_info) -> None:
        # the kernel raises VmHWM lazily (when memory is unmapped), so it can lag the
        # RSS read at either end of the block by a few pages
        readings = [kib / 1024 for kib in (_status_kib(self.pid, "VmHWM"),
                                            _status_kib(self.pid, "VmRSS")) if kib]
        if readings and self.rss_start_mb:
            readings.append(self.rss_start_mb)
        self.rss_peak_mb = max(readings) if readings else None
        if self._sampler:
            self._stop.set()
            self._sampler.join()
            self.vram_peak_mb = (self._vram_peak - self.vram_before) / MIB

    def report(self) -> dict:
        return {"rss_start_mb": self.rss_start_mb, "rss_peak_mb": self.rss_peak_mb,
                "vram_peak_mb": self.vram_peak_mb}


def planned_vram_mb(info: ModelInfo, engine: EngineSettings, parallel: int) -> float:
    """What the daemon's memory plan reserves for one worker reading ``parallel`` pages
    at once."""
    estimate = estimate_worker_bytes(info, n_ctx=engine.n_ctx, n_gpu_layers=engine.n_gpu_layers)
    return estimate.at(parallel).total_bytes / MIB


def _throughput(tokens: int, pages: int, elapsed: float, latencies: list[float]) -> dict:
    pct = percentiles(latencies)
    return {"pages": pages, "generated_tokens": tokens, "elapsed_s": elapsed,
            "tokens_per_s": tokens / elapsed, "pages_per_min": pages / elapsed * 60,
            "latency_s": {"p50": pct["p50"], "p95": pct["p95"]}}


def _decode_share(before: dict, after: dict) -> dict:
    """Where the decode loop's time went during the run (differences of the counters)."""
    d = {key: after[key] - before[key] for key in before}
    generating = d["wall_s"] - d["idle_s"] - d["prompt_s"]
    return {"wall_s": d["wall_s"], "generated_tokens": d["generated_tokens"], "steps": d["steps"],
            "idle_share": d["idle_s"] / d["wall_s"], "prompt_share": d["prompt_s"] / d["wall_s"],
            # about the sequences a step advanced (each page's first token comes from
            # its prompt's evaluation, not from a step)
            "tokens_per_step": d["generated_tokens"] / d["steps"] if d["steps"] else None,
            "decode_tokens_per_s": d["generated_tokens"] / d["decode_s"] if d["decode_s"] else None,
            "loop_tokens_per_s": d["generated_tokens"] / generating if generating > 0 else None}


def bench_settings(settings: Settings, model: Path, mmproj: Path, *, parallel: int,
                   tokens: int) -> Settings:
    """The daemon's settings with the engine under measure: the model engine reading
    ``parallel`` pages at once, every answer ``tokens`` long, greedy and untiled; no
    result cache, second opinion or word placement (each would measure something else)."""
    engine = replace(settings.engine, name=registry.model_engine().name, model=model,
                     mmproj=mmproj, parallel=parallel, fixed_tokens=tokens,
                     retry_ladder=["greedy"], auto_tiling=False, result_cache=False)
    return replace(settings, engine=engine,
                   review=replace(settings.review, second_opinion=False),
                   output=replace(settings.output, place_vision_text=False))


def write_pages(images: list[Image.Image], directory: Path) -> list[Path]:
    """The page images as PNG files, which a worker's jobs name."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"page-{index:03d}.png" for index in range(len(images))]
    for image, path in zip(images, paths):
        image.save(path)
    return paths


class WorkerPages:
    """One engine worker, started as the daemon starts it, fed page files as jobs."""

    def __init__(self, settings: Settings, spool: Path):
        spec, _notice = resolve_engine(settings)
        self.settings, self.spool = settings, spool
        self.handle = WorkerHandle(0, spec)
        self._job_ids = itertools.count(1)

    def start(self) -> None:
        self.handle.start()
        ready = self.handle.wait_ready(self.settings.workers.warmup_timeout_s)
        if isinstance(ready, StartFailed):
            raise EngineUnavailable(f"the worker did not start ({ready.code}): {ready.message}")

    def job(self, page: Path) -> Job:
        job_id = next(self._job_ids)
        return Job(job_id=job_id, original=page, kind="png", page_index=0,
                   dpi=self.settings.raster.pdf_dpi, max_pixels=self.settings.limits.max_pixels,
                   page_image=self.spool / f"read-{job_id}.png", doc_type=PROMPT.doc_type,
                   engine=None, attempt=1, pdf_password=None,
                   deadline_s=self.settings.workers.page_timeout_s)

    def read(self, pages: list[Path], parallel: int) -> tuple[list[PageDone], list[float], float]:
        """Every page, ``parallel`` in flight (the next sent as one is answered): the
        answers and per-page seconds in page order, and the seconds from the first send
        to the last answer."""
        answers: list[PageDone | None] = [None] * len(pages)
        latencies, sent = [0.0] * len(pages), {}
        waiting = list(enumerate(pages))
        started = time.perf_counter()

        def send_next() -> None:
            index, page = waiting.pop(0)
            job = self.job(page)
            sent[job.job_id] = (index, time.perf_counter())
            self.handle.send(job, None, job.deadline_s)

        for _ in range(min(parallel, len(waiting))):
            send_next()
        while sent:
            if not self.handle.conn.poll(self.settings.workers.page_timeout_s):
                raise EngineUnavailable("the worker answered no page in workers.page_timeout_s")
            answer = self.handle.conn.recv()
            self.handle.finish(answer.job_id)
            index, began = sent.pop(answer.job_id)
            if not isinstance(answer, PageDone):
                raise EngineUnavailable(f"page {index} failed ({answer.code}): {answer.message}")
            answers[index], latencies[index] = answer, time.perf_counter() - began
            if waiting:
                send_next()
        return answers, latencies, time.perf_counter() - started

    def stop(self) -> None:
        self.handle.stop()


def _decode_loop(answer: PageDone) -> dict:
    """The engine's decode-loop counters as this page ended."""
    return answer.recognition.provenance["decode_loop"]


def run_engine(settings: Settings, pages: list[Path], *, warmup: Path, spool: Path) -> dict:
    """The daemon's worker with ``engine.parallel`` slots reads ``pages``, that many in
    flight."""
    parallel = settings.engine.parallel
    worker = WorkerPages(settings, spool)
    vram_before = _vram_used_bytes()
    worker.start()
    try:
        with ProcessPeaks(worker.handle.process.pid, vram_before) as peaks:
            [warm], _, _ = worker.read([warmup], 1)  # none of the measured pages
            answers, latencies, elapsed = worker.read(pages, parallel)
    finally:
        worker.stop()
    generated = sum(len(answer.recognition.tokens) for answer in answers)
    last = max((_decode_loop(answer) for answer in answers), key=lambda loop: loop["wall_s"])
    stages = {stage: _mean([a.timings_ms.get(stage) for a in answers])
              for stage in ("preprocess_ms", "inference_ms", "postprocess_ms")}
    return {**_throughput(generated, len(pages), elapsed, latencies), **peaks.report(),
            "decode": _decode_share(_decode_loop(warm), last), "stages_ms": stages}


def run_server(binary: Path, model: Path, mmproj: Path, info: ModelInfo,
               pages: list[Image.Image], *, warmup: Image.Image, parallel: int, tokens: int,
               threads: int, n_ctx: int, n_gpu_layers: int, flash_attn: bool,
               log_path: Path | None) -> dict:
    """The same pages through llama-server with ``parallel`` slots. Each client thread
    encodes its page as it sends it, as the engine's callers hand it theirs."""
    def read(page: Image.Image):
        return complete(server.url, chat_request(page, PROMPT.text, info.image_size, tokens))

    vram_before = _vram_used_bytes()
    with LlamaServer(binary, model, mmproj, parallel=parallel, n_ctx=n_ctx, threads=threads,
                     n_gpu_layers=n_gpu_layers, flash_attn=flash_attn,
                     log_path=log_path) as server:
        read(warmup)
        with ProcessPeaks(server.pid, vram_before) as peaks:
            answers, latencies, elapsed = fan_out(len(pages), parallel,
                                                  lambda page: read(pages[page]))
    generated = sum(answer.completion_tokens for answer in answers)
    return {**_throughput(generated, len(pages), elapsed, latencies),
            **peaks.report(),
            "short_answers": sum(1 for a in answers if a.completion_tokens != tokens),
            "server_prompt_tokens": answers[0].prompt_tokens,
            # the server's own split: prompt and image, then generation, per page
            "server_prompt_ms": _mean([a.prompt_ms for a in answers]),
            "server_predicted_ms": _mean([a.predicted_ms for a in answers])}


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def run_parallel_bench(settings: Settings, model: Path, mmproj: Path, parallels: list[int], *,
                       tokens: int = DEFAULT_TOKENS, pages: int | None = None,
                       server: Path | None = None, log_dir: Path | None = None,
                       on_run: Callable[[dict], None] | None = None) -> dict:
    """Engine (in the daemon's worker), raw loop and (with ``server``) llama-server at
    each N, smallest N first; see the module. ``settings`` are the daemon's: their
    ``[engine]`` gives threads, context per page, offload and flash attention.
    ``log_dir`` keeps llama-server's output, one file per N; ``on_run`` is handed each
    N's figures as soon as they are measured."""
    info = inspect_model(model, mmproj)
    engine = settings.engine
    parallels = sorted(set(parallels))
    # the warm-up page is none of the measured ones: llama-server would answer it again
    # from its slot's cache
    *images, warmup = render_pages(max(page_count(n, pages) for n in parallels) + 1)
    common = {"tokens": tokens, "threads": engine.threads, "n_ctx": engine.n_ctx,
              "n_gpu_layers": engine.n_gpu_layers, "flash_attn": engine.flash_attn}
    if server and log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="parallel-bench-") as tmp:
        *files, warmup_file = write_pages([*images, warmup], Path(tmp) / "pages")
        _vram_used_bytes()  # NVML's library loads now, before a model is on the card here
        decoder = RawDecoder(str(model), threads=engine.threads, n_ctx=engine.n_ctx,
                             n_gpu_layers=engine.n_gpu_layers, flash_attn=engine.flash_attn)
        try:
            prompt_tokens = (info.image_tokens + decoder.count_tokens(PROMPT.text)
                             + TEMPLATE_TOKENS)
            for n in parallels:
                count = page_count(n, pages)
                run = {"parallel": n, "engine": run_engine(
                    bench_settings(settings, model, mmproj, parallel=n, tokens=tokens),
                    files[:count], warmup=warmup_file, spool=Path(tmp) / "spool")}
                raw = decoder.run(n, prompt_tokens=prompt_tokens, steps=tokens)
                run["raw"] = {"batch": n, "prompt_tokens": prompt_tokens, "steps": tokens,
                              "tokens_per_s": raw.tokens_per_s}
                if server:
                    log_path = log_dir / f"llama-server-np{n}.log" if log_dir else None
                    run["server"] = run_server(server, model, mmproj, info, images[:count],
                                               warmup=warmup, parallel=n, log_path=log_path,
                                               **common)
                _compare(run, runs[0] if runs and runs[0]["parallel"] == 1 else run)
                run["vram_plan_mb"] = planned_vram_mb(info, engine, n)
                runs.append(run)
                if on_run:
                    on_run(run)
        finally:
            decoder.close()
    return {"model": str(model), "mmproj": str(mmproj), "model_name": info.name,
            "quant": info.quant, "image_tokens": info.image_tokens, "tokens_per_page": tokens,
            "threads": engine.threads, "n_ctx_per_page": engine.n_ctx,
            "n_gpu_layers": engine.n_gpu_layers, "cpu_count": os.cpu_count(),
            "llama_server": str(server) if server else None, "runs": runs}


def _compare(run: dict, first: dict) -> None:
    """A run's ratios: to N = 1 (``first``, the run itself when it is N = 1), to the raw
    loop and to llama-server."""
    engine = run["engine"]
    n1 = first["parallel"] == 1
    run["ratio_to_n1"] = _ratio(engine["tokens_per_s"],
                                first["engine"]["tokens_per_s"]) if n1 else None
    run["engine_over_raw"] = _ratio(engine["decode"]["loop_tokens_per_s"],
                                    run["raw"]["tokens_per_s"])
    if "server" in run:
        run["engine_over_server"] = _ratio(engine["tokens_per_s"], run["server"]["tokens_per_s"])
        run["server"]["ratio_to_n1"] = _ratio(run["server"]["tokens_per_s"],
                                              first["server"]["tokens_per_s"]) if n1 else None


def _f(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def format_report(result: dict) -> str:
    rows = [f"{Path(result['model']).name} ({result['quant']}), {result['tokens_per_page']} "
            f"tokens per page, threads {result['threads']}, n_ctx {result['n_ctx_per_page']} "
            f"per page, n_gpu_layers {result['n_gpu_layers']}",
            "   N pages   tok/s pages/min  p50 s  p95 s  x N=1  idle  loop tok/s  raw tok/s "
            "eng/raw  RSS MiB  VRAM MiB  plan MiB"]
    for run in result["runs"]:
        e, decode = run["engine"], run["engine"]["decode"]
        rows.append(
            f"{run['parallel']:>4} {e['pages']:>5} {e['tokens_per_s']:>7.1f} "
            f"{e['pages_per_min']:>9.1f} {e['latency_s']['p50']:>6.2f} "
            f"{e['latency_s']['p95']:>6.2f} "
            f"{_f(run['ratio_to_n1'], '.2f'):>6} {decode['idle_share']:>5.0%} "
            f"{_f(decode['loop_tokens_per_s']):>11} {run['raw']['tokens_per_s']:>10.1f} "
            f"{_f(run['engine_over_raw'], '.2f'):>7} {_f(e['rss_peak_mb'], '.0f'):>8} "
            f"{_f(e['vram_peak_mb'], '.0f'):>9} {_f(run['vram_plan_mb'], '.0f'):>9}")
    if result["llama_server"]:
        rows += ["llama-server side by side (end to end)",
                 "   N  engine tok/s  server tok/s  engine p/min  server p/min  eng/srv  "
                 "server x N=1  server RSS MiB  server VRAM MiB  short answers"]
        for run in result["runs"]:
            e, s = run["engine"], run["server"]
            rows.append(
                f"{run['parallel']:>4} {e['tokens_per_s']:>13.1f} {s['tokens_per_s']:>13.1f} "
                f"{e['pages_per_min']:>13.1f} {s['pages_per_min']:>13.1f} "
                f"{_f(run['engine_over_server'], '.2f'):>8} {_f(s['ratio_to_n1'], '.2f'):>13} "
                f"{_f(s['rss_peak_mb'], '.0f'):>15} {_f(s['vram_peak_mb'], '.0f'):>16} "
                f"{s['short_answers']:>14}")
    return "\n".join(rows)


def parse_parallel(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is no list of page counts like 1,2,4,8")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m appliance.engines.llama.parallel_bench",
                                     description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", type=Path, help="text GGUF (with --mmproj)")
    source.add_argument("--shape", help="build and use a random-weight model of this shape "
                                        "(gemma3-4b, gemma3-1b, gemma3-mini)")
    parser.add_argument("--mmproj", type=Path)
    parser.add_argument("--config", type=Path, help="the daemon's config (default: as serve)")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(tempfile.gettempdir()) / "appliance-bench-models",
                        help="where --shape builds its model once")
    parser.add_argument("--parallel", type=parse_parallel, default=[1, 2, 4, 8])
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, help="per page, fixed")
    parser.add_argument("--pages", type=int, help="pages per N (default 2 N, at least 4)")
    parser.add_argument("--threads", type=int, help="engine.threads")
    parser.add_argument("--n-ctx", type=int, help="engine.n_ctx, the context per page")
    parser.add_argument("--n-gpu-layers", type=int, help="engine.n_gpu_layers")
    parser.add_argument("--against-llama-server", type=Path, metavar="BIN")
    parser.add_argument("--server-logs", type=Path, help="folder for llama-server's output")
    parser.add_argument("--json", type=Path, help="also write the result as JSON here")
    parser.add_argument("--jsonl", type=Path, help="append each N's figures here as measured")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.model and not args.mmproj:
        parser.error("--model needs --mmproj")
    settings = load_settings(args.config)
    overrides = {key: value for key, value in (("threads", args.threads), ("n_ctx", args.n_ctx),
                                               ("n_gpu_layers", args.n_gpu_layers))
                 if value is not None}
    settings = replace(settings, engine=replace(settings.engine, **overrides))
    model, mmproj = (args.model, args.mmproj) if args.model else shaped_model(args.shape,
                                                                                args.cache_dir)
    result = run_parallel_bench(settings, model, mmproj, args.parallel, tokens=args.tokens,
                                pages=args.pages, server=args.against_llama_server,
                                log_dir=args.server_logs,
                                on_run=(lambda run: append_line(args.jsonl, run))
                                if args.jsonl else None)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    sys.stdout.write(format_report(result) + "\n")
    return 0


def append_line(path: Path, record: dict) -> None:
    """``record`` as one more JSON line of ``path``, on disk before this returns."""
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\n")
        out.flush()
        os.fsync(out.fileno())


def shaped_model(name: str, cache_dir: Path) -> tuple[Path, Path]:
    """The (text, mmproj) pair of a named shape, built once under ``cache_dir``."""
    from appliance.gguf.shapes import SHAPES, build_shaped_model

    if name not in SHAPES:
        raise SystemExit(f"unknown shape '{name}'; known: {', '.join(SHAPES)}")
    shape = SHAPES[name]
    return build_shaped_model(shape, cache_dir, quant=shape.quant,
                              progress=lambda line: sys.stderr.write(line + "\n"))


if __name__ == "__main__":
    sys.exit(main())
