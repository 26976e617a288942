"""`appliance bench --remote`: the remote path against the local engine, in one run.

The same model (by default the tiny random-weight test model), the same synthetic page
files and the same fixed number of tokens per page go three ways, one after another,
each through a real daemon driven over its REST API (``bench.run_bench``) with the
pipeline's choices off (no auto-tiling, no second opinion) so that only the path
differs:

1. ``local``: engine.name = "llama" on the model, one worker reading one page at a time;
2. ``remote x1``: engine.name = "openai", one [[engine.remote]] endpoint (max_concurrency
   1) served by llama-cpp-python's own server (``python -m llama_cpp.server``) in a
   subprocess started and stopped here, with the same threads and context;
3. ``remote x2``: two such servers, two endpoints.

The page files are the same in each run (rendered alike, byte for byte), or the first
pages of an eval dataset. Each run also has its bare loop (``bench.run_bench``): the
local engine's own library, and for the endpoints plain requests to the first one, one
after another. The report gives the milliseconds per page of each, what the remote path
costs per page over the local engine (ms and ratio), the scaling from one endpoint to
two, and the appliance over its bare loop for each path. The local daemon runs the
config's workers.count workers (1 by default; the report says when it is more).
"""

from __future__ import annotations

import json
import tempfile
from contextlib import ExitStack
from pathlib import Path

from appliance.config import Settings
from appliance.engines import registry
from appliance.errors import InvalidRequest
from appliance.measure.bench import run_bench
from appliance.measure.openai_server import OpenAIServer, require_server

DEFAULT_PAGES = 12
DEFAULT_TOKENS = 64
SERVER_ALIAS = "bench"
ENDPOINT_TIMEOUT_S = 600.0  # the longest silence: a page on a slow CPU, not a hang
# one worker reading one page at a time, on one thread: the servers' own settings
LOCAL = {"threads": 1, "parallel": 1}
RUNS = ("local", "remote_x1", "remote_x2")


def run_remote_bench(settings: Settings, model: tuple[Path, Path] | None = None, *,
                     pages: int = DEFAULT_PAGES, tokens: int = DEFAULT_TOKENS,
                     concurrency: int = 4, dataset: Path | None = None,
                     report: Path | None = None, log_dir: Path | None = None) -> dict:
    """The three runs and their comparison (see the module's docstring). ``model``: a
    (text, mmproj) pair, by default the tiny test model written to a temp dir.
    ``log_dir``: where the servers' output goes (default: a temp dir, gone after)."""
    from appliance.gguf.pair import inspect_model

    require_server()
    if tokens < 1:
        raise InvalidRequest("bench --remote needs a fixed number of tokens per page (--tokens)")
    engine = settings.engine
    server_options = {"threads": LOCAL["threads"], "n_ctx": engine.n_ctx,
                      "n_batch": engine.n_batch, "n_gpu_layers": engine.n_gpu_layers,
                      "flash_attn": engine.flash_attn}
    with tempfile.TemporaryDirectory(prefix="appliance-remote-bench-") as tmp:
        if model is None:
            from appliance.gguf.testmodel import write_test_model

            model = write_test_model(Path(tmp) / "model")
        image_side = inspect_model(*model).image_size
        logs = log_dir or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)

        def bench(**engine_values) -> dict:
            return run_bench(settings, pages=pages, concurrency=concurrency, tokens=tokens,
                             dataset=dataset, model=model, choices=False,
                             engine=LOCAL | engine_values)

        def remote(count: int) -> dict:
            with ExitStack() as stack:
                servers = [stack.enter_context(
                    OpenAIServer(*model, logs / f"llama-cpp-server-x{count}-{i + 1}.log",
                                 alias=SERVER_ALIAS, **server_options)) for i in range(count)]
                return bench(name=registry.remote_engine().name,
                             remote=[_endpoint(server, f"bench-{i + 1}", image_side)
                                     for i, server in enumerate(servers)])

        runs = {"local": bench(), "remote_x1": remote(1), "remote_x2": remote(2)}
        result = compare(runs, model=model, tokens=tokens, image_side=image_side,
                         source=str(dataset) if dataset else "synthetic",
                         local_workers=settings.workers.count)
    if report:
        report.write_text(json.dumps(result, indent=2) + "\n")
    return result


def _endpoint(server: OpenAIServer, name: str, image_side: int) -> dict:
    """A server as an [[engine.remote]] table, one page at a time."""
    return {"url": server.url, "model": server.alias, "name": name, "max_concurrency": 1,
            "timeout_s": ENDPOINT_TIMEOUT_S, "image_side": image_side}


def _per_page_ms(part: dict) -> float:
    return part["elapsed_s"] / part["pages"] * 1000


def compare(runs: dict[str, dict], *, model: tuple[Path, Path], tokens: int,
            image_side: int, source: str, local_workers: int = 1) -> dict:
    """The runs side by side: per-page ms, the remote path over the local engine, the
    scaling from one endpoint to two, each path over its bare loop."""
    summary = {}
    for name, run in runs.items():
        appliance, bare = run["appliance"], run["bare"]
        summary[name] = {
            "engine": run["engine"], "pages": appliance["pages"],
            "pages_done": appliance["pages_done"], "pages_per_min": appliance["pages_per_min"],
            "ms_per_page": _per_page_ms(appliance), "bare_pages_per_min": bare["pages_per_min"],
            "bare_ms_per_page": _per_page_ms(bare),
            "ratio_appliance_over_bare": run["ratio_appliance_over_bare"],
            "service_p50_ms": run["latency_s"]["service"]["p50"] * 1000,
            "inference_ms": run["stage_ms"].get("inference_ms"),
            "tiled_pages": run["vision"]["tiled_pages"]}
    local, x1, x2 = (summary[name] for name in RUNS)
    return {
        "model": model[0].name, "mmproj": model[1].name, "image_side": image_side,
        "source": source, "tokens_per_page": tokens, "threads": LOCAL["threads"],
        "local_workers": local_workers, "runs": summary,
        "remote_overhead": {
            "ms_per_page": x1["ms_per_page"] - local["ms_per_page"],
            "ratio": x1["ms_per_page"] / local["ms_per_page"],
            # the same, with both paths' bare loops instead of the daemon
            "bare_ms_per_page": x1["bare_ms_per_page"] - local["bare_ms_per_page"]},
        "scaling_x2_over_x1": x2["pages_per_min"] / x1["pages_per_min"],
        "details": runs}


def _f(value: float | None, spec: str = ".0f") -> str:
    return "-" if value is None else format(value, spec)


def format_remote_report(result: dict) -> str:
    runs, overhead = result["runs"], result["remote_overhead"]
    rows = [f"{result['model']}, {result['tokens_per_page']} tokens per page (fixed), "
            f"{result['image_side']} px, threads {result['threads']}, one page at a time per "
            f"worker or endpoint, no auto-tiling, no second opinion, {result['source']} pages",
            "run         endpoints pages done  pages/min  ms/page  inference ms  "
            "bare ms/page  appliance/bare"]
    for name, endpoints in zip(RUNS, ("-", "1", "2")):
        run = runs[name]
        rows.append(f"{name:<11} {endpoints:>9} {run['pages']:>5} {run['pages_done']:>4}  "
                    f"{run['pages_per_min']:>9.1f}  {run['ms_per_page']:>7.0f}  "
                    f"{_f(run['inference_ms']):>12}  {run['bare_ms_per_page']:>12.0f}  "
                    f"{run['ratio_appliance_over_bare']:>14.3f}")
    rows += [f"remote over local per page  {overhead['ms_per_page']:+.0f} ms "
             f"(x{overhead['ratio']:.2f}); bare loops {overhead['bare_ms_per_page']:+.0f} ms",
             f"scaling x2/x1               {result['scaling_x2_over_x1']:.2f} "
             f"(pages/min, two endpoints over one)",
             "ms/page: first upload to last export over pages; inference: the worker's mean per "
             "page; bare: the local engine's library in the bench process, for the endpoints "
             "plain requests to the first one after another (so remote_x2's appliance/bare is "
             "two endpoints over one)"]
    if result["local_workers"] != 1:
        rows.append(f"WARNING the local run had {result['local_workers']} workers (the "
                    f"config's workers.count), each endpoint one: set it to 1 to compare")
    tiled = {name: run["tiled_pages"] for name, run in runs.items() if run["tiled_pages"]}
    if tiled:
        rows.append("WARNING read in strips, so the runs do not compare page for page: " +
                    ", ".join(f"{name} {count} pages" for name, count in tiled.items()))
    return "\n".join(rows)
