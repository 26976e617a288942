"""Memory sampling, watermarks, and load-time estimates and plans.

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

from appliance.gguf.pair import inspect_model, ModelInfo
from appliance.errors import ConfigError, ModelDoesNotFit, error_class_for
from appliance.gpu import (
    HostMemoryDevice,
    MemorySample,
    MemorySampler,
    NvmlDevice,
    Transition,
    Watermarks,
    open_device,
)
from appliance.memory_plan import (MAX_AUTO_SLOTS, MAX_AUTO_SLOTS_CPU, estimate_worker_bytes,
                                   plan_for, plan_memory)
from tests.conftest import make_settings
from tests.fixtures.gpu import FakeDevice

GIB = 2**30
MIB = 2**20

# google/gemma-3-4b-it as llama.cpp sees it (Q4_K_M text model, f16 mmproj).
GEMMA3_4B = ModelInfo(
    name="gemma-3-4b-it", family="gemma3", arch="gemma3", quant="Q4_K_M", n_embd=2560, n_layer=34,
    n_head=8, n_head_kv=4, head_dim=256, context_length=131072, n_vocab=262144,
    model_path=Path("models/gemma-3-4b-it-Q4_K_M.gguf"), model_size=2_489_757_856,
    mmproj_path=Path("models/mmproj-gemma-3-4b-it-f16.gguf"), mmproj_name="mmproj",
    mmproj_size=851_251_104, projector_type="gemma3", projection_dim=2560,
    image_size=896, patch_size=14, n_merge=4, image_tokens=256, image_tokens_min=256,
    max_pixels=896 * 896)
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
    assert first.per_pid == {4242: 512 * MIB} and first.source == "nvml"
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
    assert status["source"] == "nvml" and status["state"] == "paused"
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
    plan = plan_memory(estimate, sample, workers=4)
    assert (plan.workers, plan.slots, plan.refused, plan.short) == (2, 1, False, True)
    assert plan.message.startswith("only 2 of 4 configured workers fit, running 2")
    assert "workers.count = 2" in plan.message
    assert plan_memory(estimate, sample, workers=1).workers == 1
    assert plan_memory(estimate, sample, workers=2).require().workers == 2
    assert not plan_memory(estimate, sample, workers=2).short


def test_a_model_that_does_not_fit_is_refused_with_the_knobs():
    card = FakeDevice(24 * GIB)
    card.set_used(2 * GIB)
    sample = card.sample()
    huge = replace(GEMMA3_4B, name="gemma-3-27b-it", quant="Q8_0", model_size=27 * GIB)
    estimate = estimate_worker_bytes(huge, n_ctx=8192)
    for parallel in (1, 8, "auto"):
        plan = plan_memory(estimate, sample, workers=1, parallel=parallel)
        assert plan.refused and plan.workers == 0 and plan.slots == 1
        assert plan.message.startswith("the model does not fit, not even one worker reading "
                                       "one page at a time")
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
    plan = plan_memory(estimate_worker_bytes(GEMMA3_4B, n_ctx=4096), sample, workers=1)
    assert plan.refused and "0.0 GiB of host memory is free" in plan.message


def test_the_plan_on_this_hosts_memory(tiny_model):
    """A CPU-only host plans against host memory, sampled for real."""
    sample = HostMemoryDevice().sample()
    estimate = estimate_worker_bytes(inspect_model(*tiny_model), n_ctx=512)
    plan = plan_memory(estimate, sample, workers=1, parallel="auto", load_limit=1.0)
    # the CPU evaluates every page's image and prompt in turn: auto takes fewer there
    if sample.total_bytes - sample.used_bytes > 1.15 * estimate.at(MAX_AUTO_SLOTS).total_bytes:
        assert (plan.workers, plan.slots, plan.short) == (1, MAX_AUTO_SLOTS_CPU, False)
    assert "of host memory is free" in plan.message
    assert plan_memory(estimate, sample, workers=1, parallel=8, load_limit=1.0).slots == 8


# Gemma 3 4B at n_ctx 4096 on one card: weights + mmproj + compute once, 0.53 GiB a slot.
GEMMA3_4B_ONCE = GEMMA3_4B.model_size + GEMMA3_4B.mmproj_size + 256 * MIB


def card(total_gib: float, used_gib: float) -> MemorySample:
    device = FakeDevice(int(total_gib * GIB))
    device.set_used(int(used_gib * GIB))
    return device.sample()


def test_slots_add_a_kv_cache_each_to_one_copy_of_the_weights():
    one = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    assert (one.slots, one.kv_slot_bytes) == (1, GEMMA3_4B_KV_F16)
    four = one.at(4)
    assert four.kv_cache_bytes == 4 * GEMMA3_4B_KV_F16
    assert four.total_bytes == GEMMA3_4B_ONCE + 4 * GEMMA3_4B_KV_F16
    assert "KV cache 4 x 0.53 GiB (n_ctx 4096 per slot, f16)" in four.describe()


def test_auto_takes_the_most_slots_that_fit():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    sample = card(12, 1)  # 9.8 GiB below the load limit
    plan = plan_memory(estimate, sample, workers=1, parallel="auto")
    assert (plan.workers, plan.slots, plan.refused, plan.short) == (1, 9, False, False)
    limit = 0.9 * 12 * GIB

    def used_with(slots: int) -> float:
        return 1 * GIB + (GEMMA3_4B_ONCE + slots * GEMMA3_4B_KV_F16) * 1.15

    assert used_with(9) <= limit < used_with(10)  # the largest N that fits
    assert plan.total_bytes == GEMMA3_4B_ONCE + 9 * GEMMA3_4B_KV_F16
    assert plan.message.startswith("1 worker(s) x 9 slot(s) fit, "
                                   f"{plan.total_bytes / GIB:.2f} GiB in all: ")
    assert "KV cache 9 x 0.53 GiB (n_ctx 4096 per slot, f16)" in plan.message
    assert "9.8 GiB of GPU memory is free below the 90 % load limit" in plan.message


def test_auto_stops_at_the_cap_on_a_big_card():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    plan = plan_memory(estimate, card(141, 0), workers=1, parallel="auto")
    assert (plan.workers, plan.slots, plan.short) == (1, MAX_AUTO_SLOTS, False)
    assert f"x {MAX_AUTO_SLOTS} slot(s) fit (the most auto takes)" in plan.message
    # an explicit number goes past the cap when it fits
    assert plan_memory(estimate, card(141, 0), workers=1, parallel=64).slots == 64


def test_an_explicit_parallel_that_fits_runs_as_asked():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    plan = plan_memory(estimate, card(12, 1), workers=1, parallel=4)
    assert (plan.workers, plan.slots, plan.short) == (1, 4, False)
    assert plan.require() is plan


def test_fewer_slots_than_asked_run_and_the_message_says_so():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    plan = plan_memory(estimate, card(12, 1), workers=1, parallel=12)
    assert (plan.workers, plan.slots, plan.refused, plan.short) == (1, 9, False, True)
    assert plan.message.startswith("only 9 of 12 slots (engine.parallel) fit, running 9 (1 "
                                   f"worker(s) x 9 slot(s), {plan.total_bytes / GIB:.2f} GiB "
                                   "in all): one worker with 9 slot(s) needs ")
    assert "KV cache 9 x 0.53 GiB (n_ctx 4096 per slot, f16)" in plan.message
    assert "or set engine.parallel = 9" in plan.message
    assert "engine.n_ctx = 4096" in plan.message and "smaller quant than Q4_K_M" in plan.message
    assert plan.require().slots == 9


def test_workers_come_first_then_the_slots_they_leave_room_for():
    estimate = estimate_worker_bytes(GEMMA3_4B, n_ctx=4096)
    plan = plan_memory(estimate, card(24, 2), workers=2, parallel="auto")
    budget = 0.9 * 24 * GIB - 2 * GIB
    assert (plan.workers, plan.slots, plan.short) == (2, 9, False)
    assert 2 * estimate.at(9).total_bytes * 1.15 <= budget < 2 * estimate.at(10).total_bytes * 1.15
    assert plan.total_bytes == 2 * estimate.at(9).total_bytes
    assert plan.message.startswith("2 worker(s) x 9 slot(s) fit, ")
    # four workers with one slot each fit, not five, and four leave no room for a second slot
    both = plan_memory(estimate, card(24, 2), workers=5, parallel=2)
    assert (both.workers, both.slots, both.short) == (4, 1, True)
    assert both.message.startswith("only 4 of 5 configured workers fit, running 4; only 1 of 2 "
                                   "slots (engine.parallel) fit, running 1 (4 worker(s) x 1 "
                                   "slot(s), ")
    assert "or set workers.count = 4 and engine.parallel = 1" in both.message


def test_the_plan_follows_the_settings(tmp_path):
    settings = make_settings(tmp_path, engine={"n_ctx": 8192, "parallel": 3},
                             memory={"vram_load_limit": 0.5})
    plan = plan_for(settings, GEMMA3_4B, card(24, 0), parallel_slots=True)
    assert (plan.workers, plan.slots) == (1, 3)
    assert plan.estimate.kv_slot_bytes == 2 * GEMMA3_4B_KV_F16  # n_ctx 8192 per slot
    assert "below the 50 % load limit" in plan.message
    # an engine that reads one page at a time gets one slot, whatever engine.parallel says
    assert plan_for(settings, GEMMA3_4B, card(24, 0), parallel_slots=False).slots == 1
