"""The memory watermarks on a real NVIDIA card, through NVML and a real llama.cpp CUDA
build: a model that would not fit beside another process on the card is refused, and
pages wait while the card is above the high watermark. Skipped where there is no such
card (CI); ``scripts/gpu-check.sh`` runs it on the GPU host, on the model named by
$APPLIANCE_GPU_MODEL and $APPLIANCE_GPU_MMPROJ (else the tiny one)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from appliance.daemon import Appliance
from appliance.errors import ModelDoesNotFit
from appliance.gguf.pair import inspect_model
from appliance.gpu import NvmlDevice
from appliance.intake import SubmitOptions
from appliance.memory_plan import estimate_worker_bytes
from appliance.store import queries
from tests.conftest import make_settings
from tests.fixtures.documents import write_png
from tests.fixtures.gpu import card_ballast
from tests.fixtures.waiting import wait_for


def _offloads() -> bool:
    import llama_cpp

    return bool(llama_cpp.llama_supports_gpu_offload())


pytestmark = pytest.mark.skipif(not (NvmlDevice.available() and _offloads()),
                                reason="needs an NVIDIA card and a CUDA build of llama.cpp")


@pytest.fixture
def gpu_settings(tmp_path, tiny_model):
    named = os.environ.get("APPLIANCE_GPU_MODEL"), os.environ.get("APPLIANCE_GPU_MMPROJ")
    model, mmproj = (Path(named[0]), Path(named[1])) if all(named) else tiny_model
    return make_settings(tmp_path, engine={"name": "llama", "model": str(model),
                                           "mmproj": str(mmproj), "parallel": 1},
                         memory={"sample_interval_s": 0.05})


def _card() -> tuple[int, int]:
    device = NvmlDevice(0)
    try:
        sample = device.sample()
    finally:
        device.close()
    return sample.used_bytes, sample.total_bytes


def test_a_model_that_would_not_fit_beside_another_process_is_refused(gpu_settings):
    engine, memory = gpu_settings.engine, gpu_settings.memory
    need = estimate_worker_bytes(inspect_model(engine.model, engine.mmproj),
                                 n_ctx=engine.n_ctx).total_bytes
    used, total = _card()
    room = int(memory.vram_load_limit * total) - used
    with card_ballast(room - need // 2):  # half of what one worker reading one page needs
        with pytest.raises(ModelDoesNotFit) as refused:
            Appliance(gpu_settings)  # the daemon's own device: NVML, card 0
    assert "GPU memory" in refused.value.message and "engine.n_ctx" in refused.value.message
    Appliance(gpu_settings).db.close()  # with the other tenant gone, the same settings fit


def test_pages_wait_while_the_card_is_above_the_high_watermark(gpu_settings, tmp_path):
    memory = gpu_settings.memory
    appliance = Appliance(gpu_settings)
    appliance.start()
    try:
        wait_for(lambda: appliance.ready, timeout_s=300, what="the worker's warm-up")
        used, total = _card()
        # between the high watermark and the critical one: held, nothing taken back
        target = (memory.vram_high_watermark + memory.vram_critical) / 2
        with card_ballast(int(target * total) - used):
            wait_for(lambda: appliance.memory.status()["state"] == "paused", timeout_s=30,
                     what="the pause")
            doc = appliance.submit_path(write_png(tmp_path / "held.png", ["Held page 2026"]),
                                        SubmitOptions(source="api"))
            time.sleep(2.0)
            assert queries.get_document(appliance.db, doc.id).status == "queued"
        # a random-weight model's page loops; the retry ladder ends with the classic engine
        wait_for(lambda: queries.get_document(appliance.db, doc.id).status == "done",
                 timeout_s=180, what="the page once the card was free again")
        counts = appliance.memory.watermarks.counts
        assert counts["pause"] == 1 and counts["resume"] == 1
    finally:
        appliance.stop()
