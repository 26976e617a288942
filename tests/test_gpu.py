"""Memory sampling, watermarks and load-time estimates.

The GPU is the one part this machine may lack, so ``FakeDevice`` stands in for the
card; host memory and NVML are asked for real.
"""

from __future__ import annotations

import ctypes.util
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from appliance.engines.llama.validate import ModelInfo, inspect_model
from appliance.errors import ConfigError, ModelDoesNotFit, error_class_for
from appliance.gpu import (
    FakeDevice,
    HostMemoryDevice,
    MemorySample,
    MemorySampler,
    NvmlDevice,
    Transition,
    Watermarks,
    estimate_worker_bytes,
    open_device,
    plan_workers,
)

GIB = 2**30
MIB = 2**20

# google/gemma-3-4b-it as llama.cpp sees it (Q4_K_M text model, f16 mmproj).
GEMMA3_4B = ModelInfo(
    name="gemma-3-4b-it", arch="gemma3", quant="Q4_K_M", n_embd=2560, n_layer=34,
    n_head=8, n_head_kv=4, head_dim=256, context_length=131072, n_vocab=262144,
    model_path=Path("models/gemma-3-4b-it-Q4_K_M.gguf"), model_size=2_489_757_856,
    mmproj_path=Path("models/mmproj-gemma-3-4b-it-f16.gguf"), mmproj_name="mmproj",
    mmproj_size=851_251_104, projector_type="gemma3", projection_dim=2560,
    image_size=896, patch_size=14, n_merge=4, image_tokens=256, image_tokens_min=256)
GEMMA3_4B_KV_F16 = 4096 * 34 * 4 * 256 * 2 * 2


def feed(marks: Watermarks, *fractions: float) -> list[tuple[str, str]]:
    return [(t.from_state, t.to_state) for f in fractions for t in marks.observe(f)]


# --- watermarks ----------------------------------------------------------------------


def test_crossing_high_pauses_and_only_dropping_below_low_resumes():
    marks = Watermarks()
    assert feed(marks, 0.50, 0.85) == [] and marks.dispatch_allowed
    assert feed(marks, 0.86) == [("ok", "paused")]
    assert marks.state == "paused" and not marks.dispatch_allowed
    assert feed(marks, 0.80, 0.76, 0.75) == []
    assert marks.state == "paused"
    assert feed(marks, 0.74) == [("paused", "ok")]
    assert marks.dispatch_allowed
    assert marks.counts == {"pause": 1, "resume": 1, "preempt": 0, "relieve": 0}


@pytest.mark.parametrize("start", [0.5, 0.9])
def test_oscillating_between_low_and_high_never_toggles(start):
    marks = Watermarks()
    marks.observe(start)
    state = marks.state
    assert feed(marks, *[0.80, 0.84] * 50) == []
    assert marks.state == state


def test_critical_needs_consecutive_samples_and_repeats():
    marks = Watermarks()
    assert feed(marks, 0.96, 0.97) == [("ok", "paused")]
    assert feed(marks, 0.90) == []  # the run of samples above critical starts over
    assert feed(marks, 0.96, 0.96) == []
    transitions = marks.observe(0.96)
    assert transitions == [Transition("paused", "critical", 0.96)]
    assert transitions[0].kind == "preempt"
    assert marks.state == "critical" and not marks.dispatch_allowed
    assert feed(marks, 0.97, 0.97) == []  # reported once per entry...
    assert feed(marks, 0.97) == [("critical", "critical")]  # ...then every 3 more
    assert feed(marks, 0.90) == [("critical", "paused")]
    assert feed(marks, 0.70) == [("paused", "ok")]
    assert marks.counts == {"pause": 1, "resume": 1, "preempt": 2, "relieve": 1}


def test_critical_falling_below_low_resumes_at_once():
    marks = Watermarks(critical_samples=1)
    assert feed(marks, 0.99) == [("ok", "paused"), ("paused", "critical")]
    assert feed(marks, 0.10) == [("critical", "ok")]


@pytest.mark.parametrize("kwargs", [dict(low=0.9), dict(high=0.99), dict(critical_samples=0)])
def test_inconsistent_watermarks_are_refused(kwargs):
    with pytest.raises(ConfigError, match="low < high <= critical"):
        Watermarks(**kwargs)


# --- devices and the sampler ---------------------------------------------------------


def test_fake_device_reports_what_it_is_told():
    device = FakeDevice(24 * GIB, script=[1 * GIB, 2 * GIB])
    device.set_pid(4242, 512 * MIB)
    first, second, third = device.sample(), device.sample(), device.sample()
    assert [s.used_bytes for s in (first, second, third)] == [GIB, 2 * GIB, 2 * GIB]
    assert first.per_pid == {4242: 512 * MIB} and first.source == "fake"
    device.set_used(12 * GIB)
    assert device.sample().fraction == 0.5 and device.samples == 4


def test_host_memory_device_samples_this_machine():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    device = HostMemoryDevice()
    device.watch_pids([os.getpid(), gone.pid])
    sample = device.sample()
    assert sample.source == "host" and sample.total_bytes > 0
    assert 0 < sample.used_bytes <= sample.total_bytes
    assert 0 < sample.fraction <= 1
    assert sample.per_pid[os.getpid()] > 10 * MIB  # this interpreter with pytest loaded
    assert gone.pid not in sample.per_pid


def test_nvml_availability_is_real():
    available = NvmlDevice.available()
    if ctypes.util.find_library("nvidia-ml") is None:
        assert available is False  # no driver library on this machine
    device = open_device()
    if available:
        sample = device.sample()
        assert isinstance(device, NvmlDevice) and sample.source == "nvml"
        assert 0 < sample.used_bytes < sample.total_bytes
        device.close()
    else:
        assert isinstance(device, HostMemoryDevice)


def test_sampler_thread_reports_transitions_in_order():
    script = [f * GIB // 100 for f in (50, 86, 96, 97, 98, 80, 84, 74, 50)]
    device = FakeDevice(GIB, script=script)
    seen: list[Transition] = []
    sampler = MemorySampler(device, Watermarks(), interval_s=0.01, on_transition=seen.append)
    sampler.start()
    deadline = time.monotonic() + 10
    while device.samples < len(script) + 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    assert [(t.from_state, t.to_state) for t in seen] == [
        ("ok", "paused"), ("paused", "critical"), ("critical", "paused"), ("paused", "ok")]
    assert [t.kind for t in seen] == ["pause", "preempt", "relieve", "resume"]
    assert sampler.peak_used_bytes == 98 * GIB // 100
    assert sampler.latest.used_bytes == GIB // 2
    assert sampler.status()["state"] == "ok"


def test_sampler_survives_a_failing_callback_and_reports_status():
    def explode(transition):
        raise RuntimeError("the dispatcher is gone")

    device = FakeDevice(100 * GIB)
    sampler = MemorySampler(device, on_transition=explode)
    assert sampler.status()["message"] == "ok: no memory sample yet"
    device.set_used(87 * GIB)
    assert [t.kind for t in sampler.sample_once()] == ["pause"]
    status = sampler.status()
    assert status["message"] == "paused: GPU memory 87 %"
    assert status["source"] == "fake" and status["state"] == "paused"
    assert status["used_bytes"] == 87 * GIB and status["total_bytes"] == 100 * GIB
    assert status["fraction"] == 0.87 and status["dispatch_allowed"] is False
    host = MemorySampler(HostMemoryDevice())
    host.sample_once()
    assert "host memory" in host.status()["message"]


# --- estimates and plans -------------------------------------------------------------


def test_gemma3_4b_estimate():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    assert estimate.kv_cache_bytes == GEMMA3_4B_KV_F16 == 570_425_344
    assert estimate.weights_bytes == GEMMA3_4B.model_size
    assert estimate.mmproj_bytes == GEMMA3_4B.mmproj_size
    assert estimate.compute_bytes == 256 * MIB  # 10 % of 2.3 GiB is below the floor
    assert estimate.total_bytes == (GEMMA3_4B.model_size + GEMMA3_4B.mmproj_size
                                    + GEMMA3_4B_KV_F16 + 256 * MIB)
    text = estimate.describe()
    assert "n_ctx 4096" in text and "f16" in text and "Q4_K_M" in text and "34/34" in text


def test_cache_types_and_compute_margin():
    q8 = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, cache_type="q8_0")
    q4 = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, cache_type="Q4_0")
    f32 = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, cache_type="f32")
    assert q8.kv_cache_bytes == GEMMA3_4B_KV_F16 // 2 * 34 // 32
    assert q4.kv_cache_bytes == GEMMA3_4B_KV_F16 // 2 * 18 // 32
    assert f32.kv_cache_bytes == 2 * GEMMA3_4B_KV_F16
    big = estimate_worker_bytes(replace(GEMMA3_4B, model_size=10 * GIB), n_ctx=4096)
    assert big.compute_bytes == GIB
    assert estimate_worker_bytes(GEMMA3_4B, n_ctx=4096,
                                 compute_margin_bytes=MIB).compute_bytes == MIB
    with pytest.raises(ConfigError, match="unknown KV cache type 'q3_k'"):
        estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, cache_type="q3_k")


def test_partial_offload_scales_weights_and_kv_cache():
    full = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    half = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, n_gpu_layers=17)
    assert half.kv_cache_bytes == GEMMA3_4B_KV_F16 // 2
    assert half.weights_bytes == GEMMA3_4B.model_size // 2
    assert half.mmproj_bytes == full.mmproj_bytes  # the projector runs on the card anyway
    none = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, n_gpu_layers=0)
    assert none.weights_bytes == none.kv_cache_bytes == 0
    assert estimate_worker_bytes(GEMMA3_4B, n_ctx=4096, n_gpu_layers=99) == full


def test_estimate_of_the_tiny_test_model(tiny_model):
    info = inspect_model(*tiny_model)
    estimate = estimate_worker_bytes(info, n_ctx=512)
    assert estimate.weights_bytes == tiny_model[0].stat().st_size
    assert estimate.mmproj_bytes == tiny_model[1].stat().st_size
    assert estimate.kv_cache_bytes == 512 * info.n_layer * info.n_head_kv * info.head_dim * 4


def five_gib_model() -> ModelInfo:
    return replace(GEMMA3_4B, name="gemma-3-12b-it", model_size=5 * GIB)


def test_plan_workers_on_a_24_gib_card():
    card = FakeDevice(24 * GIB)
    card.set_used(2 * GIB)
    sample = card.sample()
    estimate = estimate_worker_bytes(five_gib_model(), n_ctx=4096)
    per_worker = estimate.total_bytes * 1.15
    # 21.6 GiB may be used; 2 GiB are; each worker takes about 7.9 GiB: two fit.
    assert 2 * GIB + 2 * per_worker <= 0.9 * 24 * GIB < 2 * GIB + 3 * per_worker
    plan = plan_workers(estimate, sample, configured=4)
    assert (plan.count, plan.fits, plan.refused) == (2, 2, False)
    assert plan.message.startswith("only 2 of 4 configured workers fit, running 2")
    assert "workers.count = 2" in plan.message
    assert plan_workers(estimate, sample, configured=1).count == 1
    assert plan_workers(estimate, sample, configured=2).require() == 2


def test_a_model_that_does_not_fit_is_refused_with_the_knobs():
    card = FakeDevice(24 * GIB)
    card.set_used(2 * GIB)
    sample = card.sample()
    huge = replace(GEMMA3_4B, name="gemma-3-27b-it", quant="Q8_0", model_size=27 * GIB)
    estimate = estimate_worker_bytes(huge, n_ctx=8192)
    plan = plan_workers(estimate, sample, configured=1)
    assert plan.refused and plan.count == 0
    needed, free = estimate.total_bytes * 1.15 / GIB, 0.9 * 24 - 2
    assert f"needs {needed:.1f} GiB with 15 % safety" in plan.message
    assert f"{free:.1f} GiB of GPU memory is free" in plan.message
    for knob in ("smaller quant than Q8_0", "engine.n_gpu_layers", "engine.n_ctx = 8192",
                 "workers.count"):
        assert knob in plan.message
    with pytest.raises(ModelDoesNotFit) as caught:
        plan.require()
    assert caught.value.message == plan.message
    assert caught.value.code == "model_does_not_fit" and caught.value.http_status == 503
    assert error_class_for("model_does_not_fit") is ModelDoesNotFit


def test_plan_on_host_memory_says_so():
    sample = MemorySample(used_bytes=15 * GIB, total_bytes=16 * GIB, source="host")
    plan = plan_workers(estimate_worker_bytes(GEMMA3_4B, n_ctx=4096), sample, configured=1)
    assert plan.refused and "0.0 GiB of host memory is free" in plan.message
