from __future__ import annotations

import pytest
from PIL import Image

from appliance.engines.base import Line, PageRequest
from appliance.engines.classic import (
    ClassicEngine,
    bands_to_markdown,
    bands_to_text,
    reading_order,
)
from appliance.quality.markdown import escape_markdown
from tests.fixtures.documents import render_text_page, text_similarity

PAGE_LINES = [
    "Invoice number 4711",
    "Delivery date March 3 2024",
    "Total amount due 129.50 EUR",
    "Thank you for your order",
]


def _line(text: str, x0: float, y0: float, x1: float, y1: float) -> Line:
    return Line(text=text, box=[x0, y0, x1, y1], score=0.9)


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


# --- reading order and formatting: pure functions, no RapidOCR ---


def test_reading_order_bands_top_to_bottom_left_to_right():
    right = _line("right", 600, 102, 900, 140)
    left = _line("left", 100, 100, 400, 138)
    below = _line("below", 100, 200, 400, 238)
    above = _line("title", 300, 20, 700, 60)
    assert reading_order([below, right, left, above]) == [[above], [left, right], [below]]


def test_reading_order_tolerates_skew_but_not_small_overlaps():
    # 10 px of drift on 40 px lines stays one band; 30 px (only 10 px overlap) does not.
    drifted = [_line("a", 100, 100, 400, 140), _line("b", 450, 110, 800, 150)]
    assert len(reading_order(drifted)) == 1
    stacked = [_line("a", 100, 100, 400, 140), _line("b", 450, 130, 800, 170)]
    assert [[line.text for line in band] for band in reading_order(stacked)] == [["a"], ["b"]]


def test_reading_order_empty():
    assert reading_order([]) == []


def test_text_and_paragraphs():
    bands = reading_order(
        [
            _line("First", 100, 100, 300, 140),
            _line("line", 320, 100, 420, 140),
            _line("second line", 100, 160, 400, 200),  # 20 px gap: same paragraph
            _line("new paragraph", 100, 300, 400, 340),  # 100 px gap > 1.2 x 40 px
        ]
    )
    assert bands_to_text(bands) == "First line\nsecond line\nnew paragraph"
    assert bands_to_markdown(bands) == "First line\nsecond line\n\nnew paragraph"


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


def test_markdown_escapes_every_band():
    bands = reading_order(
        [_line("<script>alert(1)</script>", 100, 100, 500, 140), _line("# not a heading", 100, 160, 500, 200)]
    )
    assert bands_to_markdown(bands) == "\\<script\\>alert(1)\\</script\\>\n\\# not a heading"
    assert bands_to_text(bands) == "<script>alert(1)</script>\n# not a heading"


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
