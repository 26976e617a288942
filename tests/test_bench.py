"""`appliance bench` in CI size: a real daemon, real engines, the JSON report."""

from __future__ import annotations

import json
import subprocess
import sys

from appliance.config import dump_toml


def bench(tmp_path, config: dict, *args) -> dict:
    (tmp_path / "bench.toml").write_text(dump_toml(config))
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "bench", "--config",
                          str(tmp_path / "bench.toml"), "--report", str(report), *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(report.read_text()) | {"stdout": run.stdout}


def test_bench_compares_the_daemon_with_the_bare_engine(tmp_path):
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1}},
                   "--pages", "3", "--concurrency", "2")
    assert result["appliance"]["pages_done"] == 3
    assert result["appliance"]["pages_per_min"] > 0 and result["bare"]["pages_per_min"] > 0
    assert set(result["stage_ms"]) == {"raster_ms", "inference_ms"}
    assert result["idle"]["daemon_with_workers_rss_mb"] > result["idle"]["daemon_rss_mb"] > 0
    assert "ratio appliance/bare" in result["stdout"]


def test_bench_fixed_tokens_and_the_degenerate_injection_on_the_tiny_model(tmp_path, tiny_model):
    model, mmproj = tiny_model
    engine = {"name": "llama", "model": str(model), "mmproj": str(mmproj), "threads": 1}
    fixed = bench(tmp_path, {"engine": engine}, "--pages", "3", "--tokens", "16")
    assert fixed["tokens_per_page"] == 16 and fixed["appliance"]["pages_done"] == 3
    injected = bench(tmp_path, {"engine": engine, "workers": {"count": 2}},
                     "--inject-degenerate", "--pages", "2", "--concurrency", "1")
    for run in ("without_looping_page", "with_looping_page"):
        assert injected[run]["pages_done"] == 2
        assert 0 < injected[run]["latency_p50_s"] <= injected[run]["latency_p95_s"]
    assert injected["looping_page_s"] > 0
