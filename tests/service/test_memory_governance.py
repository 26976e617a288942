"""Memory governance in a real appliance (real workers, real SQLite) with a fake GPU:
the only stand-in is the memory device, for the hardware this machine lacks."""

from __future__ import annotations

import time

import pytest
from sqlmodel import select

from appliance.daemon import Appliance
from appliance.gguf.pair import inspect_model
from appliance.errors import ModelDoesNotFit
from tests.fixtures.gpu import FakeDevice
from appliance.memory_plan import estimate_worker_bytes
from appliance.intake import SubmitOptions
from appliance.store import queries
from appliance.store.models import PageResult
from tests.conftest import make_settings
from ui.app import status_line
from tests.fixtures.documents import write_pdf, write_png

MIB = 2**20


def wait_for(predicate, timeout_s=120, what="condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def llama_settings(tmp_path, tiny_model, count, **engine):
    model, mmproj = tiny_model
    return make_settings(tmp_path, engine={"name": "llama", "model": str(model),
                                           "mmproj": str(mmproj), "threads": 1, **engine},
                         workers={"count": count})


def test_a_model_that_does_not_fit_is_refused_with_the_knobs(tmp_path, tiny_model):
    with pytest.raises(ModelDoesNotFit) as refused:
        Appliance(llama_settings(tmp_path, tiny_model, 1),
                  device=FakeDevice(total_bytes=512 * MIB, script=[400 * MIB]))
    message = refused.value.message
    for knob in ("quant", "engine.n_gpu_layers", "engine.n_ctx", "workers.count"):
        assert knob in message
    assert "GiB" in message


def test_the_worker_count_follows_the_memory_budget(tmp_path, tiny_model):
    settings = llama_settings(tmp_path, tiny_model, 4)
    per_worker = estimate_worker_bytes(inspect_model(*tiny_model), n_ctx=settings.engine.n_ctx)
    # room for 2.5 workers with the 15 % safety margin under the 90 % load limit
    total = int(per_worker.total_bytes * 1.15 * 2.5 / 0.90)
    appliance = Appliance(settings, device=FakeDevice(total_bytes=total))
    assert len(appliance.workers) == 2
    # the half worker left over becomes more slots for each of the two
    slots = appliance.worker_spec.options["parallel"]
    assert 2 * per_worker.at(slots).total_bytes * 1.15 <= 0.9 * total
    assert slots == 16 or 2 * per_worker.at(slots + 1).total_bytes * 1.15 > 0.9 * total
    assert all(w.spec.options["parallel"] == slots for w in appliance.workers)
    appliance.db.close()


def test_the_engine_gets_the_slots_that_fit(tmp_path, tiny_model, caplog):
    settings = llama_settings(tmp_path, tiny_model, 1, parallel=6)
    one = estimate_worker_bytes(inspect_model(*tiny_model), n_ctx=settings.engine.n_ctx)
    # room for 4 of the 6 slots asked for
    total = int(one.at(4).total_bytes * 1.15 / 0.90) + 1
    with caplog.at_level("INFO", logger="appliance.daemon"):
        appliance = Appliance(settings, device=FakeDevice(total_bytes=total))
    appliance.db.close()
    assert len(appliance.workers) == 1 and appliance.worker_spec.options["parallel"] == 4
    plan = next(r.getMessage() for r in caplog.records if "memory plan" in r.getMessage())
    assert "workers=1 slots=4" in plan and "only 4 of 6 slots (engine.parallel) fit" in plan
    assert any(r.levelname == "WARNING" and "engine.parallel = 4" in r.getMessage()
               for r in caplog.records)


@pytest.fixture
def governed(tmp_path):
    device = FakeDevice(total_bytes=1000 * MIB)
    appliance = Appliance(make_settings(tmp_path, memory={"sample_interval_s": 0.02}),
                          device=device)
    appliance.start()
    wait_for(lambda: appliance.ready, what="worker warm-up")
    yield appliance, device
    appliance.stop()


def test_watermarks_pause_and_resume_dispatch_without_flapping(governed, tmp_path):
    appliance, device = governed
    device.set_used(900 * MIB)  # 90 % > high watermark
    wait_for(lambda: appliance.memory.status()["state"] == "paused", what="pause")
    assert appliance.memory.status()["message"].startswith("paused:")
    assert "paused: GPU memory 90 %" in status_line(appliance)  # the UI says why
    doc = appliance.submit_path(write_png(tmp_path / "a.png", ["Paused page"]),
                                SubmitOptions(source="api"))
    time.sleep(1.5)
    assert queries.get_document(appliance.db, doc.id).status == "queued"
    device.set_used(800 * MIB)  # between the watermarks: still paused
    time.sleep(1.0)
    assert queries.get_document(appliance.db, doc.id).status == "queued"
    device.set_used(700 * MIB)  # below the low watermark: resume
    wait_for(lambda: queries.get_document(appliance.db, doc.id).status == "done",
             what="the page after resume")
    counts = appliance.memory.watermarks.counts
    assert counts["pause"] == 1 and counts["resume"] == 1


def test_critical_pressure_preempts_and_requeues_without_losing_the_page(governed, tmp_path):
    appliance, device = governed
    dense = [" ".join(["Critical memory pressure test line"] * 3)] * 40
    doc = appliance.submit_path(write_pdf(tmp_path / "dense.pdf", [dense], dpi=200),
                                SubmitOptions(source="api"))
    wait_for(lambda: queries.get_document(appliance.db, doc.id).pages[0].status == "running",
             what="page start")
    device.set_used(970 * MIB)  # above critical for 3 samples: preempt
    wait_for(lambda: queries.get_document(appliance.db, doc.id).pages[0].status == "queued",
             what="preemption")
    device.set_used(100 * MIB)
    wait_for(lambda: queries.get_document(appliance.db, doc.id).status == "done",
             timeout_s=180, what="completion after the pressure")
    page = queries.get_document(appliance.db, doc.id).pages[0]
    with appliance.db.read() as session:
        outcomes = session.exec(select(PageResult.outcome).where(PageResult.page_id == page.id)
                                .order_by(PageResult.id)).all()
    assert outcomes == ["preempted", "ok"] and page.attempts == 1


def test_the_watermarks_hold_this_hosts_pages_only(tmp_path, tiny_model):
    """Pages for a remote endpoint do not touch this host's card: they still go out
    while the local vision model's pages wait for memory."""
    from tests.openai_servers import ScriptedServer, endpoint

    model, mmproj = tiny_model
    device = FakeDevice(total_bytes=8000 * MIB)
    with ScriptedServer("ok") as server:
        settings = make_settings(
            tmp_path, memory={"sample_interval_s": 0.02},
            review={"enabled": False, "second_opinion": False},
            engine={"name": "auto", "model": str(model), "mmproj": str(mmproj), "threads": 1,
                    "auto_tiling": False, "retry_ladder": ["tiled"],
                    "remote": [endpoint(server.url, "scripted", "gpu2")]})
        appliance = Appliance(settings, device=device)
        appliance.start()
        try:
            wait_for(lambda: appliance.ready, what="worker warm-up")
            device.set_used(7200 * MIB)  # 90 % > high watermark
            wait_for(lambda: appliance.memory.status()["state"] == "paused", what="pause")
            png = write_png(tmp_path / "a.png", ["Paused page"])
            local, remote = (appliance.submit_path(png, SubmitOptions(source="api", engine=name))
                             for name in ("llama", "openai"))
            wait_for(lambda: queries.get_document(appliance.db, remote.id).status == "done",
                     what="the remote page")
            assert queries.get_document(appliance.db, local.id).status == "queued"
            device.set_used(100 * MIB)
            wait_for(lambda: queries.get_document(appliance.db, local.id).status == "done",
                     what="the local page after resume")
        finally:
            appliance.stop()
