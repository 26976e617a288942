"""Wires the parts together and owns their start and stop order.

``Appliance`` is the processing core (store, spool, intake, workers, dispatcher,
export) shared by the HTTP daemon (`appliance serve`, ``appliance.server``) and the
one-shot CLI (`appliance ocr`), so both run pages through the same path. ``drain``
and ``reload`` are what the daemon's SIGTERM and SIGHUP do.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from dataclasses import fields, replace
from pathlib import Path
from typing import BinaryIO

from apscheduler.schedulers.background import BackgroundScheduler

from appliance.config import Settings, load_settings
from appliance.dispatch import Dispatcher
from appliance.engine_choice import remote_specs, resolve_engine, result_cache_dir
from appliance.engines import registry
from appliance.engines.cache import ResultCache
from appliance.errors import (
    AlreadyRunning, ConfigError, EngineUnavailable, NoFields, NotFound, NotReady,
    OutputFailed, ShuttingDown, UnknownField,
)
from appliance.export import Exporter, document_json
from appliance.fields.document import correct_document_fields, refresh_after_review
from appliance.finishing import Finisher
from appliance.gguf.files import cached_sha256
from appliance.gguf.pair import inspect_model
from appliance.gpu import MemoryDevice, MemorySampler, Watermarks, open_device
from appliance.intake import Intake, SubmitOptions
from appliance.intake.disposition import dispose
from appliance.intake.folders import Disposal, WatchService
from appliance.intake.spool import Spool
from appliance.library import Library
from appliance.memory_plan import plan_for
from appliance.pipeline.host import WorkerHandle
from appliance.retention import purge
from appliance.review import ReviewService
from appliance.security import ApiKeys, loopback
from appliance.store import Database, contents, queries, transitions
from appliance.store.models import Document, FieldSet
from appliance.store.queries import DocumentView
from appliance.users import Users
from appliance.webhooks import WebhookNotifier, WebhookPolicy

log = logging.getLogger(__name__)

FINISH_PENDING_S = 30
# [review] keys read once at start-up: a reload cannot change them
REVIEW_RESTART_KEYS = ("second_opinion", "second_opinion_languages", "users_file")


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
        self.db = Database(settings.paths.database)
        self.spool = Spool(settings.paths.spool)
        self.intake = Intake(settings, self.db, self.spool)
        # this host's engine (None: only remote endpoints), and the endpoints' workers
        self.worker_spec, self.engine_notice = resolve_engine(settings)
        self.remote_specs = remote_specs(settings)
        self.engine = self.worker_spec and registry.entry(self.worker_spec.engine)
        if self.engine and self.engine.model_files:  # every result names its exact files
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
        count = self._plan_memory()
        self.workers = [*(WorkerHandle(slot, self.worker_spec) for slot in range(count)),
                        *(WorkerHandle(count + i, spec) for i, spec in enumerate(self.remote_specs))]
        self.dispatcher = Dispatcher(settings, self.db, self.spool, self.workers, self.finish,
                                     self.memory)
        # the dispatcher's settings are those a reload (SIGHUP) made: the watched folders
        self.exporter = Exporter(self.db, self.spool, lambda: self.dispatcher.settings)
        self.review = ReviewService(settings, self.db, self.spool, on_settled=self.finish,
                                    wake=self.dispatcher.wake)
        self.library = Library(settings, self.db, self.spool)
        self.users = Users(settings.review.users_file)
        self.api_keys = ApiKeys(settings.auth.api_keys_file)
        self.webhooks = WebhookNotifier(self.db, self._document_payload,
                                        WebhookPolicy(settings.webhooks.allow_hosts))
        self.watch = WatchService(settings, self.db, self.submit, self.finish, self.forget)
        self.finisher = Finisher(self.finish_steps)
        # a document's finishing steps, and its deletion: never two at once
        self._document_steps = threading.RLock()
        cache_dir = result_cache_dir(settings)
        self.cache = ResultCache(cache_dir) if cache_dir else None
        self.scheduler = BackgroundScheduler(daemon=True)
        self.draining = False
        self._watching = False
        self.scheduler.add_job(self.finish_pending, "interval", seconds=FINISH_PENDING_S,
                               id="finish-pending", max_instances=1, coalesce=True)
        self.scheduler.add_job(self.purge, "interval",
                               seconds=settings.retention.interval_hours * 3600,
                               id="retention", max_instances=1, coalesce=True)

    def _plan_memory(self) -> int:
        """How many workers to start: the configured count, or for an engine that holds
        a model on the card as many as fit, each reading as many pages at once as fit
        (engine.parallel, which then reaches the engine as a number). Refuses
        (ModelDoesNotFit) when not even one worker reading one page fits."""
        if self.engine is None:
            return 0
        if not self.engine.model_files:
            return self.settings.workers.count
        engine = self.settings.engine
        plan = plan_for(self.settings, inspect_model(engine.model, engine.mmproj),
                        self.device.sample(), parallel_slots=self.engine.parallel_slots)
        log.info("memory plan device=%s workers=%d slots=%d kv_slot_bytes=%d total_bytes=%d "
                 "%s", self.device.name, plan.workers, plan.slots, plan.estimate.kv_slot_bytes,
                 plan.total_bytes, plan.message)
        if plan.short:
            log.warning("fewer workers or slots than configured: %s", plan.message)
        plan.require()
        if self.engine.parallel_slots:
            self.worker_spec = replace(self.worker_spec, options={**self.worker_spec.options,
                                                                   "parallel": plan.slots})
        return plan.workers

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
        if held := contents.clear_holds(self.db):
            log.info("released content holds of submissions the last run left count=%d", held)
        self.webhooks.start()
        self.finisher.start()
        self.memory.start()
        self.dispatcher.start()
        self.finish_pending()  # whatever the last run left unfinished
        self.scheduler.start()
        self.watch.start()
        self._watching = True
        log.info("appliance started engine=%s workers=%d data_dir=%s output_dir=%s",
                 self.engine_label, len(self.workers), self.settings.paths.data_dir,
                 self.settings.paths.output_dir)
        for warning in self.access_warnings():
            log.warning("%s", warning)

    def stop(self) -> None:
        self._stop_watching()
        self.scheduler.shutdown(wait=False)
        self.dispatcher.stop()
        self.finisher.stop()
        self.memory.stop()
        self.webhooks.stop()
        self.db.close()
        self._lock.release()
        log.info("appliance stopped")

    def purge(self) -> dict:
        return purge(self.settings, self.db, self.spool)

    def auth_on(self) -> bool:
        """Auth is on once there is an API key or a reviewer account, and on an address
        other hosts can reach always, unless auth.open says otherwise."""
        return self._credentials() or not self._may_be_open()

    def _credentials(self) -> bool:
        return bool(self.api_keys) or bool(self.users.names())

    def _may_be_open(self) -> bool:
        return self.settings.auth.open or loopback(self.settings.server.host)

    def check_exposure(self) -> None:
        """Before serving: a daemon other hosts can reach, that nobody could sign in to
        or call (no account, no key), is a mistake unless auth.open says so."""
        if self._may_be_open() or self._credentials():
            return
        host = self.settings.server.host
        raise ConfigError(f"server.host = {host!r} can be reached from other hosts, but "
                          f"{self.users.path} holds no account and {self.api_keys.path} no "
                          f"API key, so nobody could sign in or call the API. Add an account "
                          f"with `appliance users add NAME` or a key with `appliance keys "
                          f"add NAME`, or set auth.open = true to serve without "
                          f"authentication (or bind server.host = \"127.0.0.1\")")

    def review_unstaffed(self) -> bool:
        """Review is on but no account can log in to review: a page routed there can
        never finish."""
        return self.settings.review.enabled and not self.users.names()

    def access_warnings(self) -> list[str]:
        """What an operator must fix for people to get in and pages to finish."""
        warnings = []
        if self.settings.auth.open and not self._credentials():
            warnings.append(f"auth.open = true and there is no account and no API key: "
                            f"anyone who can reach {self.settings.server.host}:"
                            f"{self.settings.server.port} can read and submit documents "
                            f"without authentication")
        if self.review_unstaffed():
            warnings.append(f"review is on but {self.users.path} holds no account: pages "
                            f"routed to review cannot finish; add a reviewer with "
                            f"`appliance users add NAME`, or set review.enabled = false")
        if self.api_keys and not self.users.names():
            warnings.append(f"auth is on (API keys exist) but {self.users.path} holds no "
                            f"account: nobody can log in to the web UI; add one with "
                            f"`appliance users add NAME`")
        return warnings

    def _stop_watching(self) -> None:
        if self._watching:
            self._watching = False
            self.watch.stop()

    def drain(self, timeout_s: float) -> int:
        """Close intake, let the pages being read finish for up to ``timeout_s``, queue
        the rest again (attempt not counted). Answers how many went back."""
        self.draining = True
        log.info("draining in_flight=%d timeout_s=%g", self.dispatcher.in_flight, timeout_s)
        self._stop_watching()
        released = self.dispatcher.drain(timeout_s)
        log.info("drained requeued=%d queue_depth=%s", released, queries.queue_depth(self.db))
        return released

    def reload(self) -> None:
        """Apply the config file's ``[[watch]]`` and ``[review]`` again (SIGHUP). A file
        that does not load raises ConfigError and changes nothing; changes to other
        sections are logged as waiting for a restart."""
        if self.draining:
            log.info("reload ignored: the appliance is stopping")
            return
        new = load_settings(self.settings.source)
        old = self.settings
        later = [f.name for f in fields(Settings) if f.name not in ("watch", "review", "source")
                 and getattr(old, f.name) != getattr(new, f.name)]
        later += [f"review.{key}" for key in REVIEW_RESTART_KEYS
                  if getattr(old.review, key) != getattr(new.review, key)]
        self.watch.reload(new.watch)  # the only step that can refuse: first
        review = replace(new.review, **{key: getattr(old.review, key)
                                        for key in REVIEW_RESTART_KEYS})
        # new settings, with what waits for a restart as it was, handed to the parts
        # that read what a reload changes; the old object is left as it was
        self.settings = replace(old, watch=new.watch, review=review)
        self.dispatcher.reload(self.settings)
        self.review.settings = self.settings
        log.info("config reloaded file=%s watch=%s review_enabled=%s review_below=%g "
                 "accept_from=%g sample_rate=%g", old.source,
                 ",".join(f.name for f in new.watch) or "-", review.enabled,
                 review.review_below, review.accept_from, review.sample_rate)
        if later:
            log.warning("config changes that take effect at the next restart: %s",
                        ", ".join(later))

    @property
    def ready(self) -> bool:
        return not self.draining and self.dispatcher.ready

    @property
    def engine_label(self) -> str:
        """The engines the workers run, e.g. "llama+openai"."""
        return "+".join(dict.fromkeys(w.spec.engine for w in self.workers))

    def readings(self) -> tuple[str, ...]:
        """The engines a request may ask for: those the workers run, and the one a vision
        worker keeps for fallbacks (a classic reader)."""
        return tuple(dict.fromkeys(name for w in self.workers
                                   for name in registry.readings(w.spec.engine)))

    def check_engine(self, requested: str | None) -> None:
        if requested is not None and requested not in self.readings():
            raise EngineUnavailable(f"engine '{requested}' is not available: the workers run "
                                    f"'{self.engine_label}'")

    def submit(self, stream: BinaryIO, name: str | None, options: SubmitOptions) -> Document:
        if self.draining:
            raise ShuttingDown("the appliance is shutting down and takes no new documents; "
                               "submit again once it is back (queued work is kept)")
        doc = self.intake.submit(stream, name, options)
        if doc.error_code:  # refused at intake: final at once, so its remaining steps run now
            self.finish(doc.id)
        else:
            self.dispatcher.wake()
        return doc

    def finish(self, document_id: str, source_confirmed: bool = False) -> None:
        """Have a final document's remaining steps run (``Finisher``, ``finish_steps``)."""
        self.finisher.offer(document_id, source_confirmed)

    def finish_steps(self, document_id: str, source_confirmed: bool) -> None:
        """A final document's remaining steps, each done once per final state: export its
        results, dispose of its watched original, call its webhook. Runs on the
        finisher's thread alone. A watched document whose file may still be being
        written waits (``WatchService.disposal``), and ``source_confirmed`` says the
        watcher saw the file unchanged for one more window."""
        with self._document_steps:
            self._finish_steps(document_id, source_confirmed)

    def _finish_steps(self, document_id: str, source_confirmed: bool) -> None:
        view = queries.get_document(self.db, document_id)
        if view is None or not view.is_final:
            return
        doc = view.doc
        folder = (self.watch.folders.get(doc.watch_folder)
                  if doc.source_path and not doc.disposed_at else None)
        disposal = folder and self.watch.disposal(view, source_confirmed)
        if disposal in (Disposal.WAIT, Disposal.FORGOTTEN):
            return
        if not doc.exported_at and not doc.error_code and not doc.output_error:
            if specs := self.dispatcher.field_specs.get(doc.doc_type):
                refresh_after_review(self.db, document_id, doc.doc_type, specs)
            try:
                self.exporter.export(document_id)
            except OutputFailed as exc:  # written never: final without its files
                log.error("export failed doc=%s code=%s reason=%s", document_id, exc.code,
                          exc.message)
                transitions.mark_output_failed(self.db, document_id, exc.message)
        if disposal is Disposal.NOW:
            dispose(self.db, queries.get_document(self.db, document_id), folder)
        if doc.webhook_url and not doc.webhook_done_at:
            self.webhooks.notify(document_id, doc.webhook_url)

    def finish_pending(self) -> None:
        """Offer again the steps that failed or were cut short (disk full, a crash, a
        restart)."""
        pending = set(queries.final_unexported_documents(self.db))
        pending.update(d.id for d in queries.final_undisposed_documents(self.db))
        pending.update(queries.final_unnotified_documents(self.db))
        for document_id in pending:
            self.finish(document_id)

    def correct_fields(self, document_id: str, corrections: dict[str, str],
                       actor: str) -> FieldSet:
        """A person's values for a document's key fields, checked again and audited; a
        document already exported is exported again with them. Never beside its
        finishing steps or its deletion: a delete waits, and finds no output written
        after it."""
        with self._document_steps:
            view = queries.get_document(self.db, document_id)
            if view is None:
                raise NotFound(f"no document with id {document_id}")
            specs = self.dispatcher.field_specs.get(view.doc.doc_type)
            if specs is None:
                raise NoFields(f"documents of type {view.doc.doc_type} have no key fields; "
                               f"configure [[fields.{view.doc.doc_type}]] for them")
            if queries.latest_fields(self.db, document_id) is None:
                raise NotReady(f"the fields of document {document_id} are read with its last "
                               f"page; correct them once it has been read")
            try:
                fields = correct_document_fields(self.db, document_id, view.doc.doc_type,
                                                 specs, corrections, actor)
            except ValueError as exc:  # a name the type does not have
                raise UnknownField(str(exc)) from None
            if view.doc.exported_at:
                self.exporter.export(document_id)
            return fields

    def _document_payload(self, document_id: str) -> dict:
        fields = queries.latest_fields(self.db, document_id)
        return document_json(queries.get_document(self.db, document_id)) | {
            "fields": fields.fields if fields else None}

    def cancel(self, document_id: str, actor: str = "api") -> DocumentView:
        if queries.get_document(self.db, document_id) is None:
            raise NotFound(f"no document with id {document_id}")
        transitions.cancel_document(self.db, document_id, actor)
        self.finish(document_id)
        return queries.get_document(self.db, document_id)

    def retry(self, document_id: str, actor: str) -> int:
        """Read the document's failed pages again; how many were queued."""
        self.library.document(document_id)
        retried = transitions.retry_failed_pages(self.db, document_id, actor)
        log.info("retry doc=%s pages=%d actor=%s", document_id, retried, actor)
        self.dispatcher.wake()
        return retried

    def send_to_review(self, document_id: str, actor: str) -> int:
        """Put the document's finished pages before a reviewer; how many went."""
        self.library.document(document_id)
        sent = transitions.send_to_review(self.db, document_id, actor)
        log.info("sent to review doc=%s pages=%d actor=%s", document_id, sent, actor)
        return sent

    def delete(self, document_id: str, actor: str) -> None:
        """Delete the document and what the appliance keeps of it: its records, its
        exported results, and its original, page images and cached readings unless
        another document holds the same content. Refused while a page of it is being
        read. A watched file still in its folder is not read again (``WatchService``)."""
        with self._document_steps:  # not while its results are being written
            removed = contents.delete_document(self.db, document_id, actor, self._discard)
            self.watch.deleted(removed.doc)
            outputs = self.exporter.remove(removed.doc)
        log.info("deleted doc=%s outputs=%d content_kept=%s actor=%s", document_id, outputs,
                 removed.content_held, actor)

    def forget(self, document_id: str, reason: str) -> None:
        """Remove a document as if it had never been submitted (``WatchService``)."""
        with self._document_steps:
            contents.forget_document(self.db, document_id, reason, self._discard)

    def _discard(self, removed: contents.Removed) -> None:
        """The spool copy and cached readings of a removed document's content, unless
        something else holds it; run inside the transaction that removes it."""
        if removed.content_held:
            return
        self.spool.delete_content(removed.doc.sha256)
        if self.cache is not None:
            self.cache.remove(removed.cache_keys)

    def submit_path(self, path: Path, options: SubmitOptions) -> Document:
        with path.open("rb") as stream:
            return self.submit(stream, path.name, options)

    def worker_status(self) -> list[dict]:
        return [{"slot": w.slot, "state": w.state, "pid": w.process.pid if w.process else None,
                 "warmed_up": w.warmed_up_once, "restarts": w.restarts, "recycled": w.recycled,
                 "pages_done": w.pages_done, "slots": w.slots, "in_flight": len(w.jobs),
                 "engine": w.info.engine if w.info else None,
                 "endpoint": w.spec.options.get("endpoint", {}).get("name"), "out": w.out,
                 "model_id": w.info.model_id if w.info else None}
                for w in self.workers]

    def status(self) -> dict:
        return {"ready": self.ready, "draining": self.draining,
                "engine": self.engine_label,
                "engine_notice": str(self.engine_notice) if self.engine_notice else None,
                "memory": self.memory.status(),
                "queue_depth": queries.queue_depth(self.db), "workers": self.worker_status(),
                "last_worker_error": self.dispatcher.last_start_error}
