"""Wires the parts together and owns their start and stop order.

``Appliance`` is the processing core (store, spool, intake, workers, dispatcher,
export) shared by the HTTP daemon (`appliance serve`) and the one-shot CLI
(`appliance ocr`), so both run pages through the same path.
"""

from __future__ import annotations

import fcntl
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

from apscheduler.schedulers.background import BackgroundScheduler

from appliance.config import Settings
from appliance.dispatch import Dispatcher
from appliance.engines.host import WorkerHandle, WorkerSpec
from appliance.engines.llama.validate import cached_sha256, inspect_model
from appliance.errors import (
    AlreadyRunning, ConfigError, EngineUnavailable, ModelError, NotFound,
)
from appliance.export import Exporter, document_json
from appliance.gpu import (
    MemoryDevice, MemorySampler, Watermarks, estimate_worker_bytes, open_device, plan_workers,
)
from appliance.intake import Intake, SubmitOptions
from appliance.intake.disposition import dispose
from appliance.intake.folders import WatchService
from appliance.intake.spool import Spool
from appliance.store import Database, queries, transitions
from appliance.store.models import Document
from appliance.store.queries import DocumentView
from appliance.webhooks import WebhookNotifier

log = logging.getLogger(__name__)

FINISH_PENDING_S = 30


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def resolve_engine(settings: Settings) -> tuple[WorkerSpec, str | None]:
    """Which engine the workers run, and a notice for the operator when `auto` had to
    fall back to the embedded classic engine."""
    engine = settings.engine
    common = {"log_level": settings.logging.level, "preprocess": settings.preprocess,
              "cache_dir": settings.paths.data_dir / "cache" if engine.result_cache else None}
    classic = WorkerSpec("classic", {"threads": engine.threads}, **common)
    if engine.name == "classic":
        return classic, None
    if not (engine.model and engine.mmproj):
        if engine.name == "llama":
            raise ConfigError("engine.name = 'llama' needs engine.model and engine.mmproj; "
                              "see models/README.md")
        return classic, ("No vision model is configured, so the embedded classic engine "
                         "(RapidOCR) is reading pages. To add one, put a Gemma GGUF and its "
                         "mmproj in models/ and set engine.model and engine.mmproj "
                         "(see models/README.md).")
    try:
        inspect_model(engine.model, engine.mmproj)
    except ModelError as exc:
        if engine.name == "llama":
            raise
        return classic, (f"The configured vision model failed its checks ({exc.message}), so "
                         f"the embedded classic engine is reading pages. Run "
                         f"`appliance doctor` for details.")
    options = {"model": str(engine.model), "mmproj": str(engine.mmproj), "n_ctx": engine.n_ctx,
               "n_batch": engine.n_batch, "n_gpu_layers": engine.n_gpu_layers,
               "flash_attn": engine.flash_attn, "threads": engine.threads,
               "retry_ladder": engine.retry_ladder, "max_tokens": engine.max_tokens,
               "fixed_tokens": engine.fixed_tokens, "auto_tiling": engine.auto_tiling}
    return WorkerSpec("llama", options, **common), None


class DataDirLock:
    """One daemon per data directory: two would hand out the same pages."""

    def __init__(self, data_dir: Path):
        self.path = data_dir / "appliance.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            raise AlreadyRunning(f"another appliance is already using {self.path.parent}; "
                                 f"stop it first or configure another paths.data_dir") from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Appliance:
    def __init__(self, settings: Settings, device: MemoryDevice | None = None):
        self.settings = settings
        data_dir = settings.paths.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = DataDirLock(data_dir)
        self.db = Database(data_dir / "appliance.db")
        self.spool = Spool(data_dir / "spool")
        self.intake = Intake(settings, self.db, self.spool)
        self.exporter = Exporter(self.db, settings.paths.output_dir)
        self.worker_spec, self.engine_notice = resolve_engine(settings)
        if self.worker_spec.engine == "llama":  # every result names the exact files that read it
            digests = {f"{key}_sha256": cached_sha256(self.worker_spec.options[key],
                                                      data_dir / "model-digests.json")
                       for key in ("model", "mmproj")}
            self.worker_spec = replace(self.worker_spec,
                                       options={**self.worker_spec.options, **digests})
        if self.engine_notice:
            log.warning("engine fallback: %s", self.engine_notice)
        memory = settings.memory
        self.device = device or open_device(memory.device_index)
        self.memory = MemorySampler(
            self.device, Watermarks(memory.vram_high_watermark, memory.vram_low_watermark,
                                    memory.vram_critical, memory.critical_samples),
            interval_s=memory.sample_interval_s, on_transition=self._on_memory_transition)
        self.workers = [WorkerHandle(slot, self.worker_spec)
                        for slot in range(self._worker_count())]
        self.dispatcher = Dispatcher(settings, self.db, self.spool, self.workers, self.finish,
                                     self.memory)
        self.webhooks = WebhookNotifier(self.db, self._document_payload)
        self.watch = WatchService(settings, self.db, self.submit, self.finish)
        self.scheduler = BackgroundScheduler(daemon=True)
        self.scheduler.add_job(self.finish_pending, "interval", seconds=FINISH_PENDING_S,
                               id="finish-pending", max_instances=1, coalesce=True)

    def _worker_count(self) -> int:
        """The configured count, or fewer if the vision model does not fit that often;
        refuses (ModelDoesNotFit) when it does not fit once."""
        configured = self.settings.workers.count
        if self.worker_spec.engine != "llama":
            return configured
        engine = self.settings.engine
        estimate = estimate_worker_bytes(inspect_model(engine.model, engine.mmproj),
                                         n_ctx=engine.n_ctx, n_gpu_layers=engine.n_gpu_layers)
        plan = plan_workers(estimate, self.device.sample(), configured=configured,
                            load_limit=self.settings.memory.vram_load_limit)
        log.info("memory plan device=%s %s workers=%d", self.device.name, estimate.describe(),
                 plan.count)
        if not plan.refused and plan.count < configured:
            log.warning("fewer workers than configured: %s", plan.message)
        return plan.require()

    def _on_memory_transition(self, transition) -> None:
        if transition.kind == "preempt":  # the sampler has logged and counted it
            self.dispatcher.request_preemption()
        elif transition.kind == "resume":
            self.dispatcher.wake()

    def start(self) -> None:
        self._lock.acquire()
        requeued = transitions.requeue_after_restart(self.db)
        if requeued:
            log.warning("requeued pages interrupted by the last shutdown count=%d", requeued)
        self.webhooks.start()
        self.memory.start()
        self.dispatcher.start()
        self.finish_pending()  # whatever the last run left unfinished
        self.scheduler.start()
        self.watch.start()
        log.info("appliance started engine=%s workers=%d data_dir=%s output_dir=%s",
                 self.worker_spec.engine, len(self.workers), self.settings.paths.data_dir,
                 self.settings.paths.output_dir)

    def stop(self) -> None:
        self.watch.stop()
        self.scheduler.shutdown(wait=False)
        self.dispatcher.stop()
        self.memory.stop()
        self.webhooks.stop()
        self.db.close()
        self._lock.release()
        log.info("appliance stopped")

    @property
    def ready(self) -> bool:
        return self.dispatcher.ready

    def check_engine(self, requested: str | None) -> None:
        """A request may ask for the engine the workers run, or for classic: a vision
        worker keeps a classic reader for fallbacks."""
        if requested not in (None, self.worker_spec.engine, "classic"):
            raise EngineUnavailable(f"engine '{requested}' is not available: the workers run "
                                    f"'{self.worker_spec.engine}'")

    def submit(self, stream: BinaryIO, name: str | None, options: SubmitOptions) -> Document:
        doc = self.intake.submit(stream, name, options)
        self.dispatcher.wake()
        return doc

    def finish(self, document_id: str) -> None:
        """A final document's remaining steps, each done once: export its results,
        dispose of its watched original, call its webhook."""
        view = queries.get_document(self.db, document_id)
        if view is None or not view.is_final:
            return
        doc = view.doc
        if not doc.exported_at and not doc.error_code:
            self.exporter.export(document_id)
        if doc.source_path and not doc.disposed_at and doc.watch_folder in self.watch.folders:
            dispose(self.db, view, self.watch.folders[doc.watch_folder])
        if doc.webhook_url and not doc.webhook_done_at:
            self.webhooks.notify(document_id, doc.webhook_url)

    def finish_pending(self) -> None:
        """Retry the steps that failed or were cut short (disk full, a crash, a restart)."""
        pending = set(queries.final_unexported_documents(self.db))
        pending.update(d.id for d in queries.final_undisposed_documents(self.db))
        pending.update(queries.final_unnotified_documents(self.db))
        for document_id in pending:
            try:
                self.finish(document_id)
            except Exception:
                log.exception("finishing failed doc=%s", document_id)

    def _document_payload(self, document_id: str) -> dict:
        return document_json(queries.get_document(self.db, document_id))

    def cancel(self, document_id: str) -> DocumentView:
        if queries.get_document(self.db, document_id) is None:
            raise NotFound(f"no document with id {document_id}")
        transitions.cancel_document(self.db, document_id)
        self.finish(document_id)
        return queries.get_document(self.db, document_id)

    def submit_path(self, path: Path, options: SubmitOptions) -> Document:
        with path.open("rb") as stream:
            return self.submit(stream, path.name, options)

    def worker_status(self) -> list[dict]:
        return [{"slot": w.slot, "state": w.state, "pid": w.process.pid if w.process else None,
                 "warmed_up": w.warmed_up_once, "restarts": w.restarts, "recycled": w.recycled,
                 "pages_done": w.pages_done,
                 "engine": w.info.get("engine"), "model_id": w.info.get("model_id")}
                for w in self.workers]

    def status(self) -> dict:
        return {"ready": self.ready, "engine": self.worker_spec.engine,
                "engine_notice": self.engine_notice, "memory": self.memory.status(),
                "queue_depth": queries.queue_depth(self.db), "workers": self.worker_status(),
                "last_worker_error": self.dispatcher.last_start_error}


def serve(settings: Settings) -> None:
    """Run the HTTP daemon (REST API + web UI) until SIGTERM or SIGINT."""
    import uvicorn

    from appliance.api import create_app
    from ui.app import mount_ui

    appliance = Appliance(settings)
    app = create_app(appliance)
    mount_ui(app, appliance)
    server = uvicorn.Server(uvicorn.Config(app, host=settings.server.host,
                                           port=settings.server.port,
                                           log_level=settings.logging.level.lower()))
    appliance.start()
    try:
        log.info("serving url=http://%s:%d", settings.server.host, settings.server.port)
        server.run()
    finally:
        appliance.stop()
