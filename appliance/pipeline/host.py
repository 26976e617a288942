"""Worker processes: each engine instance lives in its own spawned process.

A native crash, an out-of-memory kill or a stuck page kills only that process; the
dispatcher (the supervisor) notices through the process sentinel and restarts it.
The worker loads its engine once, proves it with a warm-up page, and only then
reports ready; each page then runs through the stages of ``pipeline.stages``. Page
images travel as spool paths, never as pickled arrays.

A worker reads up to its engine's ``slots`` pages at once, each on a thread of its
own (one copy of the model, several decoding sequences); the messages both sides
exchange are in ``appliance.engines.messages``.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from typing import TYPE_CHECKING

import psutil

from appliance import logs
from appliance.config import WorkerSettings
from appliance.engines import create_engine, native, registry
from appliance.engines.base import PAGES_IN_HAND, PageRequest, warmup_image
from appliance.engines.messages import Availability, Cancel, Job, Ready, StartFailed
from appliance.errors import (
    ApplianceError, DegenerateOutput, EndpointUnavailable, EngineUnavailable, WarmupTimeout,
)
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job

if TYPE_CHECKING:
    from appliance.store.transitions import Claim

log = logging.getLogger(__name__)

PARENT_CHECK_S = 1.0


def how_it_ended(exitcode: int | None) -> str:
    """A dead worker's exit code in words: a native crash names its signal."""
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            pass
    return f"exit code {exitcode}"


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process is started with: its engine and the page's settings."""

    engine: str
    options: dict = field(default_factory=dict)
    log_level: str = "INFO"
    page: PageSettings = field(default_factory=PageSettings)


def _exit_with_parent(parent_pid: int) -> None:
    # A worker must not outlive a daemon killed with SIGKILL.
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


def worker_main(spec: WorkerSpec, conn: Connection, parent_pid: int) -> None:
    logs.configure(spec.log_level, "worker")
    if spec.log_level != "DEBUG":  # a remote engine's every request would be an INFO line
        logging.getLogger("httpx").setLevel(logging.WARNING)
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()

    try:
        start = time.perf_counter()
        native.load_page_libraries()  # none may load once a model runs on a GPU
        engine = create_engine(spec.engine, spec.options)
        pipeline = PagePipeline.load(engine, spec.page, spec.options.get("threads", 1))
        try:
            pipeline.recognise(warmup_image(), PageRequest())
        except DegenerateOutput:
            pass  # the whole path ran; judging the answer is not the warm-up's job
        except EndpointUnavailable:
            pass  # a remote endpoint that is down: its breaker is open and probing
        if (fallback := registry.entry(spec.engine).fallback) is not None:
            # the reader it keeps for fallbacks and second opinions, loaded now: its
            # memory belongs to the baseline the leak guard measures growth from
            pipeline.recognise(warmup_image(), PageRequest(engine=fallback))
        warmup_ms = (time.perf_counter() - start) * 1000
    except Exception as exc:
        code = exc.code if isinstance(exc, ApplianceError) else EngineUnavailable.code
        conn.send(StartFailed(code, f"{type(exc).__name__}: {exc}"))
        return
    conn.send(Ready(engine.name, engine.model_id, os.getpid(), warmup_ms, engine.slots))
    try:
        serve_jobs(pipeline, conn)
    except (EOFError, BrokenPipeError):
        pass  # the supervisor is gone
    finally:
        pipeline.close()


def serve_jobs(pipeline: PagePipeline, conn: Connection) -> None:
    """Read jobs until told to stop, up to the engine's ``slots`` at once: this thread
    only receives (a Cancel must get through while pages are being read); each job
    runs on a page thread of its own, which sends its answer."""
    slots = pipeline.engine.slots
    sending = threading.Lock()  # Connection.send is not thread-safe
    cancels: dict[int, threading.Event] = {}  # the jobs in flight

    def send_availability(available: bool, reason: str) -> None:
        with sending:
            conn.send(Availability(available, reason))

    if registry.entry(pipeline.engine.name).remote:  # the supervisor hears its breaker
        pipeline.engine.breaker.listen(send_availability)

    def read(job: Job, cancel: threading.Event, background: ThreadPoolExecutor) -> None:
        with PAGES_IN_HAND.reading():
            answer = run_job(pipeline, job, background, cancel)
        cancels.pop(job.job_id, None)
        with sending:
            conn.send(answer)

    with (ThreadPoolExecutor(slots, thread_name_prefix="spool-writer") as background,
          ThreadPoolExecutor(slots, thread_name_prefix="page") as pages):
        try:
            while (message := conn.recv()) is not None:
                if isinstance(message, Cancel):
                    if (cancel := cancels.get(message.job_id)) is not None:
                        cancel.set()
                else:
                    cancels[message.job_id] = threading.Event()
                    pages.submit(read, message, cancels[message.job_id], background)
        finally:  # the supervisor is gone: what is in flight stops soon, not at its deadline
            for cancel in list(cancels.values()):
                cancel.set()


class WorkerState(StrEnum):
    STARTING = "starting"
    IDLE = "idle"  # ready, with a free slot
    BUSY = "busy"  # ready, and takes no more pages now (full, or reading a crash suspect)
    OUT = "out"  # ready, but its remote endpoint is out: no pages until it is back
    DEAD = "dead"


@dataclass
class InFlight:
    """A job the worker holds: its page's claim, and when the supervisor gives up on it."""

    claim: Claim
    started: float  # time.monotonic()
    deadline: float  # past it, the worker is killed
    cancelled: bool = False  # a Cancel was sent; its answer is awaited


class WorkerHandle:
    """The supervisor's side of one worker process."""

    _ctx = mp.get_context("spawn")

    def __init__(self, slot: int, spec: WorkerSpec):
        self.slot = slot
        self.spec = spec
        self._state = WorkerState.DEAD  # STARTING, DEAD, or IDLE for a ready one
        self.process = None
        self.conn: Connection | None = None
        self.info: Ready | None = None
        self.slots = 0  # jobs it reads at once, as its Ready said
        self.jobs: dict[int, InFlight] = {}  # by job id
        self.warmed_up_once = False
        self.baseline_bytes = 0  # private memory once warmed up: what growth is measured from
        self.restarts = 0  # after a crash, a timeout or a failed start
        self.recycled = 0  # by the leak guard, between pages
        self.pages_done = 0  # by the current process
        self.retiring: str | None = None  # worn out: takes no more pages, recycled once empty
        self.out: str | None = None  # why its remote endpoint is out (no pages meanwhile)
        self._recycling = False
        self.started_at = 0.0

    @property
    def worker_id(self) -> str:
        return f"w{self.slot}:{self.process.pid if self.process else '-'}"

    @property
    def state(self) -> WorkerState:
        if self._state == WorkerState.IDLE and self.out:
            return WorkerState.OUT
        if self._state == WorkerState.IDLE and not self.free_slots:
            return WorkerState.BUSY
        return self._state

    @property
    def free_slots(self) -> int:
        """Jobs it may be given now. A crash suspect is read alone: a worker reading one
        takes nothing else until it answers."""
        if (self._state != WorkerState.IDLE or self.retiring or self.out
                or any(job.claim.suspect for job in self.jobs.values())):
            return 0
        return self.slots - len(self.jobs)

    def start(self) -> None:
        if self.process is not None and not self._recycling:
            self.restarts += 1
        self._recycling = False
        self.retiring = None
        self.out = None
        self.pages_done = 0
        self.jobs = {}
        parent_conn, child_conn = self._ctx.Pipe()
        self.process = self._ctx.Process(target=worker_main, name=f"engine-worker-{self.slot}",
                                         args=(self.spec, child_conn, os.getpid()), daemon=True)
        self.process.start()
        child_conn.close()
        self.conn = parent_conn
        self._state = WorkerState.STARTING
        self.started_at = time.monotonic()
        self.info = None
        log.info("worker started slot=%d pid=%d engine=%s", self.slot, self.process.pid,
                 self.spec.engine)

    def wait_ready(self, timeout_s: float) -> Ready | StartFailed:
        """Block until the started worker is ready, for a tool that drives one worker
        itself (`doctor`, the parallel bench): its Ready, or a StartFailed for a start
        that failed, a process that died (and how) or a warm-up past ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            message = self.receive()
            if isinstance(message, Ready):
                self.on_ready(message)
                return message
            if isinstance(message, StartFailed):
                self.kill()
                return message
            if not self.is_alive():
                ended = how_it_ended(self.process.exitcode)
                self.kill()
                return StartFailed(EngineUnavailable.code,
                                   f"the engine process died while starting ({ended})")
            wait_connections([self.conn, self.process.sentinel], timeout=min(left, 1.0))
        self.kill()
        return StartFailed(WarmupTimeout.code, "the engine did not finish its warm-up in time")

    def on_ready(self, ready: Ready) -> None:
        self.info = ready
        self.slots = ready.slots
        self._state = WorkerState.IDLE
        self.warmed_up_once = True
        self.baseline_bytes = self.private_bytes()

    def send(self, job: Job, claim, timeout_s: float) -> None:
        now = time.monotonic()
        self.jobs[job.job_id] = InFlight(claim, now, now + timeout_s)
        self.conn.send(job)

    def cancel(self, job_id: int) -> None:
        """Take a job back: the worker answers it PageFailed("preempted") soon."""
        self.jobs[job_id].cancelled = True
        self.conn.send(Cancel(job_id))

    def finish(self, job_id: int) -> InFlight | None:
        """The job the worker answered, no longer in flight."""
        return self.jobs.pop(job_id, None)

    def take_jobs(self) -> list[InFlight]:
        """Every job in flight, oldest first, none left: the process is going away."""
        jobs = sorted(self.jobs.values(), key=lambda job: job.started)
        self.jobs = {}
        return jobs

    def receive(self):
        """The next message if one is waiting, else None; None too if the pipe broke."""
        try:
            return self.conn.recv() if self.conn.poll() else None
        except (EOFError, OSError):
            return None

    def is_alive(self) -> bool:
        return self.process is not None and self.process.is_alive()

    def kill(self) -> None:
        if self.process is not None and self.process.is_alive():
            self.process.kill()
        self._reap()

    def recycle(self) -> None:
        """Replace a worker with nothing in flight by a fresh process (not a restart)."""
        self._recycling = True
        self.recycled += 1
        self.stop()

    def wear(self, limits: WorkerSettings, vram_bytes: int) -> str | None:
        """Why this worker is due to be replaced by a fresh one (the leak guard), if it is.
        Its memory is judged only with no page in flight: a leak is what stays, and the
        pages still being read hold their images and buffers. Growth is allowed per
        page read at once."""
        if limits.recycle_after_pages and self.pages_done >= limits.recycle_after_pages:
            return f"pages={self.pages_done}"
        if self.jobs:
            return None
        private_mb = self.private_bytes() / 2**20
        grown_mb = private_mb - self.baseline_bytes / 2**20
        if limits.max_worker_rss_mb and private_mb > limits.max_worker_rss_mb:
            return f"private_mb={private_mb:.0f}"
        # each page read at once leaves its high-water mark in the allocator's arenas
        if limits.max_worker_growth_mb and grown_mb > limits.max_worker_growth_mb * self.slots:
            return f"private_mb={private_mb:.0f} grown_mb={grown_mb:.0f}"
        if limits.max_worker_vram_mb and vram_bytes > limits.max_worker_vram_mb * 2**20:
            return f"vram_mb={vram_bytes / 2**20:.0f}"
        return None

    def private_bytes(self) -> int:
        """Resident memory of its own: RSS less file-backed pages (a memory-mapped model
        is the kernel's page cache, not a leak)."""
        try:
            info = psutil.Process(self.process.pid).memory_info()
        except (psutil.Error, AttributeError):
            return 0
        return info.rss - getattr(info, "shared", 0)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask a worker with nothing in flight to exit; kill it if it does not (at once
        if it is reading)."""
        if self.process is None:
            return
        idle = not self.jobs
        try:
            if idle:
                self.conn.send(None)
            self.process.join(timeout_s if idle else 0)
        except (OSError, BrokenPipeError):
            pass
        self.kill()

    def _reap(self) -> None:
        if self.process is not None:
            self.process.join(5)
        if self.conn is not None:
            self.conn.close()
        self._state = WorkerState.DEAD

    def waitables(self) -> list:
        return [self.conn, self.process.sentinel] if self._state != WorkerState.DEAD else []
