"""Page furniture (appliance.reading.furniture): running headers, footers and page
numbers found from line boxes, marked with their role, and placed in the text as
``output.page_furniture`` says. Hand-made lines, no OCR; the effect on real pages is in
the README."""

from __future__ import annotations

import pytest

from appliance.reading.furniture import is_page_number
from appliance.reading.markdown import FURNITURE_HEADING, in_order, render
from appliance.reading.order import read_order
from tests.reading.test_reading import PROSE, ZH, column, line


def report_page() -> dict:
    """A typeset page: a running header, two columns of prose, a footer with the page
    number beside it."""
    return {
        "header": line("Quarterly review, northern region", 100, 30, 560),
        "left": column(100, 120, [f"left {t}" for t in PROSE]),
        "right": column(560, 120, [f"right {t}" for t in PROSE]),
        "footer": line("ACME Holdings annual report", 100, 600, 500),
        "number": line("7", 900, 600, 915),
    }


def lines_of(page: dict) -> list:
    return [item for value in page.values()
            for item in (value if isinstance(value, list) else [value])]


def test_a_running_header_footer_and_page_number_are_marked_and_read_after_the_body():
    page = report_page()
    result = render(read_order(lines_of(page)[::-1]), "separate")
    body = [*(l.text for l in page["left"]), *(l.text for l in page["right"])]
    furniture = [page["header"].text, f'{page["footer"].text} {page["number"].text}']
    assert result.text.splitlines() == body + furniture
    markdown = result.markdown.splitlines()
    assert markdown[markdown.index(FURNITURE_HEADING) + 2:] == furniture
    assert all(text not in "\n".join(markdown[:markdown.index(FURNITURE_HEADING)])
               for text in furniture)
    roles = {l.text: l.role for l in result.lines}
    assert (roles[page["header"].text], roles[page["footer"].text], roles["7"]) == (
        "header", "footer", "page_number")
    assert {roles[text] for text in body} == {"text"}
    # the JSON's blocks: the furniture's after the body's, in reading order
    assert [l.block for l in result.lines] == sorted(l.block for l in result.lines)


def test_keep_leaves_the_furniture_where_it_stands_and_drop_leaves_it_out():
    page = report_page()
    body = [*(l.text for l in page["left"]), *(l.text for l in page["right"])]
    kept = render(read_order(lines_of(page)), "keep")
    assert kept.text.splitlines() == [page["header"].text, *body, "ACME Holdings annual report 7"]
    assert FURNITURE_HEADING not in kept.markdown
    dropped = render(read_order(lines_of(page)), "drop")
    assert dropped.text.splitlines() == body
    assert "ACME" not in dropped.markdown and "Quarterly" not in dropped.markdown
    # the lines stay, with their roles, for the JSON, hOCR and ALTO
    assert {l.text: l.role for l in dropped.lines}["7"] == "page_number"


def test_a_form_keeps_its_first_and_last_rows_and_gives_up_only_its_page_number():
    """A form has no running text: its title and its last line are content."""
    form = [line("Supplier registration form", 100, 30, 500),
            *[line(f"Field {i}:", 100, 120 + 50 * i, 250) for i in range(6)],
            *[line(f"value {i}", 400, 120 + 50 * i, 520) for i in range(6)],
            line("Signed for the supplier", 100, 600, 400),
            line("Page 1 of 2", 800, 700, 900)]
    roles = {l.text: l.role for l in render(read_order(form), "separate").lines}
    assert roles.pop("Page 1 of 2") == "page_number"
    assert set(roles.values()) == {"text"}


def test_a_title_is_no_running_header():
    """Print taller than the body's by the heading ratio, over a typeset page."""
    title = line("Annual report", 100, 20, 600, h=70)
    body = column(100, 160, [f"{t} and more" for t in PROSE + PROSE])
    result = render(read_order([title, *body]), "separate")
    assert result.text.splitlines()[0] == title.text
    assert {l.role for l in result.lines} == {"heading", "text"}


def test_chinese_furniture_and_a_book_spread_each_page_its_own():
    """Two pages side by side: each page's header (in print 0.8 times the body's, 17
    px a character against 21) and number are its furniture, and both pages' bodies
    come before all of it."""
    pages = []
    for number, x in enumerate((80, 1000)):
        pages.append({
            "header": line(*(("企业档案管理实务", x, 30, x + 136),
                             ("第三章 档案的整理与保管", x, 30, x + 175))[number]),
            "body": column(x, 110, [f"{'左右'[number]}{t}" for t in ZH + ZH[:5]]),
            "number": line(f"第 {170 + number} 页", x + 150, 680, x + 250),
        })
    result = render(read_order([l for page in pages for l in lines_of(page)][::-1]), "separate")
    assert result.text.splitlines() == [
        *(l.text for page in pages for l in page["body"]),
        pages[0]["header"].text, pages[0]["number"].text,
        pages[1]["header"].text, pages[1]["number"].text]
    roles = {l.text: l.role for l in result.lines}
    assert roles["第 170 页"] == roles["第 171 页"] == "page_number"
    assert roles["企业档案管理实务"] == "header"


@pytest.mark.parametrize("title, width", [
    ("比特币：一种点对点电子货币系统", 410),  # 1.3 times the body's characters
    ("今天我把超市老板cpu干烧了", 270),  # 1.1 times
])
def test_a_chinese_title_over_its_page_is_no_running_header(title, width):
    """Easydict's pages: a paper's title and a post's, alone at the top of a typeset
    page, set apart by white, boxed no taller than its lines (1.11 to 1.22 times:
    under a title's HEADING_RATIO), went under "## Page furniture". Chinese print is
    measured by its characters' width: a title's are the body's or wider, a running
    header's narrower (0.78 to 0.85 on the built pages)."""
    heading = line(title, 300, 30, 300 + width)
    body = column(100, 140, [f"左{t}" for t in ZH + ZH[:6]])
    result = render(read_order([heading, *body]), "separate")
    assert {l.text: l.role for l in result.lines}[title] != "header"
    assert result.text.splitlines()[0] == title


@pytest.mark.parametrize("width, role", [(200, "header"), (290, "text")])
def test_a_chinese_running_header_numbered_at_its_outer_end_in_the_body_s_print(width, role):
    """A Chinese book (MinerU's small_ocr.pdf): "12 | 第一篇 商品和货币" over each page,
    close over its text, its characters letterspaced as wide as the body's (0.94 to
    0.98 of them): the page number at its outer end makes it furniture, as a Latin row
    in print as tall as the body's is. Characters 1.3 times the body's beside the
    number are a title's."""
    number = line("12", 100, 30, 130)
    title = line("第一篇 商品和货币", 400, 30, 400 + width)
    body = column(100, 80, [f"左{t}" for t in ZH + ZH[:6]])
    roles = {l.text: l.role for l in render(read_order([number, title, *body]), "separate").lines}
    assert roles[title.text] == role
    assert roles[number.text] == ("page_number" if role == "header" else "text")


@pytest.mark.parametrize("height, role", [(24, "header"), (30, "text")])
def test_a_journal_s_long_running_header_numbered_at_its_outer_end(height, role):
    """A journal's page (MinerU's demo1.pdf): "254 | P.N.J. Lane et al. / Journal of
    Hydrology 310 (2005) 253–265", eleven words in print 0.8 of the body's, over two
    columns. Its words made it running text; in print smaller than the body's, beside
    the page number, it is the running header. In the body's print, so many words are
    a line of text beside a number (a numbered clause)."""
    number = line("254", 100, 30, 130, h=height)
    head = line("P.N.J. Lane et al. / Journal of Hydrology 310 (2005) 253-265", 300, 30, 860,
                h=height)
    left = column(100, 100, [f"left {t}" for t in PROSE])
    right = column(560, 100, [f"right {t}" for t in PROSE])
    roles = {l.text: l.role for l in render(read_order([number, head, *left, *right]),
                                            "separate").lines}
    assert roles[head.text] == role


def open_spread() -> list[dict]:
    """A Chinese book spread as books set it: lines 0.75 line heights apart, and a
    running footer with the page number at its outer end ("44 | 书名", "章名 | 45")."""
    pages = []
    for number, x in enumerate((80, 1000)):
        # white of 0.67 or 0.9 line heights under a line (OCR's boxes vary):
        # at SECTION_GAP alone the page fell into sections of two to five lines
        tops = [40.0]
        for i in range(13):
            tops.append(tops[-1] + 30 + (27 if i in (1, 3, 8, 11) else 20))
        body = [line(f"{'左右'[number]}{t}", x, top, x + 380)
                for top, t in zip(tops, ZH + ZH[:6])]
        foot = tops[-1] + 30 + 36  # 1.2 line heights under the last line, no more
        # in smaller print than the body's: 17 px a character against 21
        footer = [line("44", x, foot, x + 30, h=36), line("中西比较美术学", x + 60, foot, x + 180)]
        if number:
            footer = [line("第二章 中西比较美术学本体论", x + 40, foot, x + 265),
                      line("45", x + 360, foot, x + 390, h=36)]
        pages.append({"body": body, "footer": footer})
    return pages


def test_a_numbered_running_footer_of_a_spread_with_open_leading():
    """Each page read whole (at 0.7 line heights of white every line was a section of
    its own, and the spread was read line by line across its spine), and each page's
    footer is furniture: the page number at its outer end, its title beside it."""
    pages = open_spread()
    result = render(read_order([l for page in pages for l in lines_of(page)][::-1]), "separate")
    assert result.text.splitlines() == [
        *(l.text for page in pages for l in page["body"]),
        "44 中西比较美术学", "第二章 中西比较美术学本体论 45"]
    roles = {l.text: l.role for l in result.lines}
    assert roles["44"] == roles["45"] == "page_number"
    assert roles["中西比较美术学"] == roles["第二章 中西比较美术学本体论"] == "footer"


def test_a_transcripts_numbered_lines_are_no_running_header():
    """Every row of a transcript starts with its line number: the first row under the
    page number is testimony, not a header numbered as pages are."""
    page_number = line("177", 100, 20, 140)
    answers = ["A. That was the basement.", *(f"{t} said the witness" for t in PROSE + PROSE)]
    testimony = [[line(str(i), 60, 30 + 40 * i, 80), line(text, 120, 30 + 40 * i, 700)]
                 for i, text in enumerate(answers, 1)]
    lines = [page_number, *(l for row in testimony for l in row)]
    roles = {l.text: l.role for l in render(read_order(lines), "separate").lines}
    assert roles.pop("177") == "page_number"
    assert not set(roles.values()) & {"header", "footer", "page_number"}


def test_captions_under_a_picture_at_the_top_of_a_page_are_no_header():
    """A book page with a photograph at its top (no text: the lines do not show it):
    the captions under it are the first rows, in small print, set apart from the
    body, and end 0.29 down the page. Where the page's height is known they are not
    its margin; a running header there still is."""
    captions = [line("(a) 初始状态", 260, 560, 400), line("(b) 最终状态", 860, 560, 1000),
                line("图 3 水松生长情况对比", 560, 620, 800)]
    body = [line(t + t, 100, 700 + 40 * i, 1100) for i, t in enumerate(ZH + ZH[:6])]
    page = [*captions, *body]
    roles = {l.text: l.role for l in render(read_order(page, page_height=2070), "separate").lines}
    assert not {roles[c.text] for c in captions} & {"header", "footer", "page_number"}
    assert render(read_order(page, page_height=2070)).text.splitlines()[:2] == [
        "(a) 初始状态 (b) 最终状态", "图 3 水松生长情况对比"]
    header = line("园林植物栽培试验", 100, 150, 278)  # 22 px a character, the body's 28
    roles = {l.text: l.role for l in render(read_order([header, *body], page_height=2070)).lines}
    assert roles[header.text] == "header"


FIGURE_AT_THE_FOOT = {
    "chinese": (["输入层", "卷积层", "池化层", "输出层"], "图1 网络结构示意图", ZH),
    "latin": (["Input", "Convolution", "Pooling", "Output"],
              "Figure 1. The network's layers", PROSE),
}


@pytest.mark.parametrize("script", ["chinese", "latin"])
def test_a_figures_labels_and_caption_at_the_foot_of_a_page_are_no_footer(script):
    """Issue 53 item 8: a figure at the foot of a journal's page (a picture: the lines do
    not show it), its labels in a row and its caption under it, in small print and set
    apart from the body by the picture's white, went under "## Page furniture" as its
    footer (and "drop" left them out). A caption and the rows over it are the figure's;
    the page number under them is still furniture."""
    labels, caption, texts = FIGURE_AT_THE_FOOT[script]
    body = [line(text, 100, 150 + 40 * index, 1100) for index, text in enumerate(texts * 2)]
    figure = [line(label, 200 + 240 * index, 1400, h=22) for index, label in enumerate(labels)]
    figure.append(line(caption, 450, 1440, h=24))
    number = line("· 61 ·", 480, 1560, h=22)
    for page in ([*body, *figure], [*body, *figure, number]):
        result = render(read_order(page, page_height=1650), "drop")
        assert result.text.splitlines()[-2:] == [" ".join(labels), caption]
        roles = {l.text: l.role for l in result.lines}
        assert {roles[l.text] for l in figure} == {"text"}
    assert roles[number.text] == "page_number"


@pytest.mark.parametrize("text", ["7", "- 12 -", "Page 3 of 10", "3 / 10", "iv", "第 3 页",
                                  "第3页 共10页", "PAGE 1 of 4", "· 60 ·", "- 60·", "•60•"])
def test_page_numbers_as_pages_are_numbered(text):
    assert is_page_number(text)


@pytest.mark.parametrize("text", ["0", "C", "x", "4/79", "2963", "Total", "12.50", "[149]"])
def test_a_forms_codes_ticks_dates_and_amounts_are_no_page_numbers(text):
    assert not is_page_number(text)


@pytest.mark.parametrize("number", ["· 60 ·", "- 60·"])
def test_a_chinese_journals_page_number_close_under_its_text_is_no_list_item(number):
    """Issue 53 item 8: a Chinese journal numbers its pages "· 60 ·" (OCR read it "- 60·"),
    and the number close under the text was read as a list item, "- 60·"."""
    body = column(100, 100, ZH * 2, pitch=30)
    result = render(read_order([*body, line(number, 300, 100 + 16 * 30)]), "separate")
    body_markdown = result.markdown.split(FURNITURE_HEADING)[0]
    assert not any(row.startswith("- ") for row in body_markdown.splitlines()), result.markdown
    assert {l.role for l in result.lines if l.text == number} == {"page_number"}


@pytest.mark.parametrize("furniture", ["separate", "keep", "drop"])
def test_a_stored_page_renders_again_as_it_was_read(furniture):
    """The reviewer's reordering starts from the page as read: its furniture placed
    as the setting says, its roles kept."""
    page = render(read_order(lines_of(report_page())), furniture)
    stored = [{"text": l.text, "box": l.box, "block": l.block, "role": l.role} for l in page.lines]
    again = in_order(stored, sorted({l.block for l in page.lines}), furniture)
    assert (again.text, again.markdown) == (page.text, page.markdown)
    assert [l.role for l in again.lines] == [l.role for l in page.lines]


def test_a_paragraph_carried_over_above_a_heading_is_no_running_header():
    """A narrow column's page opening with the last two lines of a paragraph from the
    page before, white under them, then a section's heading (Easydict's
    ``ocr-en-paper-11.png``): the first line fills the column's measure, so it is
    running text however few its words, and the page reads in order. A header as
    narrow as its words, at the same place, still is one."""
    tail = [line("may lead to over-provisioning and hence incur", 100, 30, 480),
            line("for the operator.", 100, 70, 250)]
    heading = line("V. SECURITY CHALLENGES", 150, 150, 430)
    body = column(100, 210, PROSE + PROSE)
    read = render(read_order([*tail, heading, *body]), "separate")
    assert read.text.splitlines()[:3] == [tail[0].text, tail[1].text, heading.text]
    assert not {l.role for l in read.lines} & {"header", "footer", "page_number"}
    header = line("Journal of cloud security", 100, 30, 300)
    roles = {l.text: l.role for l in render(read_order([header, heading, *body])).lines}
    assert roles[header.text] == "header"


def test_a_page_whose_lines_share_no_width_has_no_measure_to_fill():
    """A form's lines of five words or more are as wide as their words (FUNSD
    71108371): a production stamp at its foot as wide as their median stays its
    footer."""
    widths = [160 + 30 * i for i in range(14)]
    body = [line(f"field {i} of the request form here", 100, 100 + 40 * i, 100 + w)
            for i, w in enumerate(widths)]
    stamp = line("PRODUCED FROM THE WEB SITE", 100, 800, 100 + sorted(widths)[7])
    roles = {l.text: l.role for l in render(read_order([*body, stamp])).lines}
    assert roles[stamp.text] == "footer"
