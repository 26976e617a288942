"""The seam between the supervisor and its worker processes: typed messages, several
pages in flight in one engine process, a crash with pages in flight charged to none
of them, and preemption of one decoding sequence. Real worker processes, real SQLite.

The tests after "several pages at once" run the llama engine with ``parallel: 2`` on
the tiny model: they need the batched llama engine (``LlamaEngine.slots`` = its
``parallel``), and fail until it is merged (the engine refuses the option).
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from multiprocessing import Pipe
from pathlib import Path
from threading import Event, Thread

import pytest
from sqlmodel import select

from appliance.daemon import Appliance
from appliance.engines.base import PagesInHand
from appliance.engines.classic import ClassicEngine
from appliance.engines.messages import Cancel, Job, PageDone, PageFailed, Ready
from appliance.intake import SubmitOptions
from appliance.pipeline.host import WorkerHandle, WorkerSpec, serve_jobs
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from appliance.store.models import Page, PageResult, PageStatus
from tests.conftest import make_settings
from tests.fixtures.documents import GRID, ruled_table, text_similarity, write_png
from tests.service.test_memory_governance import wait_for

# Long answers, so that pages stay in flight for a few seconds: the tiny model
# writes about a thousand tokens a second on one thread.
FIXED_TOKENS = 1500
ANSWER_S = 120
PAGE_TEXT = ["Purchase order 5512", "Ship to Harbour Road 14", "Forty crates of pears",
             "Payment within thirty days"]


def job(job_id: int, original: Path, tmp_path: Path, kind: str = "png") -> Job:
    return Job(job_id=job_id, original=original, kind=kind, page_index=0, dpi=150,
               max_pixels=40_000_000, page_image=tmp_path / f"seen-{job_id}.png",
               doc_type="generic", engine=None, attempt=1, pdf_password=None, deadline_s=60)


def next_message(worker: WorkerHandle, timeout_s: float = ANSWER_S):
    assert worker.conn.poll(timeout_s), "the worker did not answer in time"
    return worker.conn.recv()


@pytest.fixture
def started():
    workers: list[WorkerHandle] = []

    def start(spec: WorkerSpec) -> WorkerHandle:
        worker = WorkerHandle(len(workers), spec)
        workers.append(worker)
        worker.start()
        return worker

    yield start
    for worker in workers:
        worker.stop()


def llama_options(tiny_model, **extra) -> dict:
    model, mmproj = tiny_model
    return {"model": str(model), "mmproj": str(mmproj), "threads": 1,
            "retry_ladder": ["greedy"], "fixed_tokens": FIXED_TOKENS, "auto_tiling": False,
            **extra}


# --- the classic engine: a page a core ------------------------------------------------


def test_a_classic_worker_reads_a_page_per_core_at_once_and_answers_by_job(tmp_path, started):
    worker = started(WorkerSpec("classic", {"threads": 2}))
    ready = next_message(worker)
    assert isinstance(ready, Ready)
    assert (ready.engine, ready.slots, ready.pid) == ("classic", 2, worker.process.pid)
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"not an image")
    texts = {7: "Memo to all staff", 9: "Invoice paid in full"}
    for job_id, text in texts.items():
        worker.conn.send(job(job_id, write_png(tmp_path / f"{job_id}.png", [text]), tmp_path))
    worker.conn.send(job(8, bad, tmp_path))
    answers = {answer.job_id: answer for answer in (next_message(worker) for _ in range(3))}
    for job_id, text in texts.items():
        done = answers[job_id]
        assert isinstance(done, PageDone) and done.engine == "classic"
        assert text_similarity(done.recognition.text, text) > 0.8
        assert "inference_ms" in done.timings_ms and 0 < done.confidence <= 1
    failed = answers[8]
    assert isinstance(failed, PageFailed)
    assert (failed.code, failed.retryable) == ("truncated_file", False)


def test_a_page_is_alone_when_no_other_is_in_hand_nor_was_a_moment_ago():
    hand = PagesInHand()
    hand.SETTLE_S = 0.2
    assert hand.alone()
    with hand.reading():
        assert hand.alone()  # the first page of an idle worker
        with hand.reading():
            assert not hand.alone()
        assert not hand.alone()  # the supervisor's next page may be on its way
        time.sleep(0.3)
        assert hand.alone()  # the last page of a batch
    assert hand.alone()


def test_a_page_the_classic_worker_reads_alone_takes_every_core(tmp_path):
    """Two cores, two slots: a page alone runs each model (the engine's detector and
    recogniser, the table model) on both cores, two pages at once run on one core
    each, and either way the page reads the same. Through the pipeline a worker loads
    and its own page threads (``host.serve_jobs``), which count the pages in hand."""
    engine = ClassicEngine(threads=2, slots=2)
    pipeline = PagePipeline.load(engine, PageSettings(), threads=2)
    models = {"detector": engine._ocr.text_det.session.session,
              "recogniser": engine._ocr.text_rec.session.session,
              "table model": pipeline.read._tables._session}
    runs = {(model, width): 0 for model in models for width in ("wide", "share")}
    for model, widening in models.items():
        for width, threads in (("wide", 2), ("share", 1)):
            session = getattr(widening, width)
            assert session.get_session_options().intra_op_num_threads == threads

            def counted(*args, _run=session.run, _key=(model, width), **kwargs):
                runs[_key] += 1
                return _run(*args, **kwargs)
            session.run = counted
    page = tmp_path / "table.png"
    ruled_table(GRID).save(page)
    ours, worker_end = Pipe()
    worker = Thread(target=serve_jobs, args=(pipeline, worker_end))
    worker.start()

    def answer():
        assert ours.poll(ANSWER_S), "the page threads did not answer in time"
        return ours.recv()
    try:
        ours.send(job(1, page, tmp_path))
        alone = answer()
        alone_runs = dict(runs)
        runs.update(dict.fromkeys(runs, 0))
        ours.send(job(2, page, tmp_path))
        ours.send(job(3, page, tmp_path))
        together = [answer(), answer()]
    finally:
        ours.send(None)
        worker.join()
        engine.close()
    for model in models:
        assert alone_runs[model, "wide"] > 0 and alone_runs[model, "share"] == 0, model
        assert runs[model, "share"] > 0, model
    assert all(isinstance(answer, PageDone) for answer in (alone, *together))
    assert [answer.recognition.markdown for answer in together] == [alone.recognition.markdown] * 2
    assert alone.recognition.markdown.split("\n")[2] == "| " + " | ".join(GRID[1]) + " |"


def test_a_page_taken_back_before_the_engine_starts_is_not_read(tmp_path):
    engine = ClassicEngine(threads=1)
    cancel = Event()
    cancel.set()
    try:
        with ThreadPoolExecutor(1) as background:
            answer = run_job(PagePipeline(engine),
                             job(3, write_png(tmp_path / "p.png", ["Taken back"]), tmp_path),
                             background, cancel)
            read = run_job(PagePipeline(engine),
                           job(4, write_png(tmp_path / "p.png", ["Taken back"]), tmp_path),
                           background, Event())
    finally:
        engine.close()
    assert isinstance(answer, PageFailed) and answer.job_id == 3
    assert (answer.code, answer.retryable) == ("preempted", True)
    assert "raster_ms" in answer.timings_ms and "inference_ms" not in answer.timings_ms
    assert isinstance(read, PageDone) and "inference_ms" in read.timings_ms  # unset: read


# --- several pages at once (needs the batched llama engine) -----------------------------


def test_a_worker_reads_two_pages_at_once_and_gives_one_back(tmp_path, tiny_model, started):
    worker = started(WorkerSpec("llama", llama_options(tiny_model, parallel=2)))
    ready = next_message(worker)
    assert isinstance(ready, Ready), ready
    assert ready.slots == 2
    worker.conn.send(job(1, write_png(tmp_path / "a.png", ["First letter"]), tmp_path))
    worker.conn.send(job(2, write_png(tmp_path / "b.png", ["Second letter"]), tmp_path))
    worker.conn.send(Cancel(2))  # read while page 1 is being read
    answers = {answer.job_id: answer for answer in (next_message(worker), next_message(worker))}
    assert isinstance(answers[1], PageDone) and len(answers[1].recognition.tokens) > 0
    assert isinstance(answers[2], PageFailed)
    assert (answers[2].code, answers[2].retryable) == ("preempted", True)


@pytest.fixture
def parallel(tmp_path, tiny_model):
    """An appliance whose one llama worker reads two pages at once, and the page ids of
    two letters submitted before it started, older first: its first claim takes both.
    (Submitted to it running, the first letter, read in 0.4 s, could be done before the
    second came on a loaded machine, and two pages never in flight at once.)"""
    settings = make_settings(tmp_path, engine={"name": "llama", **llama_options(tiny_model),
                                               "result_cache": False},
                             workers={"count": 1})
    appliance = Appliance(settings)
    for worker in appliance.workers:
        worker.spec = replace(worker.spec, options={**worker.spec.options, "parallel": 2})
    page_ids = submit_letters(appliance, tmp_path, range(2))
    appliance.start()
    try:
        wait_for(lambda: appliance.ready or appliance.dispatcher.last_start_error,
                 what="the worker's warm-up")
        assert appliance.ready, appliance.dispatcher.last_start_error
    except AssertionError:
        appliance.stop()
        raise
    yield appliance, page_ids
    appliance.stop()


def submit_letters(appliance: Appliance, tmp_path: Path, numbers: range) -> list[int]:
    """One single-page document each (pages of one document may be read in order);
    answers their page ids."""
    docs = [appliance.submit_path(write_png(tmp_path / f"letter-{n}.png", [f"Letter {n}"]),
                                  SubmitOptions(source="api")) for n in numbers]
    with appliance.db.read() as session:
        return [session.exec(select(Page.id).where(Page.document_id == d.id)).one()
                for d in docs]


def pages(appliance: Appliance, page_ids: list[int]) -> list[Page]:
    with appliance.db.read() as session:
        return [session.get(Page, page_id) for page_id in page_ids]


def attempts(appliance: Appliance, page_id: int) -> list[PageResult]:
    with appliance.db.read() as session:
        return list(session.exec(select(PageResult).where(PageResult.page_id == page_id)
                                 .order_by(PageResult.id)).all())


def all_done(appliance: Appliance, page_ids: list[int]) -> bool:
    return all(p.status == PageStatus.DONE for p in pages(appliance, page_ids))


def test_a_crash_with_two_pages_in_flight_charges_neither_and_reads_each_alone(parallel,
                                                                              tmp_path):
    appliance, page_ids = parallel
    worker = appliance.workers[0]
    assert worker.slots == 2
    wait_for(lambda: appliance.dispatcher.in_flight == 2, what="two pages on one worker")
    os.kill(worker.process.pid, signal.SIGKILL)
    wait_for(lambda: all(p.crash_suspect for p in pages(appliance, page_ids)),
             what="both pages released as crash suspects")
    [plain] = submit_letters(appliance, tmp_path, range(2, 3))  # no suspect: may share

    def one_suspect_read_alone() -> list[Page]:
        running = [p for p in pages(appliance, page_ids) if p.status == PageStatus.RUNNING]
        return running if len(running) == 1 and appliance.dispatcher.in_flight == 1 else []

    wait_for(one_suspect_read_alone, what="a suspect read alone")
    culprit = one_suspect_read_alone()[0].id  # it crashes its worker alone: it is charged
    os.kill(worker.process.pid, signal.SIGKILL)
    wait_for(lambda: all_done(appliance, [*page_ids, plain]), timeout_s=300,
             what="every page read")

    innocent = next(page_id for page_id in page_ids if page_id != culprit)
    charged, spared = attempts(appliance, culprit), attempts(appliance, innocent)
    assert [(a.attempt, a.outcome, a.error_code) for a in charged] == [
        (1, "preempted", "crash_suspect"), (1, "crashed", "worker_crashed"), (2, "ok", None)]
    assert [(a.attempt, a.outcome, a.error_code) for a in spared] == [
        (1, "preempted", "crash_suspect"), (1, "ok", None)]
    assert [(p.attempts, p.crash_suspect) for p in pages(appliance, [culprit, innocent])] == [
        (2, False), (1, False)]
    assert [(a.attempt, a.outcome) for a in attempts(appliance, plain)] == [(1, "ok")]
    # after the crash each suspect was read alone, the plain page only after them
    read = sorted((a.started_at, a.finished_at)
                  for a in charged[1:] + spared[1:] + attempts(appliance, plain))
    assert all(end <= start for (_, end), (start, _) in zip(read, read[1:])), read
    assert worker.restarts == 2


def test_preemption_takes_back_the_newest_page_and_the_other_one_goes_on(parallel):
    appliance, (older, newer) = parallel
    worker = appliance.workers[0]
    wait_for(lambda: appliance.dispatcher.in_flight == 2, what="two pages on one worker")
    appliance.dispatcher.request_preemption()  # what the memory sampler does when critical
    wait_for(lambda: all_done(appliance, [older, newer]), timeout_s=300, what="both pages read")
    assert [(a.attempt, a.outcome) for a in attempts(appliance, older)] == [(1, "ok")]
    taken_back = attempts(appliance, newer)
    assert [(a.attempt, a.outcome, a.error_code) for a in taken_back] == [
        (1, "preempted", "memory_critical"), (1, "ok", None)]
    assert [p.attempts for p in pages(appliance, [older, newer])] == [1, 1]
    assert worker.restarts == 0  # one sequence was stopped, not the process
