"""Tesseract as the classic engine's second reader: the real ``tesseract`` command
(Debian's tesseract-ocr, installed by `make test`) and the real RapidOCR worker path."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

import pytest

from appliance.engines.classic import ClassicEngine
from appliance.engines.messages import Job, PageDone
from appliance.engines.tesseract import TesseractReader, tesseract_problem
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from tests.fixtures.documents import render_text_page, text_similarity, write_png

LINES = ["Invoice number 4711", "Delivery date March 3 2024", "Total amount due 129.50 EUR",
         "Thank you for your order"]


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


def test_reads_a_page():
    reading = TesseractReader("eng").read(render_text_page(LINES))
    assert text_similarity(reading.text, "\n".join(LINES)) > 0.9, reading.text


def test_a_missing_language_is_named_with_its_package(caplog):
    assert tesseract_problem("eng") is None
    problem = tesseract_problem("eng+xyz")
    assert "xyz" in problem and "apt-get install tesseract-ocr-xyz" in problem
    # a reader asked for it anyway fails on the page without raising: no second opinion
    with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
        assert TesseractReader("xyz").read(render_text_page(LINES)) is None
    assert "tesseract second opinion failed" in caplog.text


def _job(tmp_path, lines):
    original = write_png(tmp_path / "page.png", lines)
    return Job(job_id=1, original=original, kind="png", page_index=0, dpi=150, max_pixels=40_000_000,
               page_image=tmp_path / "seen.png", doc_type="invoice", engine=None, attempt=1,
               pdf_password=None, deadline_s=60)


def _run(pipeline, job):
    with ThreadPoolExecutor(1) as background:
        result = run_job(pipeline, job, background)
    assert isinstance(result, PageDone), result
    return result


def test_a_classic_page_in_doubt_is_read_again(tmp_path, engine):
    alone = _run(PagePipeline(engine), _job(tmp_path, LINES))
    # routing bands that Tesseract's agreement could carry the page across: the worker
    # asks it and records both the agreement and what the second reading cost
    doubt = (alone.confidence + 0.001, 1.0)
    pipeline = PagePipeline(engine, PageSettings(second_opinion_bands=doubt),
                            second_reader=TesseractReader("eng"))
    result = _run(pipeline, _job(tmp_path, LINES))
    assert result.signals["agreement"] > 0.9 and result.confidence > alone.confidence
    assert result.timings_ms["second_opinion_ms"] > 0
    # a page at auto-accept is not read again, nor one no agreement could move into
    # another band, nor any page with the check off
    for bands in ((0.0, 0.0), (0.0, 1.0), None):
        sure = _run(PagePipeline(engine, PageSettings(second_opinion_bands=bands),
                                 second_reader=TesseractReader("eng")),
                    _job(tmp_path, LINES))
        assert sure.signals["agreement"] is None
        assert "second_opinion_ms" not in sure.timings_ms


def test_without_tesseract_the_page_keeps_its_own_confidence(tmp_path, engine):
    alone = _run(PagePipeline(engine), _job(tmp_path, LINES))
    doubt = (alone.confidence + 0.001, 1.0)
    result = _run(PagePipeline(engine, PageSettings(second_opinion_bands=doubt)),
                  _job(tmp_path, LINES))
    assert result.signals["agreement"] is None
    assert result.confidence == alone.confidence
