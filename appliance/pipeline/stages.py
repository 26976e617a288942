"""One page's way through a worker, stage by stage: render (or read the PDF page's own
text), preprocess, recognise (or find the recognition in the result cache), read
(``pipeline.read``), score, a second opinion on a page in doubt, place a vision
reading's words, ask a vision model for the fields, read the barcodes; the selection
marks are found before the read stage, which places them in the text. Each stage is
timed by one wrapper (``stopwatch.Stopwatch``); its figures travel with the page's result
(``timings_ms``), which `appliance bench` tables.

:class:`PageSettings` is what the configuration tells every stage, made once by the
daemon; :class:`PagePipeline` is those settings with what a worker loads once for them
(its engine, cache, readers and models).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from PIL import Image

from appliance.config import PdfSettings, PreprocessSettings, ReviewSettings
from appliance.engines import pdf_text, registry
from appliance.engines.barcodes import read_barcodes
from appliance.engines.base import Engine, PageRequest
from appliance.engines.cache import CACHE_PROVENANCE, ResultCache, image_digest
from appliance.engines.messages import Job, PageDone, PageFailed
from appliance.engines.tesseract import TesseractReader, tesseract_languages
from appliance.engines.vision import VisionEngine
from appliance.errors import ApplianceError, EngineError, PagePreempted
from appliance.fields.model import parse_answer, question
from appliance.fields.qr import QR_DOC_TYPES
from appliance.fields.schema import FieldSpec
from appliance.outputs.placement import place_text
from appliance.page import Recognition
from appliance.pipeline.read import ReadStage
from appliance.quality.confidence import Confidence, needs_second_opinion, score_page
from appliance.quality.postprocess import postprocess
from appliance.raster import (ON_DEMAND, PAGE_IMAGE, PageRendering, plausible_dpi,
                              save_page_image)
from appliance.raster.marks import find_marks, with_marks
from appliance.raster.preprocess import preprocess
from appliance.raster.turning import GUESSED, REVIEWER
from appliance.raster.workpage import StepRecord
from appliance.reading.regions import column_regions
from appliance.stopwatch import Stopwatch

log = logging.getLogger(__name__)

# an absolute path in an exception's text (not one inside a URL)
_SERVER_PATH = re.compile(r"(?<![\w.:/])/(?:[^\s'\"/]+/)*[^\s'\"/]+")


@dataclass(frozen=True)
class PageSettings:
    """What the configuration tells the page's stages (``engine_choice.page_settings``)."""

    preprocess: PreprocessSettings = field(default_factory=PreprocessSettings)
    pdf: PdfSettings = field(default_factory=PdfSettings)  # reading a PDF page's own text
    cache_dir: Path | None = None  # the result cache; None: every page is recognised
    # the routing bands (review_below, accept_from) a second opinion may move a page
    # across: a vision reading gets the classic engine's, a classic reading Tesseract's
    # (in these languages); None: no second opinions
    second_opinion_bands: tuple[float, float] | None = None
    second_opinion_languages: str = ReviewSettings.second_opinion_languages
    # a vision reading's words are placed on the classic reading's word boxes
    place_vision_text: bool = True
    page_furniture: str = "separate"
    barcodes: bool = True  # each page's barcodes are read (engines.barcodes)
    selection_marks: bool = True  # each page's check boxes are found (raster.marks)
    # the fields of each document type, which a vision engine is asked for
    field_specs: dict[str, tuple[FieldSpec, ...]] = field(default_factory=dict)


@dataclass
class PagePipeline:
    """The page's stages with what they keep between pages."""

    engine: Engine
    settings: PageSettings = field(default_factory=PageSettings)
    cache: ResultCache | None = None
    read: ReadStage = field(default_factory=ReadStage)
    second_reader: TesseractReader | None = None  # reads classic pages in doubt again
    classify_upside_down: Callable | None = None
    text_boxes: Callable | None = None  # the text detector that checks a page on its side

    @classmethod
    def load(cls, engine: Engine, settings: PageSettings, threads: int = 1) -> PagePipeline:
        """The pipeline a worker runs: its cache, table model, second reader and
        orientation models loaded once, on the worker's ``threads`` cores shared by the
        pages it reads at once; the table model takes them all for a page read alone
        (``engines.base.WideWhenAlone``)."""
        share = max(1, threads // engine.slots)
        pipeline = cls(engine, settings,
                       ResultCache(settings.cache_dir) if settings.cache_dir else None,
                       ReadStage.with_table_model(settings.page_furniture, share, threads))
        if settings.second_opinion_bands is not None:
            languages, problem = tesseract_languages(settings.second_opinion_languages)
            if problem:
                log.warning("classic pages in doubt are read again %s: %s",
                            f"in {languages} only" if languages else "by no one", problem)
            if languages:
                pipeline.second_reader = TesseractReader(languages)
        if settings.preprocess.enabled and settings.preprocess.orientation:
            from appliance.engines.orientation import (  # the worker's import
                TextBoxDirections, UpsideDownClassifier,
            )

            pipeline.classify_upside_down = UpsideDownClassifier(threads=share)
            pipeline.text_boxes = TextBoxDirections(threads=share)
        return pipeline

    def recognise(self, image: Image.Image, request: PageRequest) -> Recognition:
        """The engine's reading of ``image``, read (``pipeline.read``), not cached: the
        quick and second readings around the page's own."""
        return self.read(self.engine.recognize(image, request), image)

    def close(self) -> None:
        """Let go of the engine and the second reader's processes."""
        if self.second_reader is not None:
            self.second_reader.close()
        self.engine.close()


def run_job(pipeline: PagePipeline, job: Job, background: ThreadPoolExecutor,
            cancel: threading.Event | None = None) -> PageDone | PageFailed:
    """One page through every stage, each timed. ``cancel`` set takes the page back:
    before the engine starts it, the page is not read at all; after, the engine stops
    soon (both answer PagePreempted)."""
    engine, settings = pipeline.engine, pipeline.settings
    clock = Stopwatch()
    saving: Future | None = None
    try:
        deadline = time.monotonic() + job.deadline_s
        page = PageRendering(job.original, job.kind, job.page_index, job.dpi, job.max_pixels,
                             job.pdf_password)
        request = PageRequest(doc_type=job.doc_type, engine=job.engine, attempt=job.attempt,
                              deadline=deadline, context=job.context, cancel=cancel,
                              columns=column_regions)
        reader = engine.reader(request)
        verdict = recognition = key = image = None
        if job.kind == "pdf" and job.text_layer != pdf_text.IGNORE:
            with clock.stage("text_layer"):
                page.size  # a PDF pdfium cannot open fails here, with its reason, as OCR would
                verdict, recognition, key = _own_text(pipeline, job, page, request)
        own_text = recognition is not None
        if own_text:
            reader = (pdf_text.NAME, pdf_text.model_id())
            if verdict["turn"]:
                # its text runs sideways or upside down (or a reviewer turned it): its
                # lines come on the page turned, which is turned as much here for the
                # outputs to map back and for review
                with clock.stage("raster"):
                    rendered_image = page.image
                image, steps = preprocess(
                    rendered_image, replace(settings.preprocess, enabled=False),
                    turn_deg=verdict["turn"],
                    turned_by=pdf_text.NAME if job.turn_deg is None else REVIEWER)
                saving = background.submit(save_page_image, image, job.page_image)
            else:
                # the page as rendered, whose image is written only when someone opens
                # it (``review.page_image``)
                steps = []
                recognition = recognition.noted({PAGE_IMAGE: ON_DEMAND})
        else:
            with clock.stage("raster"):
                rendered_image = page.image
            with clock.stage("preprocess"):
                image, steps = preprocess(rendered_image, settings.preprocess,
                                          doc_type=job.doc_type, max_pixels=job.max_pixels,
                                          classify_upside_down=pipeline.classify_upside_down,
                                          text_boxes=pipeline.text_boxes,
                                          resolution_boost=job.resolution_boost,
                                          turn_deg=job.turn_deg)
            # the page as the engine sees it serves review: write it while the engine works
            saving = background.submit(save_page_image, image, job.page_image)
            recognition, key = _recognition(pipeline, image, request, clock)
            if _turned_on_a_guess(steps):
                with clock.stage("as_it_came"):
                    kept = _better_way_up(pipeline, job, rendered_image, request,
                                          (image, steps, recognition, key))
                if kept[0] is not image:  # the page as it came reads better
                    saving.result()
                    saving = background.submit(save_page_image, kept[0], job.page_image)
                image, steps, recognition, key = kept
            if verdict is not None:
                recognition = recognition.noted({"text_layer": verdict})

        def engine_image() -> Image.Image:
            """The image the engine read; a page read from its text rendered only now."""
            return page.image if image is None else image
        if settings.selection_marks:
            # before the reading, which places them among the words of their rows
            with clock.stage("selection_marks"):
                recognition = with_marks(recognition,
                                         find_marks(engine_image(), recognition.lines))
        with clock.stage("read"):
            # a page read from its own text has no table model: it reads the pixels an engine read
            recognition = pipeline.read(recognition, None if own_text else image)
        with clock.stage("postprocess"):
            recognition = postprocess(recognition)
            confidence = score_page(recognition, doc_type=request.doc_type)
        # a vision reading has no word boxes: its words go on the classic reading's
        placing = bool(settings.place_vision_text and not recognition.lines
                       and recognition.text.strip()
                       and registry.entry(engine.name).fallback is not None)
        bands, second = settings.second_opinion_bands, None
        if (bands is not None
                and needs_second_opinion(recognition, confidence, doc_type=request.doc_type,
                                         bands=bands, made_anyway=placing)
                and (read_again := _second_reader(pipeline, request, confidence))):
            with clock.stage("second_opinion"):
                second = read_again(engine_image())
            if second is not None:
                confidence = score_page(recognition, doc_type=request.doc_type,
                                        second_opinion=second)
        if placing:
            # on the second opinion's word boxes, when one was read, after scoring,
            # which they must not change
            with clock.stage("placement"):
                classic = second or pipeline.recognise(
                    engine_image(), replace(request, engine=registry.FALLBACK))
                recognition = place_text(recognition, classic.lines)
        specs = settings.field_specs.get(request.doc_type)
        if (specs and isinstance(engine, VisionEngine) and request.engine != registry.FALLBACK
                and not own_text):
            with clock.stage("fields"):
                recognition = _with_field_answer(engine, engine_image(), recognition, specs,
                                                 request)
        if settings.barcodes:
            with clock.stage("barcodes"):
                recognition = replace(recognition, barcodes=read_barcodes(
                    engine_image(), qr_expected=request.doc_type in QR_DOC_TYPES))
        if key:  # so that deleting the document can delete its cache entries too
            recognition = recognition.noted({CACHE_PROVENANCE: key})
        recognition = recognition.noted({
            "preprocess": [step.to_dict() for step in steps],
            "image_size": list(page.size if image is None else image.size),
            # the page as rendered, which hOCR, ALTO and text layers are placed on
            "rendered": {"size": list(page.size),
                         "dpi": round(page.dpi, 2) if plausible_dpi(page.dpi) else None},
            # where the image was kept depends on the DPI it was rendered at, which the
            # settings may change later: the page finds its image by this one
            "page_image_dpi": job.dpi})
        if saving is not None:
            saving.result()
    except ApplianceError as exc:
        return PageFailed(job.job_id, exc.code, exc.message, exc.retryable, clock.ms)
    except Exception as exc:  # an engine bug must not kill the worker's loop
        log.exception("page failed in engine %s", engine.name)
        return PageFailed(job.job_id, EngineError.code,
                          f"the engine failed on this page ({_described(exc)})",
                          retryable=True, timings_ms=clock.ms)
    finally:
        if saving is not None:
            wait_futures([saving])  # never leave a half-written page image behind a result
    return PageDone(job.job_id, *reader, clock.ms, confidence.score,
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
    pdf = pipeline.settings.pdf
    reader = pdf_text.TextLayerReader(pdf, job.text_layer, pipeline.engine.reader(quick)[1])
    return pdf_text.read_page(page, job.text_layer, pdf,
                              lambda picture: pipeline.recognise(picture, quick),
                              pipeline.cache, reader, request, job.turn_deg)


def _recognition(pipeline: PagePipeline, image: Image.Image, request: PageRequest,
                 clock: Stopwatch) -> tuple[Recognition, str | None]:
    """What the engine finds on ``image``, from the result cache where it holds it (the
    stage ``cache``), else recognised (``inference``) and kept there; with its key."""
    cache, key, recognition = pipeline.cache, None, None
    if cache is not None:
        with clock.stage("cache"):
            key = cache.key(image_digest(image), pipeline.engine, request)
            recognition = cache.get(key)
    if recognition is not None:
        return recognition.flagged("cached"), key
    if request.cancel is not None and request.cancel.is_set():
        raise PagePreempted("taken back before the engine read it")
    with clock.stage("inference"):
        recognition = pipeline.engine.recognize(image, request)
    if key:
        cache.put(key, recognition)
    return recognition, key


def _turned_on_a_guess(steps: list[StepRecord]) -> bool:
    return any(step.step == "orientation" and step.detail.get(GUESSED) for step in steps)


def _better_way_up(pipeline: PagePipeline, job: Job, rendered: Image.Image,
                   request: PageRequest, turned: tuple) -> tuple:
    """A page turned 180 degrees on a guess (``raster.turning``) read as it came too:
    of the two readings, each read (``pipeline.read``) and scored, the better one, with
    its image, preprocessing steps and cache key; on a tie the page as it came, since
    nothing but the guess says to turn it (blurred receipts read as nothing both ways
    were turned). Its provenance keeps both scores (``way_up``)."""
    settings = pipeline.settings.preprocess
    image, steps = preprocess(rendered, replace(settings, orientation=False),
                              doc_type=job.doc_type, max_pixels=job.max_pixels,
                              resolution_boost=job.resolution_boost)
    recognition, key = _recognition(pipeline, image, request, Stopwatch())
    options = [(turned[0], turned[1], pipeline.read(turned[2], turned[0]), turned[3]),
               (image, steps, pipeline.read(recognition, image), key)]
    scores = [score_page(option[2], doc_type=request.doc_type).score for option in options]
    image, steps, recognition, key = options[0 if scores[0] > scores[1] else 1]
    return image, steps, recognition.noted({"way_up": {"turned": round(scores[0], 4),
                                                       "as_it_came": round(scores[1], 4)}}), key


def _second_reader(pipeline: PagePipeline, request: PageRequest, confidence: Confidence
                   ) -> Callable[[Image.Image], Recognition | None] | None:
    """Another engine to read a page in doubt: the classic engine a vision reading
    (with token evidence or none), Tesseract a classic one, in those of its languages
    that read the page's script. None when there is no such engine."""
    if confidence.signals.get("source") in ("tokens", "none"):
        return lambda image: pipeline.recognise(image, replace(request, engine=registry.FALLBACK))
    script = confidence.signals.get("dominant_script")
    if pipeline.second_reader is None or pipeline.second_reader.languages_for(script) is None:
        return None
    return lambda image: pipeline.second_reader.read(image, script)


def _with_field_answer(engine: VisionEngine, image: Image.Image, recognition: Recognition,
                       specs: tuple[FieldSpec, ...], request: PageRequest) -> Recognition:
    """``recognition`` with the vision model's reading of the page's fields, from the
    image and the page's lines (``fields.model``), and the question's version in its
    provenance. The answer is None when the question does not fit the model's context,
    or its answer ran out of tokens or is not of the question's schema: the rules
    extractor then reads every field. The page's own reading stands either way."""
    asked = question(request.doc_type, specs, recognition.lines, image.width, image.height)
    recognition, answer = recognition.noted({"fields_question": asked.version}), None
    try:
        answer = engine.ask(image, asked, request)
    except EngineError as exc:
        log.warning("the vision model could not answer %s (%s)", asked.version, exc.message)
    if answer is None:
        return recognition
    try:
        return replace(recognition, field_answer=parse_answer(answer, specs))
    except ValueError as exc:
        log.warning("the model's answer to %s is not of its schema (%s)", asked.version, exc)
        return recognition
