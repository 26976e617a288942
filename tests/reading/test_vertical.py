"""Vertical text (appliance.reading.vertical): columns of CJK read top to bottom and
right to left, on hand-made lines and on pages of the Chinese set read by the real
classic engine."""

from __future__ import annotations

import random

import pytest
from PIL import Image

from appliance.engines.base import PageRequest
from appliance.engines.classic import ClassicEngine
from appliance.measure import synthetic_chinese
from appliance.measure.metrics import cer
from appliance.measure.synthetic_sets import PAGE
from appliance.page import Line, is_column
from appliance.pipeline.stages import PagePipeline
from appliance.reading.markdown import in_order, render
from appliance.reading.order import read_order

POEM = ["床前明月光疑是地上霜", "举头望明月低头思故乡", "白日依山尽黄河入海流"]
BODY = ["美人蕉为多年生草本植物，植株高度一般为一点五米。", "花期很长，从初夏一直开到深秋。",
        "它喜欢温暖湿润的气候，不耐寒，怕强风。"]


def column(text: str, x: float, top: float = 100, size: float = 40) -> Line:
    return Line(text=text, box=[x, top, x + size, top + len(text) * size * 1.1], score=0.99)


def across(text: str, y: float, x: float = 100, size: float = 28) -> Line:
    return Line(text=text, box=[x, y, x + len(text) * size, y + size], score=0.99)


def order_of(lines: list[Line]) -> list[str]:
    return [line.text for block in read_order(lines) for line in block.lines]


def test_a_column_is_tall_and_of_a_script_written_so():
    assert is_column(column("床前明月光", 0).box, "床前明月光")
    assert not is_column([0, 0, 40, 400], "ANNUAL REPORT 2026")  # a spine: Latin turned
    assert not is_column([0, 0, 40, 44], "床")  # one character: no direction
    assert not is_column(across("床前明月光", 0).box, "床前明月光")


def test_columns_read_right_to_left_and_each_is_a_line_of_the_text():
    lines = [column(text, x) for text, x in zip(POEM, (300, 420, 540))]  # left to right
    assert order_of(lines) == POEM[::-1]
    page = render(read_order(lines))
    assert page.text == "\n".join(POEM[::-1]) and page.markdown == page.text
    assert {line.role for line in page.lines} == {"text"}


def test_a_headline_set_vertically_right_of_the_body_reads_first():
    headline = column("春风得意马蹄疾", 1100, top=90, size=56)
    body = [across(text, 100 + i * 50) for i, text in enumerate(BODY)]
    assert order_of([*body, headline]) == ["春风得意马蹄疾", *BODY]
    # below the body, it reads after it
    low = column("春风得意马蹄疾", 1100, top=400, size=56)
    assert order_of([*body, low]) == [*BODY, "春风得意马蹄疾"]
    # the headline's length is no print height: the body has no heading
    assert not render(read_order([*body, headline])).markdown.startswith("#")


def test_a_stored_page_read_again_keeps_its_columns_vertical():
    """A reviewer's reading order, or the document's furniture, reads a stored page again
    (``in_order``): a block of columns stays columns, right to left, not rows across."""
    lines = [*(column(text, x) for text, x in zip(POEM, (300, 420, 540))),
             across(BODY[1], 700)]
    page = render(read_order(lines))
    stored = [line.to_dict() for line in page.lines]
    blocks = sorted({line["block"] for line in stored})
    assert in_order(stored, blocks).text == page.text == "\n".join([*POEM[::-1], BODY[1]])
    assert in_order(stored, blocks[::-1]).text == "\n".join([BODY[1], *POEM[::-1]])


@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


@pytest.mark.parametrize("seed", [0, 5])  # a vertical headline; a classical page
def test_pages_of_vertical_text_read_in_order_with_each_character_placed(engine, seed):
    image, truth = synthetic_chinese.vertical_page(random.Random(seed), PAGE)
    reading = PagePipeline(engine).recognise(image, PageRequest())

    def joined(text: str) -> str:
        return "".join(text.split())

    assert cer(joined("\n".join(truth)), joined(reading.text)) <= 0.03, reading.text
    assert reading.text.splitlines()[0] == truth[0]
    first = next(line for line in reading.lines if is_column(line.box, line.text))
    assert [word.text for word in first.words] == list(first.text)
    tops = [word.box[1] for word in first.words]
    assert tops == sorted(tops) and len(set(tops)) == len(tops)  # one under the other
    for word in first.words:  # each on its own character's ink
        x0, y0, x1, y1 = (round(v) for v in word.box)
        ink = Image.Image.getextrema(image.convert("L").crop((x0, y0, x1, y1)))
        assert ink[0] < 128, (word, ink)
