"""`appliance bench` in CI size: a real daemon, real engines, the JSON report."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from appliance.config import OUTPUT_FORMATS, dump_toml
from appliance.raster.synthetic import render_text_page


def bench(tmp_path, config: dict, *args) -> dict:
    (tmp_path / "bench.toml").write_text(dump_toml(config))
    report = tmp_path / "report.json"
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "bench", "--config",
                          str(tmp_path / "bench.toml"), "--report", str(report), *args],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(report.read_text()) | {"stdout": run.stdout}


def test_bench_compares_the_daemon_with_the_bare_engine(tmp_path):
    # the bench sends its pages over the API: asked to write them to disk as well, so
    # that the outputs' cost is measured
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1},
                              "output": {"upload_formats": list(OUTPUT_FORMATS)}},
                   "--limit", "3", "--concurrency", "2", "--cost-per-hour", "3.6")
    assert result["appliance"]["pages_done"] == 3
    assert result["appliance"]["pages_per_min"] > 0 and result["bare"]["pages_per_min"] > 0
    # the bare loop ran before the daemon and after it: the ratio is against their mean
    before, after = result["bare"]["runs_s"]
    assert result["bare"]["elapsed_s"] == pytest.approx((before + after) / 2)
    assert f"{before:.1f} before the appliance, {after:.1f} after" in result["stdout"]
    assert list(result["stage_ms"]) == ["raster_ms", "preprocess_ms", "cache_ms",
                                        "inference_ms", "selection_marks_ms", "read_ms",
                                        "postprocess_ms", "barcodes_ms"]  # in pipeline order
    # what each document's outputs cost the daemon: every format but the PDF, the PDF,
    # the files written
    assert list(result["output_ms"]) == ["render_ms", "pdf_ms", "write_ms"]
    assert all(ms > 0 for ms in result["output_ms"].values())
    assert "outputs (mean ms per doc)" in result["stdout"]
    latency = result["latency_s"]
    for part in ("total", "queue_wait", "service"):
        assert 0 <= latency[part]["p50"] <= latency[part]["p95"] <= latency[part]["p99"]
    # a page's service time holds its inference, and arrival-to-export holds both parts
    assert latency["service"]["p99"] * 1000 >= min(result["stage_ms"].values())
    assert latency["total"]["p99"] >= latency["service"]["p99"]
    memory = result["memory"]
    assert memory["idle"]["daemon_with_workers_rss_mb"] > memory["idle"]["daemon_rss_mb"] > 0
    assert memory["peak"]["rss_peak_mb"] >= memory["idle"]["daemon_with_workers_rss_mb"] * 0.9
    assert 0 <= memory["idle"]["core_share"] < 1 and "idle CPU daemon" in result["stdout"]
    assert memory["peak"]["vram_peak_mb"] is None  # no NVML on CI machines
    # 3.6 per hour is 0.001 per second: C1M is a thousand times the seconds per page
    seconds_per_page = result["appliance"]["elapsed_s"] / 3
    assert result["cost"]["c1m"] == pytest.approx(1000 * seconds_per_page)
    assert "ratio appliance/bare" in result["stdout"] and "C1M" in result["stdout"]
    assert "queue wait" in result["stdout"]


def test_bench_docintel_sends_the_same_pages_through_both_apis(tmp_path):
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1}},
                   "--docintel", "--limit", "4", "--concurrency", "2")
    for api in ("native", "docintel"):  # every page answered through each API
        assert result[api]["pages"] == result[api]["answered"] == 4
        assert result[api]["pages_per_min"] > 0
    assert result["ratio_docintel_over_native"] == pytest.approx(
        result["docintel"]["pages_per_min"] / result["native"]["pages_per_min"])
    assert "ratio docintel/native" in result["stdout"]


def _confidence(tmp_path, page) -> tuple[float, float]:
    """The page's confidence, read as a one-thread worker does, without a second opinion
    and with one that agrees with it word for word."""
    from concurrent.futures import ThreadPoolExecutor

    from appliance.engines import create_engine
    from appliance.engines.messages import Job
    from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
    from appliance.quality.confidence import score_page

    pipeline = PagePipeline.load(create_engine("classic", {"threads": 1}), PageSettings())
    job = Job(job_id=1, original=page, kind="png", page_index=0, dpi=150,
              max_pixels=40_000_000, page_image=tmp_path / "seen.png", doc_type="generic",
              engine=None, attempt=1, pdf_password=None, deadline_s=60)
    with ThreadPoolExecutor(1) as background:
        done = run_job(pipeline, job, background)
    confirmed = score_page(done.recognition, doc_type="generic", second_opinion=done.recognition)
    return done.confidence, confirmed.score


def test_bench_sends_the_pages_of_an_eval_dataset(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # one page twice, two files (a pixel in a corner apart): the same confidence
    page = render_text_page(["Dataset page one"], width=400, height=200)
    for i in range(2):
        page.putpixel((0, 0), (255 - i, 255 - i, 255 - i))
        page.save(data / f"p{i}.png")
        (data / f"p{i}.txt").write_text("Dataset page one\n")
    # review_below over the pages' own confidence and under it confirmed: Tesseract's
    # agreement could carry each into the sample band, so it reads each again, and that
    # cost is reported on its own
    scores = [_confidence(tmp_path, data / f"p{i}.png") for i in range(2)]
    own, confirmed = max(s for s, _ in scores), min(c for _, c in scores)
    assert own < confirmed
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1},
                              "review": {"review_below": (own + confirmed) / 2,
                                         "accept_from": 1.0}},
                   "--limit", "2", "--dataset", str(data))
    assert result["source"] == str(data) and result["appliance"]["pages_done"] == 2
    second = result["second_opinion"]
    assert second["pages"] == second["of_pages"] == 2
    assert second["mean_ms"] > 0 and 0 < second["share_of_service"] < 1
    assert "second_opinion_ms" not in result["stage_ms"]
    assert "2 of 2 pages in doubt read again" in result["stdout"]


def test_bench_fixed_tokens_and_the_degenerate_injection_on_the_tiny_model(tmp_path, tiny_model):
    model, mmproj = tiny_model
    engine = {"name": "llama", "model": str(model), "mmproj": str(mmproj), "threads": 1}
    fixed = bench(tmp_path, {"engine": engine}, "--pages", "3", "--tokens", "16")
    assert fixed["tokens_per_page"] == 16 and fixed["appliance"]["pages_done"] == 3
    assert 0 <= fixed["vision"]["decode_loop_idle_share"] < 1
    # the tiny model's 224 px input reads an A4 page in strips, and its pages are in doubt
    assert fixed["vision"]["tiled_pages"] == 3 and fixed["second_opinion"]["pages"] == 3
    pure = bench(tmp_path, {"engine": engine}, "--pages", "2", "--tokens", "8",
                 "--without-choices")
    assert pure["pipeline_choices"] is False and pure["appliance"]["pages_done"] == 2
    assert pure["vision"]["tiled_pages"] == 0 and pure["second_opinion"]["pages"] == 0
    injected = bench(tmp_path, {"engine": engine, "workers": {"count": 2}},
                     "--inject-degenerate", "--pages", "2", "--concurrency", "1")
    for run in ("without_looping_page", "with_looping_page"):
        assert injected[run]["pages_done"] == 2
        assert 0 < injected[run]["latency_s"]["p50"] <= injected[run]["latency_s"]["p95"]
    assert injected["looping_page_s"] > 0


def test_bench_remote_sets_the_local_engine_beside_one_and_two_endpoints(tmp_path):
    # the tiny test model (written by the bench), llama-cpp-python's server started by it
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1}},
                   "--remote", "--pages", "2", "--tokens", "4")
    assert result["tokens_per_page"] == 4 and result["model"] == "tiny-gemma3.gguf"
    runs = result["runs"]
    assert list(runs) == ["local", "remote_x1", "remote_x2"]
    assert [run["engine"] for run in runs.values()] == ["llama", "openai", "openai"]
    for run in runs.values():
        assert run["pages"] == run["pages_done"] == 2
        assert run["ms_per_page"] > 0 and run["bare_ms_per_page"] > 0
        assert run["inference_ms"] > 0 and run["ratio_appliance_over_bare"] > 0
    assert runs["local"]["tiled_pages"] == 0  # no auto-tiling: one reading per page
    for name, run in result["details"].items():  # each run is a whole `appliance bench`
        assert run["pipeline_choices"] is False and run["second_opinion"]["pages"] == 0, name
    overhead = result["remote_overhead"]
    x1, local = runs["remote_x1"], runs["local"]
    assert overhead["ms_per_page"] == x1["ms_per_page"] - local["ms_per_page"]
    assert result["scaling_x2_over_x1"] == (runs["remote_x2"]["pages_per_min"]
                                            / runs["remote_x1"]["pages_per_min"])
    for line in ("remote over local per page", "scaling x2/x1", "remote_x2"):
        assert line in result["stdout"]


def test_bench_measures_the_searchable_pdf_of_real_files(tmp_path):
    """Two files read, their PDFs measured: sizes, time per page, and every accepted
    word found again in the text layer."""
    lines = ["Searchable archive copy 2026", "Invoice 4711 total 118.50 EUR"]
    png, tif = tmp_path / "scan.png", tmp_path / "scan.tif"
    render_text_page(lines, width=900, height=400).save(png, dpi=(150, 150))
    render_text_page(lines[::-1], width=900, height=400).save(tif, dpi=(150, 150))
    result = bench(tmp_path, {"engine": {"name": "classic", "threads": 1}},
                   "--searchable-pdf", str(png), str(tif))
    rows = result["searchable_pdf"]
    assert [(r["file"], r["pages"]) for r in rows] == [("scan.png", 1), ("scan.tif", 1)]
    for row in rows:
        assert row["pdf_bytes"] > 0 and row["original_bytes"] > 0 and row["ms_per_page"] > 0
        assert row["words"] >= 8 and row["found"] == row["words"]
    assert "| scan.png | 1 |" in result["stdout"]


def test_word_recall_counts_each_word_as_often_as_it_occurs():
    from appliance.measure.pdf_bench import word_recall

    assert word_recall("a b a c", "a b c") == (3, 4)
    assert word_recall("", "anything") == (0, 0)
