"""The dispatcher: one thread that claims queued pages, hands them to workers with a
free slot, records what comes back, and supervises the worker processes.

It is also the supervisor: a worker that dies is restarted (its page is retried or
failed), a page past its deadline gets its worker killed, a worker that cannot start
is retried with a growing backoff. It sleeps on the workers' pipes and process
sentinels, so a result or a death wakes it at once.

A worker may read several pages at once (its engine's slots). When it dies with
more than one in flight, nobody knows which page killed it: none is charged, each
becomes a crash suspect and is read alone, where a crash is charged as usual.

Its loop is what proves the daemon alive to systemd: every turn sends the watchdog
ping when one is due (``systemd.Watchdog``), so a hung dispatcher gets restarted.
``drain`` (SIGTERM) stops it claiming pages, lets those in flight finish for a
while, and hands the rest back to the queue without charging them an attempt.
"""

from __future__ import annotations

import itertools
import logging
import socket
import threading
import time
from dataclasses import asdict
from multiprocessing.connection import wait
from typing import Callable

from appliance import systemd
from appliance.config import Settings
from appliance.engines import registry
from appliance.engines.messages import Availability, Job, PageDone, PageFailed, Ready, StartFailed
from appliance.errors import (
    CrashSuspect, DegenerateOutput, EndpointUnavailable, EngineUnavailable, MemoryCritical,
    PagePreempted, PageTimeout, StoppedAtShutdown, WarmupTimeout, WorkerCrashed,
)
from appliance.fields.document import read_document_fields
from appliance.fields.schema import schemas
from appliance.gpu import MemorySampler
from appliance.intake.spool import Spool
from appliance.metrics import EndpointAnswers
from appliance.pipeline.host import WorkerHandle, WorkerState, how_it_ended
from appliance.quality.blocks import page_tail
from appliance.quality.routing import Route, route_page, routing_rules
from appliance.raster import render_dpi
from appliance.reading.doubt import LAYOUT_DOUBT
from appliance.store import Database, queries, transitions
from appliance.store.models import FieldSet, Outcome, PageResult

log = logging.getLogger(__name__)

TICK_S = 0.25
CLAIM_POLL_S = 2.0
# The engine stops itself at the page deadline; the supervisor kills the worker only
# if it has not answered a grace period later (mtmd's image encoding cannot be
# interrupted): a quarter of the deadline, at most this.
MAX_KILL_GRACE_S = 10.0
LEASE_MARGIN_S = 60.0  # a lease outlives the kill deadline: the supervisor acts first
HOUSEKEEPING_S = 30.0
RETRY_BASE_S = 1.0
MAX_RESTART_BACKOFF_S = 60.0
DRAIN_MARGIN_S = 15.0  # how much longer than its timeout a drain may take before we give up
OUTCOME_BY_CODE = {DegenerateOutput.code: Outcome.DEGENERATE, PageTimeout.code: Outcome.TIMEOUT}


class Dispatcher:
    def __init__(self, settings: Settings, db: Database, spool: Spool,
                 workers: list[WorkerHandle], on_final: Callable[[str], None],
                 memory: MemorySampler | None = None):
        self.settings = settings
        self.db = db
        self.spool = spool
        self.workers = workers
        self.on_final = on_final  # a document's last page has settled: Appliance.finish
        self.memory = memory  # its watermarks gate dispatch; it asks for preemptions
        self._preempt_requested = threading.Event()
        queue = settings.queue
        self.priority = transitions.Priority(queue.batch_delay_s, queue.per_page_delay_s,
                                             queue.max_size_delay_s, queue.born_digital_advance_s)
        # Vision workers read a page with the end of the previous one (multi-page context),
        # so a document's pages go to them in order.
        self.page_context = settings.engine.page_context and any(
            registry.entry(w.spec.engine).page_context for w in workers)
        # the pages each kind of worker may claim: with one kind, any page
        kinds = {w.spec.engine for w in workers}
        self.readings = {kind: registry.readings(kind) if len(kinds) > 1 else None
                         for kind in kinds}
        self.reload(settings)
        self.field_specs = schemas(settings.fields)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dispatcher", daemon=True)
        self._job_ids = itertools.count(1)
        self._restart_at: dict[int, float] = {}
        self._start_failures: dict[int, int] = {}
        self._next_housekeeping = 0.0
        self._touched: set[str] = set()  # documents with a page settled since the last finish
        self._wakeup, self._wakeup_writer = socket.socketpair()
        self._wakeup.setblocking(False)
        self._wakeup_writer.setblocking(False)
        self._may_have_work = True
        self._next_claim_poll = 0.0
        self.last_start_error: dict | None = None
        self.watchdog = systemd.Watchdog.from_env()
        self._draining = threading.Event()
        self._drained = threading.Event()
        self._drain_deadline = 0.0
        self._released = 0
        self.endpoint_answers = EndpointAnswers()  # what each remote endpoint answered

    # --- lifecycle ---

    def reload(self, settings: Settings) -> None:
        """Take what a reload may change ([[watch]], [review]) from new settings."""
        self.settings = settings
        self.routing_rules = routing_rules(settings.review)

    def start(self) -> None:
        for worker in self.workers:
            worker.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake()
        self._thread.join(timeout=10)
        for worker in self.workers:
            worker.stop()
        self._wakeup.close()
        self._wakeup_writer.close()

    @property
    def ready(self) -> bool:
        """Every worker warmed up once, and one can take a page now."""
        return (all(w.warmed_up_once for w in self.workers)
                and any(w.state in (WorkerState.IDLE, WorkerState.BUSY) for w in self.workers))

    @property
    def in_flight(self) -> int:
        """Pages being read, by all workers."""
        return sum(len(w.jobs) for w in self.workers)

    def drain(self, timeout_s: float) -> int:
        """Claim no more pages; let the pages being read finish for up to ``timeout_s``,
        then stop their workers and queue those pages again, their attempt not counted.
        Blocks until done; answers how many pages went back. Called from another
        thread: the loop does the work, so the workers keep one owner."""
        if not self._thread.is_alive():
            return 0
        self._drain_deadline = time.monotonic() + timeout_s
        self._draining.set()
        self.wake()
        if not self._drained.wait(timeout_s + DRAIN_MARGIN_S):
            log.error("dispatcher did not drain in time; pages in flight are queued again "
                      "at the next start")
        return self._released

    # --- the loop ---

    def _run(self) -> None:
        while not self._stop.is_set():
            self.watchdog.ping()
            try:
                for worker in self.workers:
                    self._supervise(worker)
                if self._preempt_requested.is_set():
                    self._preempt_newest()
                self._dispatch()  # workers get their next page before results are exported
                self._finish_documents()
                self._housekeeping()
                if self._draining.is_set():
                    self._drain_step()
            except Exception:  # the loop must survive anything one page or file does
                log.exception("dispatcher loop error")
                time.sleep(1)
            waitables = [w for worker in self.workers for w in worker.waitables()]
            if self._wakeup in wait([self._wakeup, *waitables], timeout=TICK_S):
                self._drain_wakeups()

    def _supervise(self, worker: WorkerHandle) -> None:
        now = time.monotonic()
        if worker.state == WorkerState.DEAD:
            if now >= self._restart_at.get(worker.slot, 0.0) and not self._draining.is_set():
                worker.start()
            return
        message = worker.receive()
        if message is not None:
            self._on_message(worker, message)
        elif not worker.is_alive():
            self._on_death(worker)
        elif any(now > job.deadline for job in worker.jobs.values()):
            self._on_overdue(worker, now)
        elif (worker.state == WorkerState.STARTING
              and now - worker.started_at > self.settings.workers.warmup_timeout_s):
            worker.kill()
            self._start_failed(worker, StartFailed(
                WarmupTimeout.code, "the engine did not finish its warm-up in time"))

    def _on_message(self, worker: WorkerHandle, message) -> None:
        if isinstance(message, (PageDone, PageFailed)):
            self._on_answer(worker, message)
        elif isinstance(message, Ready):
            worker.on_ready(message)
            self._may_have_work = True
            if self.memory is not None:  # host memory reports these workers' RSS
                self.memory.device.watch_pids(w.process.pid for w in self.workers
                                              if w.is_alive())
            self._start_failures.pop(worker.slot, None)
            self.last_start_error = None
            log.info("worker ready slot=%d pid=%d engine=%s model=%s warmup_ms=%.0f slots=%d",
                     worker.slot, message.pid, message.engine, message.model_id,
                     message.warmup_ms, message.slots)
        elif isinstance(message, StartFailed):
            worker.kill()
            self._start_failed(worker, message)
        elif isinstance(message, Availability):
            worker.out = None if message.available else message.reason
            if message.available:
                log.info("endpoint back in service worker=%s", worker.worker_id)
                self._may_have_work = True
            else:
                log.warning("endpoint out of service worker=%s reason=%s", worker.worker_id,
                            message.reason)

    def _on_death(self, worker: WorkerHandle) -> None:
        exitcode = worker.process.exitcode
        ended = how_it_ended(exitcode)
        was = worker.state
        jobs = worker.take_jobs()
        worker.kill()  # reaps it
        if len(jobs) == 1:
            claim = jobs[0].claim
            log.error("worker died mid-page slot=%d exitcode=%s doc=%s page=%d", worker.slot,
                      exitcode, claim.document_id, claim.page_index)
            self._record_failure(claim, Outcome.CRASHED, WorkerCrashed.code,
                                 f"the engine process died on this page ({ended})",
                                 retryable=True)
        elif jobs:  # which page killed it is unknown: charge none, read each alone
            log.error("worker died with pages in flight slot=%d exitcode=%s pages=%d; each is "
                      "read again alone", worker.slot, exitcode, len(jobs))
            for job in jobs:
                transitions.release_claim(
                    self.db, job.claim, CrashSuspect(
                        f"the engine process died ({ended}) while it read this "
                        f"page with others; read again alone"), suspect=True)
        elif was == WorkerState.STARTING:
            self._start_failed(worker, StartFailed(
                EngineUnavailable.code,
                f"the engine process died while starting ({ended})"))
        else:
            log.error("idle worker died slot=%d exitcode=%s", worker.slot, exitcode)

    def _on_overdue(self, worker: WorkerHandle, now: float) -> None:
        """A page past its kill deadline: the worker is killed, so every page it holds
        stops. The overdue ones are charged a timeout; the others are queued again."""
        timeout_s = self.settings.workers.page_timeout_s
        jobs = worker.take_jobs()
        worker.kill()
        for job in jobs:
            claim = job.claim
            if now > job.deadline:
                log.warning("page over deadline doc=%s page=%d worker=%s timeout_s=%.0f",
                            claim.document_id, claim.page_index, worker.worker_id, timeout_s)
                self._record_failure(claim, Outcome.TIMEOUT, PageTimeout.code,
                                     f"the page took longer than {timeout_s:.0f} s; raise "
                                     f"workers.page_timeout_s or check the page",
                                     retryable=True)
            else:
                transitions.release_claim(self.db, claim, PagePreempted(
                    "stopped with its worker, which another page held past its deadline"))

    def _start_failed(self, worker: WorkerHandle, error: StartFailed) -> None:
        failures = self._start_failures.get(worker.slot, 0) + 1
        self._start_failures[worker.slot] = failures
        backoff = min(MAX_RESTART_BACKOFF_S, 2.0 ** failures)
        self._restart_at[worker.slot] = time.monotonic() + backoff
        self.last_start_error = asdict(error)
        log.error("worker could not start slot=%d code=%s retry_in_s=%.0f message=%s",
                  worker.slot, error.code, backoff, error.message)

    # --- pages ---

    def wake(self) -> None:
        """New pages were queued: look for work now instead of at the next claim poll."""
        try:
            self._wakeup_writer.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # a wake-up is already pending, or we are shutting down

    def _drain_wakeups(self) -> None:
        self._may_have_work = True
        try:
            while self._wakeup.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def request_preemption(self) -> None:
        """Memory is critical: stop the newest page in flight on this host (called from
        the sampler)."""
        self._preempt_requested.set()
        self.wake()

    def _preempt_newest(self) -> None:
        """A worker reading several pages is asked to give the newest back (its engine
        stops that sequence and the worker answers "preempted"); one reading a single
        page at a time cannot stop mid-page and is killed. While a page taken back has
        not answered, a repeated request waits for it rather than take another."""
        self._preempt_requested.clear()
        if any(job.cancelled for w in self.workers for job in w.jobs.values()):
            return  # a page taken back has not answered yet: wait for what that frees
        held = [(job.started, job_id, w) for w in self.workers if self._local(w)
                for job_id, job in w.jobs.items()]
        if not held:
            return
        _, job_id, worker = max(held, key=lambda newest: newest[0])
        job = worker.jobs[job_id]
        claim = job.claim
        log.warning("preempting the newest page doc=%s page=%d worker=%s reason=memory_critical",
                    claim.document_id, claim.page_index, worker.worker_id)
        if worker.slots > 1:
            try:
                worker.cancel(job_id)
            except (OSError, BrokenPipeError):
                self._on_death(worker)
            return
        worker.take_jobs()
        worker.kill()
        transitions.release_claim(self.db, claim, MemoryCritical())

    @staticmethod
    def _local(worker: WorkerHandle) -> bool:
        """Whether the worker reads on this host (the memory watermarks govern it)."""
        return not registry.entry(worker.spec.engine).remote

    def _drain_step(self) -> None:
        if self._drained.is_set():
            return
        reading = [w for w in self.workers if w.jobs]
        if reading and time.monotonic() < self._drain_deadline:
            return  # still finishing
        for worker in reading:
            jobs = worker.take_jobs()
            worker.kill()
            for job in jobs:
                log.warning("drain timeout: page queued again doc=%s page=%d worker=%s",
                            job.claim.document_id, job.claim.page_index, worker.worker_id)
                if transitions.release_claim(self.db, job.claim, StoppedAtShutdown()):
                    self._released += 1
        self._drained.set()

    def _dispatch(self) -> None:
        if self._draining.is_set():
            return  # stopping: what is queued stays queued for the next start
        # paused by the memory watermarks (a resume wakes us): they govern this host's
        # memory only, so remote endpoints still get pages
        paused = self.memory is not None and not self.memory.watermarks.dispatch_allowed
        # Claiming is a write transaction: only try when work may have appeared (a
        # wake-up, a worker freed by a result), or at the poll that catches retries
        # whose backoff has run out. An idle daemon then costs no CPU.
        now = time.monotonic()
        if not (self._may_have_work or now >= self._next_claim_poll):
            return
        self._may_have_work = False
        self._next_claim_poll = now + CLAIM_POLL_S
        timeout_s = self.settings.workers.page_timeout_s
        kill_after_s = timeout_s + min(MAX_KILL_GRACE_S, timeout_s / 4)
        for worker in self.workers:
            while worker.free_slots and not (paused and self._local(worker)):
                claim = transitions.claim_next_page(self.db, worker.worker_id,
                                                    kill_after_s + LEASE_MARGIN_S, self.priority,
                                                    in_page_order=self.page_context,
                                                    alone=not worker.jobs,
                                                    engines=self.readings[worker.spec.engine])
                if claim is None:
                    break  # nothing for it; perhaps a crash suspect, for an empty worker
                boost = claim.options.get("resolution_boost", 0)
                dpi = render_dpi(self.settings.raster.pdf_dpi, boost)
                job = Job(job_id=next(self._job_ids),
                          original=self.spool.original_path(claim.sha256), kind=claim.kind,
                          page_index=claim.page_index, dpi=dpi,
                          max_pixels=self.settings.limits.max_pixels,
                          page_image=self.spool.page_image_path(claim.sha256, claim.page_index,
                                                                dpi),
                          doc_type=claim.doc_type, engine=claim.engine, attempt=claim.attempt,
                          pdf_password=self.settings.pdf_password(claim.watch_folder),
                          deadline_s=timeout_s, context=self._context(claim),
                          resolution_boost=boost, turn_deg=claim.options.get("turn_deg"),
                          text_layer=claim.text_layer or self.settings.pdf.text_layer)
                try:
                    worker.send(job, claim, kill_after_s)
                except (OSError, BrokenPipeError):
                    self._on_death(worker)

    def _context(self, claim: transitions.Claim) -> str:
        """The end of the previous page's Markdown, for a vision reading of this page."""
        asked = registry.entry(claim.engine) if claim.engine else None  # e.g. a fallback's
        if not self.page_context or claim.page_index == 0 or (asked and not asked.page_context):
            return ""
        previous = queries.accepted_markdown(self.db, claim.document_id, claim.page_index - 1)
        return page_tail(previous) if previous else ""

    def _route(self, claim: transitions.Claim, done: PageDone) -> tuple[Route, FieldSet | None]:
        """Accept the page, or send it to review, by its confidence and the rules; on a
        typed document's last page, also by its fields (read here, stored with it)."""
        rules = self.routing_rules
        specs = self.field_specs.get(claim.doc_type)
        text = fields = None
        if rules.required_fields.get(claim.doc_type) or specs:  # a document's: on its last page
            others = queries.accepted_texts(self.db, claim.document_id, exclude=claim.page_id)
            if others is not None:
                reading = done.recognition
                text = "\n".join([*others, reading.text or ""])
                if specs:
                    unstored = PageResult(text=reading.text, provenance=reading.provenance,
                                          lines=[line.to_dict() for line in reading.lines],
                                          field_answer=reading.field_answer,
                                          barcodes=reading.barcodes)
                    fields = read_document_fields(self.db, claim.document_id, claim.doc_type,
                                                  specs, (claim.page_index, unstored))
        route = route_page(done.confidence, doc_type=claim.doc_type,
                           page_key=f"{claim.sha256}:{claim.page_index}", text=text, rules=rules,
                           field_reasons=fields.reasons if fields else (),
                           layout_doubt=done.recognition.provenance.get(LAYOUT_DOUBT))
        return route, fields

    def _on_answer(self, worker: WorkerHandle, answer: PageDone | PageFailed) -> None:
        job = worker.finish(answer.job_id)
        if job is None:
            log.error("answer for a job not in flight worker=%s job=%d", worker.worker_id,
                      answer.job_id)
            return
        claim = job.claim
        self._may_have_work = True
        if (endpoint := worker.spec.options.get("endpoint")) is not None:
            self.endpoint_answers.record(endpoint["name"], answer, time.monotonic() - job.started)
        if isinstance(answer, PageDone):
            # routed either way, so the reasons are on record; held only with review on
            route, fields = self._route(claim, answer)
            transitions.complete_page(self.db, claim, answer, route.reasons,
                                      review=route.review and self.settings.review.enabled,
                                      fields=fields)
            log.info("page done doc=%s page=%d attempt=%d engine=%s ms=%.0f", claim.document_id,
                     claim.page_index, claim.attempt, answer.engine,
                     sum(answer.timings_ms.values()))
            self._touched.add(claim.document_id)
        elif answer.code == PagePreempted.code:  # taken back by _preempt_newest
            transitions.release_claim(self.db, claim, MemoryCritical())
        elif (answer.code == EndpointUnavailable.code and queries.releases(
                self.db, claim.page_id, answer.code) < self.settings.workers.max_attempts):
            # not the page's fault: read again (elsewhere, or once the endpoint is back).
            # Past max_attempts such releases it is charged, in case it is the page that
            # breaks the server.
            transitions.release_claim(self.db, claim, EndpointUnavailable(answer.message))
        else:
            outcome = OUTCOME_BY_CODE.get(answer.code, Outcome.ERROR)
            self._record_failure(claim, outcome, answer.code, answer.message,
                                 retryable=answer.retryable, timings_ms=answer.timings_ms)
        worker.pages_done += 1
        self._recycle_if_worn(worker)

    def _recycle_if_worn(self, worker: WorkerHandle) -> None:
        """Leak guard, between pages only: a worker that has read many pages, or whose
        memory grew past its limit, is replaced by a fresh one. One still reading other
        pages takes no more, and is replaced once they are done."""
        latest = self.memory.latest if self.memory else None
        vram = latest.per_pid.get(worker.process.pid, 0) if latest else 0
        worker.retiring = worker.retiring or worker.wear(self.settings.workers, vram)
        if worker.retiring and not worker.jobs:
            log.info("recycling worker slot=%d %s", worker.slot, worker.retiring)
            worker.recycle()

    def _record_failure(self, claim, outcome: Outcome, code: str, message: str,
                        retryable: bool, timings_ms: dict | None = None) -> None:
        status = transitions.fail_attempt(
            self.db, claim, outcome, code, message, retryable=retryable,
            max_attempts=self.settings.workers.max_attempts,
            backoff_s=RETRY_BASE_S * 2 ** (claim.attempt - 1), timings_ms=timings_ms,
            poison_crashes=self.settings.workers.poison_crashes)
        self._touched.add(claim.document_id)
        log.warning("page attempt failed doc=%s page=%d attempt=%d code=%s now=%s",
                    claim.document_id, claim.page_index, claim.attempt, code, status)

    def _finish_documents(self) -> None:
        """Hand on the documents whose last page this tick settled (their steps run on
        the finisher's thread, not this one)."""
        while self._touched:
            view = queries.get_document(self.db, self._touched.pop())
            if view is not None and view.is_final:
                self.on_final(view.doc.id)

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if now < self._next_housekeeping:
            return
        self._next_housekeeping = now + HOUSEKEEPING_S
        expired = transitions.requeue_expired_leases(self.db, self.settings.workers.max_attempts)
        if expired:
            log.warning("requeued pages with expired leases count=%d", expired)
