"""A looping page among healthy ones: does it slow them? (`bench --parallel N
--inject-degenerate`)

One engine with N slots. N - 1 client threads read healthy pages, each answer exactly
``tokens`` long, first alone and then with one more page in the last slot that the
model reads greedily with the repetition guard on. A random-weight model loops, so
that page runs until its guard stops it. The healthy pages' latency and the engine's
tokens/s are set side by side: the looping page may cost its own slot and its own
tokens (the guard's cost), nothing else. The engine runs in this process: the bench
reaches into its decoder to queue the looping page first.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from appliance.engines.base import PageRequest
from appliance.engines.llama.engine import LlamaEngine
from appliance.engines.llama.parallel_bench import PROMPT, fan_out, render_pages
from appliance.measure.stats import percentiles


def run_looping_bench(model: Path, mmproj: Path, parallel: int, *, tokens: int, pages: int,
                      threads: int, n_ctx: int, n_gpu_layers: int, flash_attn: bool) -> dict:
    if parallel < 2:
        raise ValueError("a looping page beside healthy ones needs --parallel 2 or more")
    *healthy, looping_page = render_pages(pages + 1)
    engine = LlamaEngine(str(model), str(mmproj), parallel=parallel, n_ctx=n_ctx,
                         threads=threads, n_gpu_layers=n_gpu_layers, flash_attn=flash_attn,
                         fixed_tokens=tokens, auto_tiling=False, retry_ladder=["greedy"])
    request = PageRequest(doc_type=PROMPT.doc_type)
    try:
        engine.recognize(looping_page, request)  # warm-up, as a worker's

        def healthy_run() -> dict:
            before = engine.decode_stats()
            results, latencies, elapsed = fan_out(
                len(healthy), parallel - 1, lambda page: engine.recognize(healthy[page],
                                                                          request))
            generated = engine.decode_stats()["generated_tokens"] - before["generated_tokens"]
            pct = percentiles(latencies)
            return {"elapsed_s": elapsed, "latency_s": {"p50": pct["p50"], "p95": pct["p95"]},
                    "healthy_tokens_per_s": sum(len(r.tokens) for r in results) / elapsed,
                    "all_tokens_per_s": generated / elapsed}

        alone = healthy_run()
        # the looping page: greedy, guarded, with the prompt's own token cap
        # queued before the healthy clients start, so it takes its slot first
        looping = engine.decoder.submit(replace(
            engine.decoding_for(looping_page, PROMPT, request, sampled=False),
            fixed=False, max_tokens=PROMPT.max_tokens))
        beside = healthy_run()
        beside["looping_page_ran_throughout"] = not looping.done()
        loop = engine.decoder.wait(looping)
    finally:
        engine.close()
    return {"model": str(model), "parallel": parallel, "healthy_pages": len(healthy),
            "tokens_per_page": tokens, "threads": threads, "cpu_count": os.cpu_count(),
            "without_looping_page": alone, "with_looping_page": beside,
            "looping_page": {"stop": loop.stop, "reason": loop.reason,
                             "tokens": len(loop.tokens)},
            "healthy_latency_ratio_p50": (beside["latency_s"]["p50"]
                                          / alone["latency_s"]["p50"])}


def format_looping_report(result: dict) -> str:
    loop = result["looping_page"]
    rows = [f"{Path(result['model']).name}: {result['parallel']} slots, "
            f"{result['healthy_pages']} healthy pages of {result['tokens_per_page']} tokens "
            f"from {result['parallel'] - 1} clients"]
    for label, key in (("without a looping page", "without_looping_page"),
                       ("with a looping page   ", "with_looping_page")):
        run = result[key]
        rows.append(f"{label}  healthy p50 {run['latency_s']['p50']:.2f} s, p95 "
                    f"{run['latency_s']['p95']:.2f} s, healthy {run['healthy_tokens_per_s']:.1f} "
                    f"tok/s, all {run['all_tokens_per_s']:.1f} tok/s")
    throughout = result["with_looping_page"]["looping_page_ran_throughout"]
    rows.append(f"the looping page: {loop['stop']} after {loop['tokens']} tokens "
                f"({loop['reason'] or 'no reason'}), "
                f"{'still running when the healthy pages were done' if throughout else 'stopped while the healthy pages ran'}; "
                f"healthy p50 x {result['healthy_latency_ratio_p50']:.2f} beside it")
    return "\n".join(rows)
