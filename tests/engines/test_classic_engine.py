from __future__ import annotations

import random

import pytest
from PIL import Image, ImageDraw, ImageFont

from appliance.engines.base import PageRequest
from appliance.engines.classic import ClassicEngine
from appliance.measure import synthetic_chinese
from appliance.measure.metrics import cer, order_free_cer
from appliance.quality.markdown import escape_markdown
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


def test_recognizes_rendered_page_in_order(engine):
    page = render_text_page(PAGE_LINES)
    result = engine.recognize(page, PageRequest())
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


def test_empty_page_gives_empty_result(engine):
    result = engine.recognize(Image.new("RGB", (800, 600), "white"), PageRequest())
    assert (result.text, result.markdown, result.lines) == ("", "", [])


def test_model_id_names_version_and_models(engine):
    assert engine.name == "classic"
    assert engine.model_id.startswith("rapidocr-3.")
    assert "det" in engine.model_id


def test_dense_page_keeps_every_line(engine):
    # Regression: RapidOCR's per-line angle classifier turned upright lines like
    # this first one upside down; the engine runs without it.
    lines = [f"Line {i}: The quick brown fox jumps over the lazy dog {i * 37}" for i in range(24)]
    result = engine.recognize(render_text_page(lines, font_size=28), PageRequest())
    assert len(result.lines) == len(lines)
    for got, want in zip(result.lines, lines):
        assert text_similarity(got.text, want) > 0.9, (got.text, want)


def test_columns_of_a_page_scanned_askew_are_read_one_after_the_other(engine):
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
    result = engine.recognize(page.rotate(1.2, resample=Image.BICUBIC, fillcolor="white"),
                              PageRequest(doc_type="report"))
    lines = result.text.splitlines()
    assert len(lines) == 72 and all(line.startswith("left") for line in lines[:36]), lines


@pytest.mark.parametrize("make", ["two columns", "book spread"])
def test_a_chinese_page_is_read_column_by_column(engine, make):
    """RapidOCR reads Chinese well; its lines, which have no spaces between words, used
    to be taken for labels and values and read across the columns."""
    rng = random.Random(3)
    if make == "two columns":
        page, truth = synthetic_chinese.columns_page(rng, (1240, 1754), columns=2)
    else:
        page, truth = synthetic_chinese.book_spread(rng, (1240, 1754))
    result = engine.recognize(page, PageRequest(doc_type="report"))
    assert order_free_cer(truth, result.text) < 0.02  # the characters are read
    assert cer("\n".join(truth), result.text, ignore_whitespace=True) < 0.02  # in order
