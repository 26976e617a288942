"""The parallel decoding bench on the tiny model, read in the daemon's own worker: its
report, each N's line as it is measured, the raw loop and llama-server's plumbing."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from PIL import Image

from appliance.config import Settings, dump_toml, settings_from_dict
from appliance.errors import EngineUnavailable
from appliance.engines.llama.llama_server import LlamaServer, chat_request, complete
from appliance.engines.llama import parallel_bench
from appliance.engines.llama.looping_bench import format_looping_report, run_looping_bench
from appliance.engines.llama.parallel_bench import ProcessPeaks, run_parallel_bench
from appliance.engines.llama.raw_decode import RawDecoder

TOKENS = 8


def check_engine_figures(run: dict, pages: int) -> None:
    engine = run["engine"]
    assert engine["pages"] == pages
    assert engine["generated_tokens"] == pages * TOKENS  # every answer exactly TOKENS long
    assert engine["tokens_per_s"] == pytest.approx(engine["generated_tokens"] / engine["elapsed_s"])
    assert engine["pages_per_min"] == pytest.approx(pages / engine["elapsed_s"] * 60)
    latency = engine["latency_s"]
    assert 0 < latency["p50"] <= latency["p95"] <= engine["elapsed_s"]
    assert engine["rss_peak_mb"] >= engine["rss_start_mb"] > 0
    assert engine["vram_peak_mb"] is None  # no NVML on CI machines
    assert run["raw"]["batch"] == run["parallel"] and run["raw"]["steps"] == TOKENS
    assert run["raw"]["tokens_per_s"] > 0


def test_bench_parallel_one_page_at_a_time(tiny_model, tmp_path):
    model, mmproj = tiny_model
    config = {"engine": {"name": "llama", "model": str(model), "mmproj": str(mmproj),
                         "threads": 1, "n_ctx": 1024},
              "paths": {"data_dir": str(tmp_path / "data")}}
    (tmp_path / "bench.toml").write_text(dump_toml(config))
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "bench", "--config",
                          str(tmp_path / "bench.toml"), "--parallel", "1", "--tokens",
                          str(TOKENS), "--pages", "4", "--report", str(report)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(report.read_text())
    assert result["tokens_per_page"] == TOKENS and result["n_ctx_per_page"] == 1024
    [only] = result["runs"]
    check_engine_figures(only, pages=4)
    assert only["ratio_to_n1"] == 1.0
    assert only["raw"]["prompt_tokens"] > result["image_tokens"]
    assert "   1     4" in run.stdout  # the table's row for N = 1, 4 pages


def tiny_settings(tmp_path: Path) -> Settings:
    return settings_from_dict({"engine": {"threads": 1, "n_ctx": 1024},
                               "paths": {"data_dir": str(tmp_path / "data")}}, tmp_path)


def test_bench_parallel_two_pages_at_once(tiny_model, tmp_path):
    model, mmproj = tiny_model
    lines = []
    result = run_parallel_bench(tiny_settings(tmp_path), model, mmproj, [2, 1], tokens=TOKENS,
                                on_run=lambda run: lines.append(json.dumps(run)))
    one, two = result["runs"]  # in order of N
    assert [json.loads(line) for line in lines] == [one, two]  # each as it was measured
    assert (one["parallel"], two["parallel"]) == (1, 2)
    for run in (one, two):
        check_engine_figures(run, pages=4)
        decode = run["engine"]["decode"]
        # the engine's own counters agree with the answers it returned
        assert decode["generated_tokens"] == run["engine"]["generated_tokens"]
        assert 0 <= decode["idle_share"] <= 1 and 0 < decode["prompt_share"] <= 1
        assert decode["loop_tokens_per_s"] > 0 and run["engine_over_raw"] > 0
    assert one["ratio_to_n1"] == 1.0
    assert two["vram_plan_mb"] > one["vram_plan_mb"] > 0  # a KV cache per slot
    assert two["ratio_to_n1"] == pytest.approx(two["engine"]["tokens_per_s"]
                                               / one["engine"]["tokens_per_s"])
    # the worker's own stages, as the daemon times them
    assert one["engine"]["stages_ms"]["inference_ms"] > 0


def test_a_worker_that_crashes_at_start_stops_the_bench_with_how(aborting_model, tmp_path):
    with pytest.raises(EngineUnavailable, match="died while starting .killed by SIGABRT"):
        run_parallel_bench(tiny_settings(tmp_path), *aborting_model, [1], tokens=TOKENS)


def test_a_looping_page_beside_healthy_ones_is_measured(tiny_model):
    """The tiny model loops under greedy decoding: the injected page runs until its
    guard (or its slot's context) stops it, in a slot of its own, while the healthy
    pages go on."""
    model, mmproj = tiny_model
    result = run_looping_bench(model, mmproj, 3, tokens=8, pages=4, threads=1, n_ctx=1024,
                               n_gpu_layers=0, flash_attn=True)
    loop = result["looping_page"]
    assert loop["stop"] in ("degenerate", "length") and loop["tokens"] > 100
    for key in ("without_looping_page", "with_looping_page"):
        run = result[key]
        assert run["healthy_tokens_per_s"] > 0
        assert run["latency_s"]["p50"] <= run["latency_s"]["p95"]
    # beside it, the engine generated the looping page's tokens as well
    with_loop = result["with_looping_page"]
    assert with_loop["all_tokens_per_s"] > with_loop["healthy_tokens_per_s"]
    assert "healthy p50 x" in format_looping_report(result)
    with pytest.raises(ValueError, match="--parallel 2 or more"):
        run_looping_bench(model, mmproj, 1, tokens=8, pages=4, threads=1, n_ctx=1024,
                          n_gpu_layers=0, flash_attn=True)


def test_raw_loop_decodes_one_and_two_sequences(tiny_model):
    model, _ = tiny_model
    decoder = RawDecoder(str(model), threads=1, n_ctx=256)
    try:
        for batch in (1, 2):
            run = decoder.run(batch, prompt_tokens=40, steps=TOKENS)
            assert run.batch == batch and run.seconds > 0 and run.tokens_per_s > 0
        assert decoder.count_tokens("Transcribe this page.") > 0
        with pytest.raises(ValueError, match="exceed n_ctx 256"):
            decoder.run(1, prompt_tokens=250, steps=TOKENS)
    finally:
        decoder.close()


class _ScriptedNvml:
    """pynvml's calls that ProcessPeaks makes, answering the card's used bytes from a
    script (the last value repeats); ``served`` is set once the script is spent."""

    NVMLError = RuntimeError

    def __init__(self, used_mib: list[int]):
        self.script, self.served = [m * 2**20 for m in used_mib], threading.Event()

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetMemoryInfo(self, handle):
        used = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if len(self.script) == 1:
            self.served.set()
        return type("Memory", (), {"used": used})()


def test_peak_vram_is_the_cards_peak_above_what_was_in_use_before(monkeypatch):
    nvml = _ScriptedNvml([1000, 2200, 3000, 2500])  # on entry, then while the block runs
    monkeypatch.setattr(parallel_bench, "pynvml", nvml)
    with ProcessPeaks(os.getpid()) as peaks:
        assert nvml.served.wait(60)
    assert peaks.report()["vram_peak_mb"] == 2000
    assert peaks.report()["rss_peak_mb"] >= peaks.report()["rss_start_mb"] > 0


class _ChatCompletions(BaseHTTPRequestHandler):
    """Answers like llama-server: usage and timings, or an error for max_tokens 0."""

    received: list[tuple[str, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append((self.path, body))
        if body["max_tokens"] == 0:
            answer, status = {"error": {"message": "n_predict must be positive"}}, 400
        else:
            answer, status = {"choices": [{"message": {"content": "x"}}],
                              "usage": {"completion_tokens": body["n_predict"],
                                        "prompt_tokens": 300},
                              "timings": {"prompt_ms": 12.5, "predicted_ms": 40.0}}, 200
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_a_page_goes_to_llama_server_as_an_openai_chat_completion():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _ChatCompletions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        body = chat_request(Image.new("RGB", (1240, 1754), "white"), "Transcribe.", 224, TOKENS)
        page = complete(url, body)
        with pytest.raises(RuntimeError, match="answered 400: .*n_predict must be positive"):
            complete(url, chat_request(Image.new("RGB", (10, 10)), "Transcribe.", 224, 0))
    finally:
        server.shutdown()
    path, sent = _ChatCompletions.received[0]
    assert path == "/v1/chat/completions"
    assert (sent["n_predict"], sent["max_tokens"], sent["ignore_eos"], sent["temperature"]) == \
        (TOKENS, TOKENS, True, 0.0)
    image_part, text_part = sent["messages"][0]["content"]
    assert text_part == {"type": "text", "text": "Transcribe."}
    png = image_part["image_url"]["url"].removeprefix("data:image/png;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(png))).size == (224, 224)
    assert (page.completion_tokens, page.prompt_tokens, page.predicted_ms) == (TOKENS, 300, 40.0)
    assert page.latency_s > 0


def test_a_llama_server_that_exits_at_start_is_reported(tmp_path):
    server = LlamaServer(Path("/bin/false"), tmp_path / "m.gguf", tmp_path / "p.gguf",
                         parallel=2, n_ctx=1024, threads=1, log_path=tmp_path / "server.log")
    with pytest.raises(RuntimeError, match="exited with 1 while starting"):
        with server:
            pass
    assert server.process.returncode == 1
    assert "-np 2 -c 2048" in " ".join(server.command)
