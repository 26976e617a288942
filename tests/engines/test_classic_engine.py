from __future__ import annotations

import copy
import random
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from rapidocr.cal_rec_boxes import CalRecBoxes

from appliance.engines.base import PageRequest
from appliance.engines.classic import REC_MIN_WIDTH, ClassicEngine, character_quads
from appliance.measure import synthetic_chinese
from appliance.measure.metrics import cer, order_free_cer
from appliance.measure.synthetic_sets import FONTS
from appliance.page import VERTICAL_ASPECT
from appliance.pipeline.stages import PagePipeline
from appliance.pipeline.read import ReadStage
from appliance.quality.confidence import score_page
from appliance.quality.markdown import escape_markdown
from appliance.raster.synthetic import sample_lines
from tests.fixtures.documents import render_text_page, text_similarity

PAGE_LINES = [
    "Invoice number 4711",
    "Delivery date March 3 2024",
    "Total amount due 129.50 EUR",
    "Thank you for your order",
]


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def pipeline(engine):
    """The classic engine as a worker reads with it: what it finds read by the read stage
    (with the table model)."""
    return PagePipeline(engine, read=ReadStage.with_table_model(threads=2))


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("<script>alert(1)</script>", r"\<script\>alert(1)\</script\>"),
        ("# not a heading", r"\# not a heading"),
        ("- not a bullet", r"\- not a bullet"),
        ("+ not a bullet", r"\+ not a bullet"),
        ("1. not a list", r"1\. not a list"),
        ("12) not a list", r"12\) not a list"),
        ("=====", r"\====="),
        (r"*bold* _em_ `code` [link](x) a|b ~~s~~ C:\dir", r"\*bold\* \_em\_ \`code\` \[link\](x) a\|b \~\~s\~\~ C:\\dir"),
        ("Total 1.5 - 2 # 3", "Total 1.5 - 2 # 3"),
    ],
)
def test_escape_markdown(raw, escaped):
    assert escape_markdown(raw) == escaped


# --- the real RapidOCR ---


def test_recognizes_rendered_page_in_order(pipeline):
    page = render_text_page(PAGE_LINES)
    result = pipeline.recognise(page, PageRequest())
    expected = "\n".join(PAGE_LINES)
    assert text_similarity(result.text, expected) > 0.8, result.text
    # Each recognised line matches the expected line it is closest to, in page order.
    order = [max(range(len(PAGE_LINES)), key=lambda i: text_similarity(line.text, PAGE_LINES[i])) for line in result.lines]
    assert order == sorted(order) and set(order) == set(range(len(PAGE_LINES))), result.lines
    for line in result.lines:
        x0, y0, x1, y1 = line.box
        assert 0 <= x0 < x1 <= page.width and 0 <= y0 < y1 <= page.height
        assert 0.0 < line.score <= 1.0
    assert result.markdown.replace("\n\n", "\n") == result.text  # nothing here needs escaping


def test_empty_page_gives_empty_result(pipeline):
    result = pipeline.recognise(Image.new("RGB", (800, 600), "white"), PageRequest())
    assert (result.text, result.markdown, result.lines) == ("", "", [])


def test_model_id_names_version_and_models(engine):
    assert engine.name == "classic"
    assert engine.model_id.startswith("rapidocr-3.")
    assert "det" in engine.model_id


def test_a_short_line_is_padded_less_than_rapidocr_pads_it(engine, monkeypatch):
    """A label goes to the recogniser REC_MIN_WIDTH wide, not padded to RapidOCR's
    320 px; the long line at its own width; both are read."""
    session = engine._ocr._load_rec_model().session.session  # loaded at the first page
    widths = []

    def recorded(outputs, feed, *args, _run=session.run, **kwargs):
        widths.extend(array.shape[-1] for array in feed.values())
        return _run(outputs, feed, *args, **kwargs)
    monkeypatch.setattr(session, "run", recorded)
    printed = ["Total", "Delivery to the warehouse at the north gate on March 3 2024"]
    lines = engine.recognize(render_text_page(printed, font_size=28), PageRequest()).lines
    assert [line.text for line in lines] == printed
    assert sorted(widths)[0] == REC_MIN_WIDTH and sorted(widths)[1] > 320


def test_character_boxes_are_those_rapidocr_computes(engine, monkeypatch):
    """The engine's per-character boxes (``character_quads``) are RapidOCR's own
    (``CalRecBoxes``) pixel for pixel, on lines across the page and on one printed up
    it; each character keeps its own confidence, the spaces' left out."""
    given = []

    def recorded(crops, quads, found, single, _ours=engine._ocr.cal_rec_boxes):
        given.append((crops, quads.copy(), copy.deepcopy(found)))
        return _ours(crops, quads, found, single)
    monkeypatch.setattr(engine._ocr, "cal_rec_boxes", recorded)
    page = render_text_page(["Invoice number 4711 for the north gate", "Total 129.50 EUR"],
                            font_size=28)
    margin = Image.new("RGB", (700, 60), "white")
    ImageDraw.Draw(margin).text((10, 10), "Downloaded from the archive", fill="black",
                                font=ImageFont.truetype(FONTS[0], 32))
    page.paste(margin.rotate(90, expand=True), (page.width - 80, 40))
    engine.recognize(page, PageRequest())

    [(crops, quads, found)] = given
    up_the_page = [np.ptp(quad[:, 1]) > VERTICAL_ASPECT * np.ptp(quad[:, 0]) for quad in quads]
    assert len(quads) == 3 and sum(up_the_page) == 1
    theirs = CalRecBoxes()(crops, quads.copy(), copy.deepcopy(found), True).word_results
    ours = character_quads(crops, quads.copy(), copy.deepcopy(found)).word_results

    def boxes(line):
        return [(char, np.min(quad, axis=0).tolist(), np.max(quad, axis=0).tolist())
                for char, _conf, quad in line]
    assert [boxes(line) for line in ours] == [boxes(line) for line in theirs]
    for text, info, line in zip(found.txts, found.word_results, ours):
        assert [conf for _char, conf, _quad in line] == [
            conf for ch, conf in zip(text, info.confs) if not ch.isspace()]


def test_dense_page_keeps_every_line(pipeline):
    # Regression: RapidOCR's per-line angle classifier turned upright lines like
    # this first one upside down; the engine runs without it.
    lines = [f"Line {i}: The quick brown fox jumps over the lazy dog {i * 37}" for i in range(24)]
    result = pipeline.recognise(render_text_page(lines, font_size=28), PageRequest())
    assert len(result.lines) == len(lines)
    for got, want in zip(result.lines, lines):
        assert text_similarity(got.text, want) > 0.9, (got.text, want)


def test_columns_of_a_page_scanned_askew_are_read_one_after_the_other(pipeline):
    # Two columns 40 px apart (RapidOCR joins lines across less), the page turned by
    # 1.2 degrees: less than the preprocessor straightens (1.5), enough to leave only
    # 13 px white all the way down when the boxes are taken as they lie. The engine
    # measures the lean from the lines and reads the page as if level.
    page = Image.new("RGB", (1240, 1440), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.load_default(size=24)
    rows = [f"row {i} of the column and some running prose" for i in range(36)]
    right = 60 + round(max(font.getlength(f"left {text}") for text in rows)) + 40
    for i, text in enumerate(rows):
        draw.text((60, 60 + 36 * i), f"left {text}", font=font, fill="black")
        draw.text((right, 60 + 36 * i), f"right {text}", font=font, fill="black")
    result = pipeline.recognise(page.rotate(1.2, resample=Image.BICUBIC, fillcolor="white"),
                                PageRequest(doc_type="report"))
    lines = result.text.splitlines()
    assert len(lines) == 72 and all(line.startswith("left") for line in lines[:36]), lines


def test_a_bullet_the_detector_passes_over_is_read(engine):
    """RapidOCR's detector boxes no dot: a list's bullets were lost (PDF-Extract-Kit's
    watermark.png, Easydict's lists, a FUNSD memo). A solid round dot left of a line
    is read as its bullet; a ticked box (a filled square) and an empty one are not."""
    page = Image.new("RGB", (1000, 520), "white")
    draw = ImageDraw.Draw(page)
    font = ImageFont.truetype(FONTS[0], 28)
    items = ["Annual report for the northern region", "Costs stayed within the plan",
             "The new office opened on time"]
    for row, text in enumerate(items):
        draw.ellipse((100, 62 + 60 * row, 112, 74 + 60 * row), fill="black")
        draw.text((130, 50 + 60 * row), text, fill="black", font=font)
    draw.rectangle((100, 242, 113, 255), fill="black")
    draw.text((130, 230), "Ticked box beside its label", fill="black", font=font)
    draw.rectangle((100, 302, 113, 315), outline="black", width=2)
    draw.text((130, 290), "Empty box beside its label", fill="black", font=font)
    draw.text((130, 350), "A line with nothing before it", fill="black", font=font)
    texts = [line.text for line in engine.recognize(page, PageRequest()).lines]
    # RapidOCR reads a dot its detector happened to box itself ("●Annual ..."): either
    # way each item keeps its bullet, and no box gets one
    assert [(text[0], text[1:].strip()) for text in texts[:3]] == [
        (text[0], item) for text, item in zip(texts, items)]
    assert all(text[0] in "•●" for text in texts[:3])
    assert not any("•" in text for text in texts[3:])


def abstract_over_columns() -> Image.Image:
    """Five lines across the page straight above two columns and five more straight
    under them, at one line pitch: the gutter is crossed by more lines than a title's,
    and the columns neither begin nor end the page (``reading.order._columns_end``),
    so they are read across."""
    page = Image.new("RGB", (1240, 1240), "white")
    draw = ImageDraw.Draw(page)
    font, pitch = ImageFont.load_default(size=26), 44
    for top, seed in ((80, 5), (740, 8)):
        for number, text in enumerate(sample_lines(seed, count=5, words_per_line=13)):
            draw.text((80, top + number * pitch), text, fill="black", font=font)
    for x, seed in ((80, 6), (660, 7)):
        for number, text in enumerate(sample_lines(seed, count=10, words_per_line=4)):
            draw.text((x, 300 + number * pitch), text, fill="black", font=font)
    return page


def test_columns_read_across_put_the_order_in_doubt(pipeline):
    result = pipeline.recognise(abstract_over_columns(), PageRequest(doc_type="report"))
    assert result.flags == ["layout_doubt"]
    assert "running text across a gutter" in result.provenance["layout_doubt"]
    confidence = score_page(result, doc_type="report")
    assert "layout_doubt" in confidence.penalties and confidence.score < 0.75
    clean, _truth = synthetic_chinese.columns_page(random.Random(3), (1240, 1754), columns=2)
    assert pipeline.recognise(clean, PageRequest(doc_type="report")).flags == []


@pytest.mark.parametrize("make", ["two columns", "book spread"])
def test_a_chinese_page_is_read_column_by_column(pipeline, make):
    """RapidOCR reads Chinese well; its lines, which have no spaces between words, used
    to be taken for labels and values and read across the columns."""
    rng = random.Random(3)
    if make == "two columns":
        page, truth = synthetic_chinese.columns_page(rng, (1240, 1754), columns=2)
    else:
        page, truth = synthetic_chinese.book_spread(rng, (1240, 1754))
    # the truth is in page order: each page's header and number where they stand
    keep = replace(pipeline, read=ReadStage("keep"))
    result = keep.recognise(page, PageRequest(doc_type="report"))
    assert order_free_cer(truth, result.text) < 0.02  # the characters are read
    assert cer("\n".join(truth), result.text, ignore_whitespace=True) < 0.02  # in order


def test_a_book_spreads_headers_and_page_numbers_are_read_after_both_pages(pipeline):
    """The default (output.page_furniture = "separate"): each page's running header and
    number are marked, and stand after the body of both pages, not inside it."""
    page, truth = synthetic_chinese.book_spread(random.Random(3), (1240, 1754))
    folios = [text for text in truth if text.isdigit()]
    furniture = [truth[0], folios[0], truth[truth.index(folios[0]) + 1], folios[1]]
    body = [text for text in truth if text not in furniture]
    result = pipeline.recognise(page, PageRequest(doc_type="report"))
    lines = result.text.splitlines()
    assert cer("\n".join(body), "\n".join(lines[:-4]), ignore_whitespace=True) < 0.02
    assert order_free_cer(furniture, "\n".join(lines[-4:])) < 0.05
    roles = [line.role for line in result.lines]
    assert roles.count("page_number") == 2 and roles.count("header") == 2


def test_a_line_printed_up_the_margin_is_read_upright_and_after_the_body(pipeline):
    """A journal's "Downloaded from ..." stamp reads bottom to top up the left margin;
    RapidOCR turns a tall crop a quarter left, which sets it upside down (it read
    "Dow d - a g cty"). The engine reads it turned the other way, and the reading puts
    it with the page's foot, after the body."""
    body = ["The annual report shows that revenue grew", "in every region while costs stayed",
            "close to the plan of last year"]
    page = render_text_page(body)
    stamp = "Downloaded from archive.example.org on July 24, 2024"
    font = ImageFont.truetype(FONTS[0], 26)
    strip = Image.new("RGB", (round(font.getlength(stamp)) + 10, 34), "white")
    ImageDraw.Draw(strip).text((5, 2), stamp, font=font, fill="black")
    page.paste(strip.rotate(90, expand=True), (20, 500))
    result = pipeline.recognise(page, PageRequest(doc_type="report"))
    lines = result.text.splitlines()
    assert text_similarity(lines[-1], stamp) > 0.9, result.text
    assert text_similarity("\n".join(lines[:-1]), "\n".join(body)) > 0.9, result.text
    assert result.lines[-1].role == "footer"
