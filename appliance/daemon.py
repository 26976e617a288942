"""Wires the parts together and owns their start and stop order.

``Appliance`` is the processing core (store, spool, intake, workers, dispatcher,
export) shared by the HTTP daemon (`appliance serve`) and the one-shot CLI
(`appliance ocr`), so both run pages through the same path.
"""

from __future__ import annotations

import fcntl
import logging
import os
from pathlib import Path
from typing import BinaryIO

from appliance.config import Settings
from appliance.dispatch import Dispatcher
from appliance.engines.host import WorkerHandle, WorkerSpec
from appliance.engines.llama.validate import inspect_model
from appliance.errors import AlreadyRunning, ConfigError, ModelError
from appliance.export import Exporter
from appliance.intake import Intake, SubmitOptions
from appliance.intake.spool import Spool
from appliance.store import Database, queries, transitions
from appliance.store.models import Document

log = logging.getLogger(__name__)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def resolve_engine(settings: Settings) -> tuple[WorkerSpec, str | None]:
    """Which engine the workers run, and a notice for the operator when `auto` had to
    fall back to the embedded classic engine."""
    engine = settings.engine
    classic = WorkerSpec("classic", {"threads": engine.threads}, settings.logging.level)
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
               "fixed_tokens": engine.fixed_tokens}
    return WorkerSpec("llama", options, settings.logging.level), None


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
    def __init__(self, settings: Settings):
        self.settings = settings
        data_dir = settings.paths.data_dir
        data_dir.mkdir(parents=True, exist_ok=True)
        self._lock = DataDirLock(data_dir)
        self.db = Database(data_dir / "appliance.db")
        self.spool = Spool(data_dir / "spool")
        self.intake = Intake(settings, self.db, self.spool)
        self.exporter = Exporter(self.db, settings.paths.output_dir)
        self.worker_spec, self.engine_notice = resolve_engine(settings)
        if self.engine_notice:
            log.warning("engine fallback: %s", self.engine_notice)
        self.workers = [WorkerHandle(slot, self.worker_spec)
                        for slot in range(settings.workers.count)]
        self.dispatcher = Dispatcher(settings, self.db, self.spool, self.workers, self.exporter)

    def start(self) -> None:
        self._lock.acquire()
        requeued = transitions.requeue_after_restart(self.db)
        if requeued:
            log.warning("requeued pages interrupted by the last shutdown count=%d", requeued)
        self.dispatcher.start()
        log.info("appliance started engine=%s workers=%d data_dir=%s output_dir=%s",
                 self.worker_spec.engine, len(self.workers), self.settings.paths.data_dir,
                 self.settings.paths.output_dir)

    def stop(self) -> None:
        self.dispatcher.stop()
        self.db.close()
        self._lock.release()
        log.info("appliance stopped")

    @property
    def ready(self) -> bool:
        return self.dispatcher.ready

    def submit(self, stream: BinaryIO, name: str | None, options: SubmitOptions) -> Document:
        doc = self.intake.submit(stream, name, options)
        self.dispatcher.wake()
        return doc

    def submit_path(self, path: Path, options: SubmitOptions) -> Document:
        with path.open("rb") as stream:
            return self.submit(stream, path.name, options)

    def worker_status(self) -> list[dict]:
        return [{"slot": w.slot, "state": w.state, "pid": w.process.pid if w.process else None,
                 "warmed_up": w.warmed_up_once, "restarts": w.restarts,
                 "engine": w.info.get("engine"), "model_id": w.info.get("model_id")}
                for w in self.workers]

    def status(self) -> dict:
        return {"ready": self.ready, "engine": self.worker_spec.engine,
                "engine_notice": self.engine_notice,
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
