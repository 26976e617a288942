"""Tesseract as the classic engine's second reader: the real ``tesseract`` command
(Debian's tesseract-ocr, installed by `make test`) and the real RapidOCR worker path."""

from __future__ import annotations

import io
import logging
import signal
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import psutil
import pytest
from PIL import Image, ImageDraw, ImageFont

from appliance.engines.classic import ClassicEngine
from appliance.engines.messages import Job, PageDone
from appliance.engines.tesseract import (
    COMMAND, SCRIPT_OF_LANGUAGE, TesseractReader, languages_by_script, tesseract_languages,
)
from appliance.engines.tesseract_process import PAGE_SEGMENTATION
from appliance.measure import born_digital
from appliance.measure.synthetic_chinese import PROSE as PROSE_ZH
from appliance.pipeline.stages import PagePipeline, PageSettings, run_job
from appliance.quality.text_checks import script_of
from tests.fixtures.documents import render_text_page, text_similarity, write_png

LINES = ["Invoice number 4711", "Delivery date March 3 2024", "Total amount due 129.50 EUR",
         "Thank you for your order"]
LINES_ZH = [PROSE_ZH[i:i + 24] for i in range(0, 96, 24)]  # four rows of 24 characters


def chinese_page(lines: list[str] = LINES_ZH) -> Image.Image:
    page = Image.new("RGB", (1240, 900), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(born_digital.CJK, 36)
    for number, line in enumerate(lines):
        draw.text((80, 80 + 70 * number), line, fill="black", font=font)
    return page


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


def _tesseract_processes() -> list[psutil.Process]:
    return [child for child in psutil.Process().children()
            if any(part.endswith("tesseract_process.py") for part in child.cmdline())]


@pytest.fixture
def reader():
    reader = TesseractReader("eng")
    yield reader
    reader.close()
    assert not _tesseract_processes()  # none outlives its reader


def test_reads_a_page_with_the_languages_loaded_once(reader):
    reading = reader.read(render_text_page(LINES))
    assert text_similarity(reading.text, "\n".join(LINES)) > 0.9, reading.text
    [process] = _tesseract_processes()
    assert reader.read(render_text_page(LINES)).text == reading.text
    assert _tesseract_processes() == [process]  # the next page went to the same one


def test_the_same_text_as_the_tesseract_command(reader):
    page = render_text_page(LINES + ["Ref. A-17/3, 4 items @ 12.50"]).rotate(1, fillcolor=255)
    buffer = io.BytesIO()
    page.convert("L").save(buffer, format="PNG")
    command = subprocess.run([COMMAND, "stdin", "stdout", "-l", "eng",
                              "--psm", str(PAGE_SEGMENTATION)],
                             input=buffer.getvalue(), capture_output=True, check=True)
    assert reader.read(page).text == command.stdout.decode().strip()


def test_pages_read_at_once_each_get_a_process(reader):
    with ThreadPoolExecutor(2) as pages:
        readings = list(pages.map(reader.read, [render_text_page(LINES)] * 2))
    assert readings[0].text == readings[1].text
    assert len(_tesseract_processes()) == 2  # both kept for the next pages


def test_a_crash_costs_that_page_its_second_opinion_only(reader, caplog):
    reader.read(render_text_page(LINES))
    [process] = _tesseract_processes()
    busy = render_text_page(LINES * 12, height=4000)  # long enough to be killed mid-page
    threading.Timer(0.2, process.send_signal, (signal.SIGSEGV,)).start()
    with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
        assert reader.read(busy) is None
    assert "tesseract second opinion failed: it ended with signal 11" in caplog.text
    assert "Invoice number" in reader.read(render_text_page(LINES)).text  # a new one
    assert process not in _tesseract_processes()


def test_one_that_cannot_start_costs_that_page_its_second_opinion(reader, caplog,
                                                                  monkeypatch):
    with monkeypatch.context() as patched:  # an interpreter that is not there (upgraded away)
        patched.setattr(sys, "executable", "/nonexistent/python3")
        with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
            assert reader.read(render_text_page(LINES)) is None
    assert "tesseract second opinion failed: it did not start" in caplog.text
    assert "Invoice number" in reader.read(render_text_page(LINES)).text


def test_one_that_ended_while_idle_is_replaced_unseen(reader, caplog):
    reader.read(render_text_page(LINES))
    [process] = _tesseract_processes()
    process.kill()
    process.wait(10)
    with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
        assert "Invoice number" in reader.read(render_text_page(LINES)).text
    assert not caplog.records


def test_a_hung_reading_is_given_up_and_its_process_killed(caplog):
    reader = TesseractReader("eng", timeout_s=1)
    try:
        reader.read(render_text_page(LINES))
        [process] = _tesseract_processes()
        process.suspend()  # SIGSTOP: alive, never answers
        with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
            assert reader.read(render_text_page(LINES)) is None  # too large to be taken
            assert reader.read(Image.new("L", (40, 20), 255)) is not None  # a new one
            [process] = _tesseract_processes()
            process.suspend()
            assert reader.read(Image.new("L", (40, 20), 255)) is None  # taken, not read
        assert "it took no page in 1 s" in caplog.text and "no answer in 1 s" in caplog.text
        assert not _tesseract_processes()  # both killed
    finally:
        reader.close()


def _languages_of(process: psutil.Process) -> str:
    return process.cmdline()[-1]  # tesseract_process.py FD LANGUAGES


def test_a_page_is_read_again_in_the_languages_of_its_script():
    reader = TesseractReader("eng+chi_sim")
    try:
        chinese = reader.read(chinese_page(), "CJK")
        assert text_similarity(chinese.text, "".join(LINES_ZH)) > 0.9, chinese.text
        assert [_languages_of(p) for p in _tesseract_processes()] == ["chi_sim"]
        latin = reader.read(render_text_page(LINES), "LATIN")
        assert text_similarity(latin.text, "\n".join(LINES)) > 0.9, latin.text
        assert sorted(map(_languages_of, _tesseract_processes())) == ["chi_sim", "eng"]
        # a script none of its languages reads: no reading, no process started for it
        assert reader.languages_for("CYRILLIC") is None
        assert reader.read(render_text_page(LINES), "CYRILLIC") is None
        assert len(_tesseract_processes()) == 2
        # a page without letters: its figures in the quickest languages that read them
        assert reader.languages_for(None) == "eng"
        assert TesseractReader("chi_sim").languages_for(None) == "chi_sim"
    finally:
        reader.close()
    assert not _tesseract_processes()


# a letter of each script the languages are listed under (as the page's text names it)
_LETTERS = {"CJK": "中", "HANGUL": "한", "CYRILLIC": "д", "ARABIC": "ب", "DEVANAGARI": "क",
            "BENGALI": "ক", "ETHIOPIC": "ሀ", "GREEK": "α", "HEBREW": "א", "TIBETAN": "ཀ",
            "GEORGIAN": "ა", "ARMENIAN": "Ա", "CANADIAN": "ᐁ", "CHEROKEE": "Ꭰ", "GUJARATI": "ગ",
            "GURMUKHI": "ਕ", "KANNADA": "ಕ", "KHMER": "ក", "LAO": "ກ", "MALAYALAM": "മ",
            "MYANMAR": "က", "ORIYA": "ଓ", "SINHALA": "ස", "SYRIAC": "ܐ", "TAMIL": "த",
            "TELUGU": "త", "THAANA": "ހ", "THAI": "ก"}


def test_each_language_is_listed_under_a_script_a_page_can_have():
    assert set(SCRIPT_OF_LANGUAGE.values()) == set(_LETTERS)
    for script, letter in _LETTERS.items():
        assert script_of(letter) == script
    assert script_of("か") == SCRIPT_OF_LANGUAGE["jpn"]  # kana with the Chinese characters
    assert languages_by_script("eng+jpn+deu+chi_sim") == {"LATIN": "eng+deu",
                                                           "CJK": "jpn+chi_sim"}
    assert TesseractReader("eng+deu+jpn").languages_for("LATIN") == "eng+deu"


def test_a_missing_language_is_named_with_its_package(caplog):
    assert tesseract_languages("eng") == ("eng", None)
    installed, problem = tesseract_languages("xyz+eng")
    assert "xyz" in problem and "apt-get install tesseract-ocr-xyz" in problem
    assert installed == "eng"  # what can still be read
    # a reader asked for it anyway fails on the page without raising: no second opinion
    reader = TesseractReader("xyz")
    with caplog.at_level(logging.WARNING, logger="appliance.engines.tesseract"):
        assert reader.read(render_text_page(LINES)) is None
    assert "tesseract second opinion failed: tesseract could not load xyz" in caplog.text
    assert not _tesseract_processes()


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


def test_a_chinese_page_in_doubt_is_read_again_in_chinese(tmp_path, engine):
    original = tmp_path / "zh.png"
    chinese_page().save(original)
    job = replace(_job(tmp_path, LINES), original=original)
    alone = _run(PagePipeline(engine), job)
    doubt = (alone.confidence + 0.001, 1.0)
    result = _run(PagePipeline(engine, PageSettings(second_opinion_bands=doubt),
                               second_reader=TesseractReader("eng+chi_sim")), job)
    assert result.signals["dominant_script"] == "CJK"
    assert result.signals["agreement"] > 0.9 and result.confidence > alone.confidence
    # in English only, nothing can confirm it: it is not read again, nor timed
    english = _run(PagePipeline(engine, PageSettings(second_opinion_bands=doubt),
                                second_reader=TesseractReader("eng")), job)
    assert english.signals["agreement"] is None and english.confidence == alone.confidence
    assert "second_opinion_ms" not in english.timings_ms


def test_without_tesseract_the_page_keeps_its_own_confidence(tmp_path, engine):
    alone = _run(PagePipeline(engine), _job(tmp_path, LINES))
    doubt = (alone.confidence + 0.001, 1.0)
    result = _run(PagePipeline(engine, PageSettings(second_opinion_bands=doubt)),
                  _job(tmp_path, LINES))
    assert result.signals["agreement"] is None
    assert result.confidence == alone.confidence
