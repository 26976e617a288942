"""Worker processes: each engine instance lives in its own spawned process.

A native crash, an out-of-memory kill or a stuck page kills only that process; the
dispatcher (the supervisor) notices through the process sentinel and restarts it.
The worker loads its engine once, proves it with a warm-up page, and only then
reports ready. What the engine found is read (``pipeline.read``) after the result
cache, which holds what it found. Page images travel as spool paths, never as pickled
arrays.

A worker reads up to its engine's ``slots`` pages at once, each on a thread of its
own (one copy of the model, several decoding sequences); the messages both sides
exchange are in ``appliance.engines.messages``.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace
from enum import StrEnum
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as wait_connections
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import psutil
from PIL import Image

from appliance import logs
from appliance.config import PdfSettings, PreprocessSettings, WorkerSettings
from appliance.engines import create_engine, native, pdf_text, registry
from appliance.engines.barcodes import read_barcodes
from appliance.engines.base import Engine, PageRequest, warmup_image
from appliance.engines.cache import CACHE_PROVENANCE, ResultCache, image_digest
from appliance.engines.messages import (Availability, Cancel, Job, PageDone, PageFailed, Ready,
                                        StartFailed)
from appliance.engines.tesseract import TesseractReader, tesseract_problem
from appliance.engines.vision import VisionEngine
from appliance.errors import (
    ApplianceError, DegenerateOutput, EndpointUnavailable, EngineError, EngineUnavailable,
    PagePreempted, WarmupTimeout,
)
from appliance.fields.model import parse_answer, question
from appliance.fields.schema import FieldSpec
from appliance.outputs.placement import place_text
from appliance.page import Recognition
from appliance.pipeline.read import ReadStage
from appliance.quality.confidence import Confidence, needs_second_opinion, score_page
from appliance.quality.postprocess import postprocess
from appliance.raster import (ON_DEMAND, PAGE_IMAGE, PageRendering, plausible_dpi,
                              save_page_image)
from appliance.raster.preprocess import preprocess

if TYPE_CHECKING:
    from appliance.store.transitions import Claim

log = logging.getLogger(__name__)

PARENT_CHECK_S = 1.0
# an absolute path in an exception's text (not one inside a URL)
_SERVER_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s'\"/]+/)*[^\s'\"/]+")


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
    engine: str
    options: dict = field(default_factory=dict)
    log_level: str = "INFO"
    preprocess: PreprocessSettings = field(default_factory=PreprocessSettings)
    pdf: PdfSettings = field(default_factory=PdfSettings)  # reading a PDF page's own text
    cache_dir: Path | None = None  # the result cache; None: every page is read
    # a reading whose confidence is under this gets a second opinion: a vision reading
    # the classic engine's, a classic reading Tesseract's (in these languages)
    second_opinion_below: float | None = None
    second_opinion_languages: str = "eng"
    # a vision reading's words are placed on the classic reading's word boxes
    place_vision_text: bool = True
    page_furniture: str = "separate"
    barcodes: bool = True  # each page's barcodes are read (engines.barcodes)
    # the fields of each document type, which a vision engine is asked for
    field_specs: dict[str, tuple[FieldSpec, ...]] = field(default_factory=dict)


@dataclass
class PagePipeline:
    """Everything a worker does to one page besides the engine's own work, with the
    parts it keeps between pages."""

    engine: Engine
    preprocess: PreprocessSettings
    cache: ResultCache | None = None
    pdf: PdfSettings = field(default_factory=PdfSettings)
    classify_upside_down: Callable | None = None
    text_boxes: Callable | None = None  # the text detector that checks a page on its side
    second_opinion_below: float | None = None
    second_reader: TesseractReader | None = None  # reads classic pages in doubt again
    place_vision_text: bool = True
    field_specs: dict[str, tuple[FieldSpec, ...]] = field(default_factory=dict)
    read: ReadStage = field(default_factory=ReadStage)
    barcodes: bool = True  # each page's barcodes are read (engines.barcodes)

    def recognise(self, image: Image.Image, request: PageRequest) -> Recognition:
        """The engine's reading of ``image``, read (``pipeline.read``), not cached: the
        quick and second readings around the page's own."""
        return self.read(self.engine.recognize(image, request), image)


def run_job(pipeline: PagePipeline, job: Job, background: ThreadPoolExecutor,
            cancel: threading.Event | None = None) -> PageDone | PageFailed:
    """Render, preprocess, recognise (or find in the cache), read, repair; time each stage.
    ``cancel`` set takes the page back: before the engine starts it, the page is not
    read at all; after, the engine stops soon (both answer PagePreempted)."""
    engine = pipeline.engine
    timings: dict[str, float] = {}
    saving: Future | None = None
    try:
        deadline = time.monotonic() + job.deadline_s
        page = PageRendering(job.original, job.kind, job.page_index, job.dpi, job.max_pixels,
                             job.pdf_password)
        request = PageRequest(doc_type=job.doc_type, engine=job.engine, attempt=job.attempt,
                              deadline=deadline, context=job.context, cancel=cancel)
        reader = engine.reader(request)
        verdict = recognition = key = image = None
        if job.kind == "pdf" and job.text_layer != pdf_text.IGNORE:
            start = time.perf_counter()
            page.size  # a PDF pdfium cannot open fails here, with its reason, as OCR would
            verdict, recognition, key = _own_text(pipeline, job, page, request)
            timings["text_layer_ms"] = (time.perf_counter() - start) * 1000
        if recognition is not None:
            # read from its own text: the page as rendered, whose image is written only
            # when someone opens it (``review.page_image``)
            steps = []
            reader = (pdf_text.NAME, pdf_text.model_id())
            recognition.provenance[PAGE_IMAGE] = ON_DEMAND
        else:
            start = time.perf_counter()
            rendered_image = page.image
            timings["raster_ms"] = (time.perf_counter() - start) * 1000
            image, steps, recognition, key, saving = _ocr_reading(
                pipeline, job, rendered_image, request, timings, background)
            if verdict is not None:
                recognition.provenance["text_layer"] = verdict
        start = time.perf_counter()
        recognition = pipeline.read(recognition, image)  # image None: read from its text
        timings["read_ms"] = (time.perf_counter() - start) * 1000

        def engine_image() -> Image.Image:
            """The image the engine read; a page read from its text rendered only now."""
            return page.image if image is None else image
        start = time.perf_counter()
        postprocess(recognition)
        confidence = score_page(recognition, doc_type=request.doc_type)
        timings["postprocess_ms"] = (time.perf_counter() - start) * 1000
        below, second = pipeline.second_opinion_below, None
        if below is not None and needs_second_opinion(confidence, below):
            start = time.perf_counter()
            second = _second_reading(pipeline, engine_image(), request, confidence)
            timings["second_opinion_ms"] = (time.perf_counter() - start) * 1000
            if second is not None:
                confidence = score_page(recognition, doc_type=request.doc_type,
                                        second_opinion=second)
        if (pipeline.place_vision_text and not recognition.lines and recognition.text.strip()
                and registry.entry(engine.name).fallback is not None):
            # a vision reading has no word boxes: its words go on the classic reading's
            # (the second opinion's, when one was read), after scoring, which they
            # must not change
            start = time.perf_counter()
            classic = second or pipeline.recognise(engine_image(),
                                                   replace(request, engine=registry.FALLBACK))
            place_text(recognition, classic.lines)
            timings["placement_ms"] = (time.perf_counter() - start) * 1000
        specs = pipeline.field_specs.get(request.doc_type)
        if (specs and isinstance(engine, VisionEngine) and request.engine != registry.FALLBACK
                and reader[0] != pdf_text.NAME):
            start = time.perf_counter()
            recognition.field_answer = _field_answer(engine, engine_image(), recognition, specs,
                                                      request)
            timings["fields_ms"] = (time.perf_counter() - start) * 1000
        if pipeline.barcodes:
            start = time.perf_counter()
            recognition.barcodes = read_barcodes(engine_image())
            timings["barcodes_ms"] = (time.perf_counter() - start) * 1000
        if key:  # so that deleting the document can delete its cache entries too
            recognition.provenance[CACHE_PROVENANCE] = key
        recognition.provenance["preprocess"] = [step.to_dict() for step in steps]
        recognition.provenance["image_size"] = list(page.size if image is None else image.size)
        # the page as rendered, which hOCR, ALTO and text layers are placed on
        recognition.provenance["rendered"] = {
            "size": list(page.size), "dpi": round(page.dpi, 2) if plausible_dpi(page.dpi) else None}
        # where the image was kept depends on the DPI it was rendered at, which the
        # settings may change later: the page finds its image by this one
        recognition.provenance["page_image_dpi"] = job.dpi
        if saving is not None:
            saving.result()
    except ApplianceError as exc:
        return PageFailed(job.job_id, exc.code, exc.message, exc.retryable, timings)
    except Exception as exc:  # an engine bug must not kill the worker's loop
        log.exception("page failed in engine %s", engine.name)
        return PageFailed(job.job_id, EngineError.code,
                          f"the engine failed on this page ({_described(exc)})",
                          retryable=True, timings_ms=timings)
    finally:
        if saving is not None:
            wait_futures([saving])  # never leave a half-written page image behind a result
    return PageDone(job.job_id, *reader, timings, confidence.score,
                    {**confidence.signals, "penalties": confidence.penalties}, recognition)


def _described(exc: Exception) -> str:
    """An unexpected failure in words for whoever sent the page, without the paths it
    names (the server's layout is none of their business; the log has them)."""
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{type(exc).__name__}: {_SERVER_PATH.sub('a file on the server', text)}"


def _own_text(pipeline: PagePipeline, job: Job, page: PageRendering, request: PageRequest
              ) -> tuple[dict, Recognition | None, str | None]:
    """The page read from its own text (``engines.pdf_text``), with the verdict; None
    for the reading where the page goes to OCR. Its quick OCR (the invisible layer's
    sample, the pictures of a mixed page) is the classic reader's."""
    quick = replace(request, engine=registry.FALLBACK)
    reader = pdf_text.TextLayerReader(pipeline.pdf, job.text_layer,
                                      pipeline.engine.reader(quick)[1])
    return pdf_text.read_page(page, job.text_layer, pipeline.pdf,
                              lambda picture: pipeline.recognise(picture, quick),
                              pipeline.cache, reader, request)


def _ocr_reading(pipeline: PagePipeline, job: Job, image: Image.Image, request: PageRequest,
                 timings: dict[str, float], background: ThreadPoolExecutor):
    """Preprocess the page and read it with the engine (or find it in the cache): the
    image the engine read, the preprocessing steps, the reading, its cache key and the
    spool write of the image under way."""
    engine, cancel = pipeline.engine, request.cancel
    start = time.perf_counter()
    image, steps = preprocess(image, pipeline.preprocess, doc_type=job.doc_type,
                              max_pixels=job.max_pixels,
                              classify_upside_down=pipeline.classify_upside_down,
                              text_boxes=pipeline.text_boxes,
                              resolution_boost=job.resolution_boost)
    timings["preprocess_ms"] = (time.perf_counter() - start) * 1000
    # the page as the engine sees it serves review: write it while the engine works
    saving = background.submit(save_page_image, image, job.page_image)
    start = time.perf_counter()
    key = pipeline.cache.key(image_digest(image), engine, request) if pipeline.cache else None
    recognition = pipeline.cache.get(key) if key else None
    if recognition is None:
        if cancel is not None and cancel.is_set():
            raise PagePreempted("taken back before the engine read it")
        recognition = engine.recognize(image, request)
        timings["inference_ms"] = (time.perf_counter() - start) * 1000
        if key:
            pipeline.cache.put(key, recognition)
    else:
        recognition.flags = [*recognition.flags, "cached"]
        timings["cache_ms"] = (time.perf_counter() - start) * 1000
    return image, steps, recognition, key, saving


def _second_reading(pipeline: PagePipeline, image: Image.Image, request: PageRequest,
                    confidence: Confidence) -> Recognition | None:
    """Another engine's reading of a page in doubt: the classic engine's of a vision
    reading (with token evidence or none), Tesseract's of a classic one. None when
    there is no other engine."""
    if confidence.signals.get("source") in ("tokens", "none"):
        return pipeline.recognise(image, replace(request, engine=registry.FALLBACK))
    if pipeline.second_reader is not None:
        return pipeline.second_reader.read(image)
    return None


def _field_answer(engine: VisionEngine, image: Image.Image, recognition: Recognition,
                  specs: tuple[FieldSpec, ...], request: PageRequest) -> dict | None:
    """The vision model's reading of the page's fields, from the image and the page's
    lines (``fields.model``). None when the question does not fit the model's context,
    or its answer ran out of tokens or is not of the question's schema: the rules
    extractor then reads every field. The page's own reading stands either way."""
    asked = question(request.doc_type, specs, recognition.lines, image.width, image.height)
    recognition.provenance["fields_question"] = asked.version
    try:
        answer = engine.ask(image, asked, request)
    except EngineError as exc:
        log.warning("the vision model could not answer %s (%s)", asked.version, exc.message)
        return None
    if answer is None:
        return None
    try:
        return parse_answer(answer, specs)
    except ValueError as exc:
        log.warning("the model's answer to %s is not of its schema (%s)", asked.version, exc)
        return None


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
        threads = spec.options.get("threads", 1)
        pipeline = PagePipeline(engine, spec.preprocess,
                                ResultCache(spec.cache_dir) if spec.cache_dir else None,
                                pdf=spec.pdf,
                                second_opinion_below=spec.second_opinion_below,
                                place_vision_text=spec.place_vision_text,
                                field_specs=spec.field_specs,
                                read=ReadStage.with_table_model(spec.page_furniture, threads),
                                barcodes=spec.barcodes)
        if spec.second_opinion_below is not None:
            if problem := tesseract_problem(spec.second_opinion_languages):
                log.warning("classic pages in doubt get no second opinion: %s", problem)
            else:
                pipeline.second_reader = TesseractReader(spec.second_opinion_languages)
        if spec.preprocess.enabled and spec.preprocess.orientation:
            from appliance.engines.orientation import (  # the worker's import
                TextBoxDirections, UpsideDownClassifier,
            )

            pipeline.classify_upside_down = UpsideDownClassifier(threads=threads)
            pipeline.text_boxes = TextBoxDirections(threads=threads)
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
        _serve(pipeline, conn)
    except (EOFError, BrokenPipeError):
        pass  # the supervisor is gone
    finally:
        engine.close()


def _serve(pipeline: PagePipeline, conn: Connection) -> None:
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
