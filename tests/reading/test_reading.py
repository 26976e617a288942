"""Reading order and structure from line boxes (appliance.reading): pure functions on
hand-made lines, no OCR. The measured effect on real and synthetic scans is in the
README (appliance eval)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from appliance.page import Block, Line, Word
from appliance.quality.blocks import format_problems, parse_blocks
from appliance.quality.markdown import escape_markdown
from appliance.reading import read_lines
from appliance.reading.lines import rows
from appliance.reading.markdown import in_order, render
from appliance.reading.order import read_order

H = 30  # the body's line height in these pages


def line(text: str, x0: float, y0: float, x1: float | None = None, h: float = H) -> Line:
    x1 = x0 + 14 * len(text) if x1 is None else x1
    return Line(text=text, box=[x0, y0, x1, y0 + h], score=0.95)


def order_of(lines: list[Line]) -> list[str]:
    return [l.text for block in read_order(lines) for row in block.rows for l in row]


def column(x: float, top: float, texts: list[str], pitch: float = 40) -> list[Line]:
    return [line(text, x, top + i * pitch, x + 380) for i, text in enumerate(texts)]


PROSE = [f"line {i} of a column of running prose text" for i in range(8)]


def test_rows_read_top_to_bottom_and_left_to_right():
    lines = [line("below", 100, 200), line("right", 600, 102), line("left", 100, 100),
             line("title", 300, 20)]
    assert [[l.text for l in row] for row in rows(lines)] == [["title"], ["left", "right"],
                                                               ["below"]]


def test_a_row_does_not_grow_into_the_next_one_on_a_leaning_page():
    # each line 10 px lower than the one to its left: one row. A row that grew to the
    # union of its boxes (100-150 px) would take the next row's line (133-163 px) too.
    leaning = [line(f"w{i}", 100 + 200 * i, 100 + 10 * i) for i in range(3)]
    below = [line("next", 100, 133)]
    assert [[l.text for l in row] for row in rows(leaning + below)] == [
        ["w0", "w1", "w2"], ["next"]]


def test_two_columns_of_prose_are_read_one_after_the_other():
    title = line("Annual report 2026", 100, 40, 900, h=60)
    left = column(100, 160, [f"left {t}" for t in PROSE])
    right = column(560, 160, [f"right {t}" for t in PROSE])
    footer = line("Page 3 of the report, internal use only", 100, 560, 500)
    got = order_of([footer, *right, title, *left])
    assert got == [title.text, *(l.text for l in left), *(l.text for l in right), footer.text]


def test_three_columns_under_a_title_that_crosses_the_gutters():
    title = line("News from the north office", 100, 40, 1100, h=60)
    cols = [column(100 + 400 * i, 140, [f"c{i} {t}" for t in PROSE[:5]]) for i in range(3)]
    for col in cols:  # narrower than 380 px: a 20 px gutter between them is 1.2 lines wide
        for l in col:
            l.box[2] = l.box[0] + 360
    got = order_of([title, *cols[2], *cols[0], *cols[1]])
    assert got == [title.text] + [l.text for col in cols for l in col]


def _magazine_page(column_rows: int) -> tuple[list[Line], list[str]]:
    """A magazine page (scribeocr's multicol_08): a narrow column down the left, right
    of it a headline and a subtitle over a photo, and columns under the photo; the
    lines shuffled, and the order a reader takes."""
    first = column(100, 100, [f"first line {i} of a column of running prose" for i in
                              range(column_rows)])
    headline = line("Nice Watch, Love the Dent", 520, 80, 1300, h=70)
    subtitle = line("Pristine ticker? Snore. Why stylish guys are shelling out", 520, 230, 1300)
    lower = [column(520 + 420 * i, 600, [f"lower {i} {t}" for t in PROSE]) for i in range(2)]
    return ([*lower[1], subtitle, *first, headline, *lower[0]],
            [l.text for l in first] + [headline.text, subtitle.text]
            + [l.text for col in lower for l in col])


def test_a_column_beside_a_headline_is_not_cut_across_at_the_headline():
    # the column runs down beside the lower columns; the headline crosses their gutter.
    # Cutting the page across at it put the headline after the column's first line and
    # the subtitle after its fourth
    lines, reader = _magazine_page(column_rows=22)
    assert order_of(lines) == reader


def test_a_column_beside_a_headline_and_a_subtitle_is_read_on_its_own():
    # the column ends above the lower columns: its section has two lines right of the
    # gutter, too few to judge as a column, and was read as rows across both
    lines, reader = _magazine_page(column_rows=12)
    assert order_of(lines) == reader


@pytest.mark.parametrize("lean, margin", [(0.5, 100), (-0.5, 4)])
def test_a_page_that_leans_is_read_as_if_level(lean, margin):
    # Two columns 10 px apart (a third of a line height), the page turned by half a
    # degree: the lines 24 rows down move 7 px sideways against the top ones, so only
    # 3 px are white all the way down, too narrow for a gutter (6 px), unless the page is
    # read turned level by the lean the engine measured. Turned the other way, a
    # column close to the left edge would move past x = 0.
    left = column(margin, 100, [f"left {t}" for t in PROSE * 3], pitch=36)
    right = column(margin + 390, 100, [f"right {t}" for t in PROSE * 3], pitch=36)
    cos, sin = math.cos(math.radians(lean)), math.sin(math.radians(lean))

    def turned(l):
        x, y = (l.box[0] + l.box[2]) / 2, (l.box[1] + l.box[3]) / 2
        dx, dy = x * cos - y * sin - x, x * sin + y * cos - y
        return replace(l, box=[l.box[0] + dx, l.box[1] + dy, l.box[2] + dx, l.box[3] + dy])

    left, right = [turned(l) for l in left], [turned(l) for l in right]
    straight = [l.text for l in left] + [l.text for l in right]
    boxes = [list(l.box) for l in left + right]
    assert [l.text for block in read_order(left + right, lean_deg=lean)
            for row in block.rows for l in row] == straight
    assert [l.box for l in left + right] == boxes  # the lines keep their own boxes
    assert order_of(left + right) != straight


def test_a_line_reaching_into_the_gutter_does_not_close_it():
    left = column(100, 100, [f"left {t}" for t in PROSE])
    right = column(520, 100, [f"right {t}" for t in PROSE])
    left[3].box[2] = 505  # a long line of the ragged left column: 15 of the 40 px white
    assert order_of(left + right) == [l.text for l in left] + [l.text for l in right]


def test_columns_under_a_list_across_the_page():
    # OCRmyPDF's linn.png: bullets across the page, 0.73 line heights of white, then two
    # columns; a short bullet ends left of the gutter, the long ones cross it
    bullets = [line(f"• feature {i} of the sequencer, described in a sentence", 100,
                    40 + 36 * i, 400 if i % 3 == 0 else 900) for i in range(10)]
    left = column(100, 40 + 36 * 10 + 16, [f"left {t}" for t in PROSE])
    right = column(520, 40 + 36 * 10 + 16, [f"right {t}" for t in PROSE])
    got = order_of([*right, *bullets, *left])
    assert got == [l.text for l in bullets] + [l.text for l in left] + [l.text for l in right]


RUNNING = [f"line {i} of a long column of running prose text" for i in range(12)]


def test_a_column_of_prose_beside_a_sidebar_is_read_before_the_sidebar():
    prose = column(100, 160, RUNNING)
    sidebar = [line(t, 600, 160 + 40 * i) for i, t in enumerate(
        ["MORGAN STANLEY & CO. LLC", "David Risinger", "EQUITY ANALYST",
         "Matthew Harrison", "EQUITY ANALYST", "Stock Rating"])]
    assert order_of([*sidebar, *prose]) == RUNNING + [l.text for l in sidebar]


def test_a_table_of_figures_beside_a_sidebar_is_read_before_the_sidebar():
    # a research report's last page: the financial statements' rows, each a label and
    # four figures, and beside them a sidebar with a paragraph and a chart's labels
    table, order = [], []
    for i in range(14):
        label = line(f"Revenue line {i} (US$ m)", 100, 160 + 40 * i, 300)
        figures = [line(f"{i},{k}0{i}.5", 320 + 90 * k, 160 + 40 * i, 390 + 90 * k)
                   for k in range(4)]
        table += [label, *figures]
        order += [label.text] + [f.text for f in figures]
    sidebar = [line(t, 760, 160 + 40 * i) for i, t in enumerate(
        ["Company Background", "Kirkland Lake Gold is a gold mining company",
         "based in Canada with two major operations", "Blue Sky", "US$55.00",
         "Target Price", "Grey Sky", "US$35.00"])]
    assert order_of([*sidebar, *table]) == order + [l.text for l in sidebar]


def test_a_few_notes_beside_a_form_stay_in_their_rows():
    # a form whose label-and-value lines fill their side, and three notes beside them
    # (a unit, a date label): rows, not a column of notes after the form
    form = [line(f"({i}) VARIETY UNIT SALES: {1000 + i}", 100, 160 + 40 * i, 500)
            for i in range(12)]
    notes = [line(t, 620, 160 + 40 * i) for i, t in
             [(2, "1.3 mg (Appendix C)"), (5, "LAST SALES DATE:"), (8, "(In Thousands)")]]
    assert order_of([*notes, *form]) == [l.text for l in sorted(
        form + notes, key=lambda l: (l.box[1], l.box[0]))]


def test_a_table_with_its_item_names_left_of_a_gutter_stays_rows():
    # the white between the item names and the rest of each row is a gutter, and the
    # right side's rows are a table's (a label and two figures): the rows go on across
    # it, so they are read whole
    names = [line(f"Ballpoint pens {i}", 100, 160 + 40 * i, 380) for i in range(12)]
    cells = [cell for i in range(12) for cell in (
        line("North", 480, 160 + 40 * i, 560), line(f"{400 + i}", 640, 160 + 40 * i, 700),
        line(f"{700 + i}.21", 780, 160 + 40 * i, 860))]
    got = order_of([*cells, *names])
    assert got == [text for i in range(12) for text in
                   (f"Ballpoint pens {i}", "North", f"{400 + i}", f"{700 + i}.21")]


def test_a_table_whose_first_column_holds_long_names_stays_rows():
    # scribeocr's table_07: an analyst's name and title, then phone and e-mail. The
    # names read like running text, but every row goes on across the gutter
    table, order = [], []
    for i in range(12):
        name = "Analyst " + "abcdefghijkl"[i]
        cells = [line(f"{name}, Managing Director and Partner", 100, 100 + 40 * i, 540),
                 line(f"(203) 569-43{i:02}", 600, 100 + 40 * i, 760),
                 line(f"{name.replace(' ', '')}@crtllc.com", 820, 100 + 40 * i, 1040)]
        table += cells
        order += [c.text for c in cells]
    assert order_of(table[::-1]) == order


def test_two_transcript_pages_side_by_side_are_read_one_after_the_other():
    # a condensed deposition (scribeocr's deposition_01): two pages on one sheet, their
    # numbered lines in step, so every row goes on across the gutter
    pages = [[piece for i in range(12) for piece in (
        line(f"{i + 1}", 100 + 560 * p, 100 + 40 * i, 130 + 560 * p),
        line(f"Q. Where were {p}{i}?", 160 + 560 * p, 100 + 40 * i, 600 + 560 * p))]
        for p in range(2)]
    assert order_of(pages[1] + pages[0]) == [l.text for page in pages for l in page]


def test_a_banner_above_the_columns_is_read_row_by_row_first():
    # a research report's banner: title, subtitle and rating on the left, the ticker and
    # the target price on the right, each beside its row; the columns under it after
    banner = [("KIRKLAND LAKE GOLD Inc", "KL"), ("A Gold Darling with a Rich Valuation",
                                               "Target price (12M, US$)"),
              ("at Neutral with US$47 Target Price", "47.00")]
    lines = []
    for i, (left_text, right_text) in enumerate(banner):
        lines += [line(left_text, 100, 40 + 40 * i), line(right_text, 620, 40 + 40 * i)]
    left = column(100, 200, [f"left {t}" for t in RUNNING])
    right = column(620, 200, [f"right {t}" for t in RUNNING])
    assert order_of([*right, *left, *lines]) == (
        [t for pair in banner for t in pair] + [l.text for l in left] + [l.text for l in right])


def test_long_item_names_beside_their_prices_stay_rows():
    items = [f"{100 + i} HELANG MINYAK MASAK SKG" for i in range(12)]
    prices = [f"RM{10 + i}.90 z" for i in range(12)]
    lines = column(100, 160, items) + [line(t, 600, 160 + 40 * i) for i, t in enumerate(prices)]
    assert order_of(lines) == [t for pair in zip(items, prices) for t in pair]


def test_a_receipt_reads_row_by_row_not_labels_then_values():
    labels = ["TOTAL", "CASH", "CHANGE", "ROUNDING"]
    values = ["30.90", "51.00", "20.10", "0.00"]
    lines = [line(t, 40, 100 + 40 * i) for i, t in enumerate(labels)]
    lines += [line(t, 480, 102 + 40 * i) for i, t in enumerate(values)]
    assert order_of(lines) == ["TOTAL", "30.90", "CASH", "51.00", "CHANGE", "20.10",
                               "ROUNDING", "0.00"]


ADDRESS = ["Invoice to", "Oak & Ash Stationery Inc.", "84 Oak Avenue, Suite 20",
           "Austin, TX 78701", "USA"]


@pytest.mark.parametrize("address, values", [
    (ADDRESS, [("Invoice No.", "INV-2020-0361"), ("Date of issue", "29 Mar 2020"),
               ("Payment due", "13 May 2020")]),
    # the customer's VAT id under the address; the number as one line
    (ADDRESS + ["BTW: BE0821647210"], [("Invoice No. 2017-02-430",), ("Date:", "21.02.2017"),
                                      ("Due date:", "28.02.2017")]),
    # as many rows on both sides, the labels marked as labels
    (ADDRESS, [("Invoice #", "2017/053"), ("Date:", "5 Jan 2017"), ("Due date:", "12 Jan 2017"),
               ("PO number:", "PO-1264"), ("Account:", "32353")]),
], ids=["fewer-values", "vat-id-and-one-line-number", "as-many-rows"])
def test_an_address_beside_labelled_values_is_read_before_them(address, values):
    # an invoice's "Invoice to" block beside its number and dates: the values carry
    # their own labels, so the address lines are not theirs
    lines = [line(t, 40, 100 + 40 * i) for i, t in enumerate(address)]
    for i, pair in enumerate(values):
        lines += [line(t, 600 + 220 * k, 102 + 40 * i) for k, t in enumerate(pair)]
    assert order_of(lines) == address + [t for pair in values for t in pair]


def test_a_billing_and_a_delivery_address_side_by_side_are_read_one_after_the_other():
    # invoice2data's saeco.pdf: "Factuuradres" and "Afleveradres"
    billing = ["Factuuradres", "Strategic Corp", "T.a.v. bosd", "Fakestreet 46",
               "3500 MJ Utrecht", "Nederland"]
    delivery = ["Afleveradres", "bosd", "Fakestreet 46", "3500 MJ Utrecht", "Nederland"]
    lines = [line(t, 40, 100 + 32 * i) for i, t in enumerate(billing)]
    lines += [line(t, 700, 100 + 32 * i) for i, t in enumerate(delivery)]
    assert order_of(lines[::-1]) == billing + delivery


def test_a_table_of_words_in_two_columns_stays_rows():
    grid = [("Colour", "Midnight blue"), ("Material", "Organic cotton"), ("Fit", "Regular"),
            ("Care", "Machine wash")]
    lines = [line(t, 40 + 660 * c, 100 + 32 * r) for r, pair in enumerate(grid)
             for c, t in enumerate(pair)]
    assert order_of(lines[::-1]) == [t for pair in grid for t in pair]


def test_a_title_beside_the_senders_address_is_not_read_into_it():
    address = ["Blue Harbour Hardware NV", "Avenue Louise 171", "1000 Bruxelles",
               "VAT No. BE0226158270"]
    lines = [line(t, 40, 20 + 40 * i) for i, t in enumerate(address)]
    title = line("TAX INVOICE", 800, 22, 1100, h=45)
    assert order_of([title, *lines]) == address + [title.text]


def test_a_receipts_labels_beside_currency_and_amount_stay_rows():
    labels = ["Sub Total", "Discount", "Rounding", "CASH", "CHANGE"]
    lines = [line(t, 40, 100 + 40 * i) for i, t in enumerate(labels)]
    for i in range(len(labels)):
        lines += [line("RM", 480, 102 + 40 * i), line(f"{15 - i}.00", 560, 102 + 40 * i)]
    assert order_of(lines) == [t for i, label in enumerate(labels)
                               for t in (label, "RM", f"{15 - i}.00")]


def test_a_form_reads_each_label_with_its_value_even_multi_line_ones():
    rows_ = [("PROJECT CODE", ["BD-FF"]), ("PROJECT NAME", ["Full Flavor King Size"]),
             ("PROJECT OBJECTIVE", ["Develop a king size blend for the", "generic market with",
                                     "a new flavour"])]
    lines, y = [], 100
    for label, values in rows_:
        lines.append(line(label, 60, y))
        for value in values:
            lines.append(line(value, 400, y))
            y += 40
    assert order_of(lines) == ["PROJECT CODE", "BD-FF", "PROJECT NAME", "Full Flavor King Size",
                               "PROJECT OBJECTIVE", "Develop a king size blend for the",
                               "generic market with", "a new flavour"]


def test_a_ruled_table_s_rows_padded_apart_are_one_table():
    """A ruled table pads its cells (PDF-Extract-Kit's watermark.png): its rows stand
    1.1 line heights apart, each a section of the page, and were written as rows of
    text, a paragraph each. They are one table now; the numbered heading under it
    ("二、市场分析") is no wrapped line of its last cell. A form's labels beside their
    values, two to a row, padded alike, stay rows."""
    grid = [("产品类别", "销售额（万元）", "同比增长率"), ("电子产品", "5000", "15%"),
            ("家居用品", "3000", "10%"), ("服装服饰", "2000", "20%"), ("健康产品", "1000", "30%")]
    lines = [line(cell, x, 100 + 65 * row, x + width)
             for row, cells in enumerate(grid)
             for cell, x, width in zip(cells, (100, 300, 520), (110, 180, 130))]
    lines.append(line("二、市场分析", 100, 100 + 65 * 4 + 32, 230))
    markdown = render(read_order(lines)).markdown.split("\n")
    assert markdown[:7] == ["| 产品类别 | 销售额（万元） | 同比增长率 |", "|---|---|---|",
                            "| 电子产品 | 5000 | 15% |", "| 家居用品 | 3000 | 10% |",
                            "| 服装服饰 | 2000 | 20% |", "| 健康产品 | 1000 | 30% |", ""]
    assert "二、市场分析" in markdown[-1]
    form = [line(text, x, 100 + 65 * row, x + 250) for row, pair in enumerate(
        [("DESCRIPTION:", "KMDP ANALYSIS"), ("PERSONNEL:", "C. B. Pugh"),
         ("SUPPLIER:", "Market Facts")]) for text, x in zip(pair, (100, 450))]
    assert "|" not in render(read_order(form)).markdown


def test_render_paragraphs_headings_lists_and_escaping():
    lines = [line("Delivery terms", 100, 40, h=60),
             line("Goods are sent within", 100, 140), line("three days.", 100, 175),
             line("<b>Payment</b> in 30 days", 100, 300),
             line("• First item", 100, 380), line("2. Second item", 100, 420),
             line("# not a heading", 100, 460)]
    page = render(read_order(lines))
    assert page.markdown.split("\n") == [
        "# Delivery terms", "", "Goods are sent within", "three days.", "",
        r"\<b\>Payment\</b\> in 30 days", "", "- First item", "2. Second item",
        r"\# not a heading"]
    assert page.text.split("\n")[0] == "Delivery terms"
    assert {l.text: l.role for l in page.lines}["• First item"] == "list"
    assert all(l.block is not None for l in page.lines)


def test_a_list_item_that_ends_short_of_the_row_under_it_ends_there():
    """A paper's numbered section heading in body print ("A. Broken service access
    control", Easydict's ``ocr-en-paper-11.png``) over its paragraph: a blank line
    after it, or Markdown reads the paragraph as the item's text (a lazy
    continuation). An item whose row is full and carries on in the row under it, its
    first word too long to have fitted, keeps that row."""
    paragraph = ["The use of token based authorization through",
                 "OAuth exposes the network to token tampering"]
    lines = [line("A. Broken service access control", 100, 40, 560),
             line(paragraph[0], 120, 80, 900), line(paragraph[1], 100, 115, 900),
             line("B. An item whose text runs to the edge of the", 100, 200, 900),
             line("column and wraps", 100, 235, 400)]
    assert render(read_order(lines)).markdown.split("\n") == [
        "- A. Broken service access control", "", *paragraph, "",
        "- B. An item whose text runs to the edge of the", "column and wraps"]


def test_an_item_ends_where_the_text_it_carries_on_onto_ends_short():
    """Easydict's ``ocr-zh-text-list-1.png``: an item wraps onto a second row that ends
    short, and the rows under it are the next item (misread "2。") and a paragraph:
    without a blank line after the short row, Markdown reads them as the item's."""
    lines = [line("1.保持版本控制:通过发布一个新版本，您可以清晰地记录修复了哪些问题。", 100, 40, 900),
             line("户和开发团队来说都是透明和易于管理的。", 100, 75, 520),
             line("2。便于用户更新:通过发布新版本，您可以通知用户更新应用程序以修复", 100, 110, 900),
             line("用户可以轻松地获取到修复后的版本。", 100, 145, 480)]
    assert render(read_order(lines)).markdown.split("\n") == [
        "1. 保持版本控制:通过发布一个新版本，您可以清晰地记录修复了哪些问题。",
        "户和开发团队来说都是透明和易于管理的。", "",
        "2。便于用户更新:通过发布新版本，您可以通知用户更新应用程序以修复",
        "用户可以轻松地获取到修复后的版本。"]


@pytest.mark.parametrize(("printed", "markdown"), [
    ("1.保持版本控制", "1. 保持版本控制"),  # no space after the number in Chinese print
    ("2、便于用户更新", "- 2、便于用户更新"), ("一、总则", "- 一、总则"),
    ("（二）适用范围", "- （二）适用范围"), ("1.5米高的植株", "1.5米高的植株"),
    ("3.2节的结果", "3.2节的结果"), ("2024年的报告", "2024年的报告"),
])
def test_chinese_enumerators(printed, markdown):
    assert render(read_order([line(printed, 100, 40, 600)])).markdown == markdown


def _under_small_print(body: list[tuple[str, float]]) -> list[Line]:
    """``body``'s rows (text, print height) 45 px apart over a heading in 52 px print and
    30 rows of references in 28 px print: more lines of small print than of the body."""
    lines = [line(text, 100, 40 + 45 * index, 900, h=height)
             for index, (text, height) in enumerate(body)]
    top = 40 + 45 * len(body) + 30
    lines.append(line("References", 100, top, h=52))
    lines += [line(f"[{n}] Smith J, Lee K. Layout analysis of archives, 2017: {n}-18.", 100,
                   top + 90 + 34 * n, 900, h=28) for n in range(30)]
    return lines


def test_a_body_in_larger_print_than_the_pages_median_line_is_no_heading():
    """Issue 53 item 8: where small print has more lines than the body, the page's body
    height is the small print's and every short row of the body, the end of a paragraph
    or a line broken mid-sentence, was a heading. Rows of one print that follow each
    other with no paragraph's white, more than three, are running text; as OCR boxes
    them, a line without descenders is shorter (28 px among 36 to 41)."""
    body = [("Sales grew in every region this year while", 37),
            ("costs stayed close to the plan agreed in the", 38),
            ("spring and the board thanks every member", 41),
            ("of staff for the work.", 28),
            ("Orders rose in every region this year", 40),
            ("while costs stayed close to the plan agreed in", 41),
            ("the spring and the board thanks every", 37), ("member of staff", 36)]
    page = render(read_order(_under_small_print(body)))
    markdown = page.markdown.split("\n")
    assert markdown[:len(body) + 2] == [text for text, _ in body] + ["", "# References"]
    # a title of three rows stays one, however the page's print runs
    title = [("Northwind Traders", 60), ("Annual Report", 60), ("Year in Review", 60)]
    page = render(read_order(_under_small_print(title + body)))
    assert page.markdown.split("\n")[:3] == [f"# {text}" for text, _ in title]


def test_a_chinese_rows_words_and_stops_in_a_heading():
    """A row of Chinese in large print, alone, is a heading as a row of a language with
    spaces is: short (its characters counted two to a word, not one word a row) and
    with no stop at its end ("。", "，" as well as "." and ",")."""
    rows = ["参考文献", "本年度公司在各个地区的收入均有增长成本控制在计划范围之内",
            "董事会感谢全体员工的努力。", "档案部门完成了数字化，"]
    lines = [line(text, 100, 40 + 120 * index, h=60) for index, text in enumerate(rows)]
    lines += column(100, 600, ZH)
    structure = {l.text: l.role for l in render(read_order(lines)).lines}
    assert [structure[text] for text in rows] == ["heading", "text", "text", "text"]


def test_a_formula_boxed_taller_than_the_text_is_no_heading():
    """A displayed equation stands alone, its box made tall by its operator and indices
    (Pix2Text's page2.png: 1.4 to 1.5 times the body's lines): no heading, where a row
    of words as tall is one."""
    rows = ["(F * k)(p) = ∑ F(s)k(t)", "x ≤ y", "Method"]
    lines = [line(text, 100, 40 + 120 * index, h=45) for index, text in enumerate(rows)]
    lines += column(100, 400, PROSE)
    structure = {l.text: l.role for l in render(read_order(lines)).lines}
    assert [structure[text] for text in rows] == ["text", "text", "heading"]


def test_a_chinese_title_in_wider_characters_is_a_heading_however_its_box():
    """Easydict's Chinese Bitcoin paper: its title boxed 1.14 times as tall as the
    body's lines (a detector pads a line of Chinese by its glyphs), its characters 1.38
    times as wide. Chinese print is measured by its characters' width too: a heading.
    A row of the body's width of character stays text."""
    body = column(100, 200, [f"左{t}" for t in ZH + ZH[:6]])  # 22.4 px a character
    title = line("比特币：一种点对点电子货币系统", 200, 40, 200 + 15 * 31, h=34)
    plain = line("一种点对点电子货币系统的介绍", 200, 120, 200 + 14 * 22, h=34)
    roles = {l.text: l.role for l in render(read_order([title, plain, *body])).lines}
    assert roles[title.text] == "heading" and roles[plain.text] == "text"


def test_a_paragraph_opened_by_its_first_line_s_indent_is_a_paragraph():
    """A Chinese administrative decision (pdfplumber's issue-203 example) opens each
    paragraph two characters in, with no more white over it than between its lines: each
    is a paragraph of the Markdown. A list item's lines hung under its marker, and a
    receipt's centred lines, open none."""
    text = ["当事人在从事加工贸易过程中，在报核时未依照规定向海关", "如实申报进口料件的数量和规格，",
            "违反了海关监管规定，有查问笔录和当事人工商资料为证，", "依照有关规定，决定科处罚款。",
            "当事人应当自本处罚决定书送达之日起十五日内履行上述", "处罚决定，逾期不履行的，海关可以",
            "依法强制执行，并按日加处罚款，加处罚款的数额不超过", "罚款本身的数额，特此决定。",
            "当事人不服本处罚决定的，可以依法申请行政复议或者提起", "行政诉讼，申请期间和诉讼期间，",
            "本处罚决定不停止执行，法律另有规定的除外，请当事人", "按期履行。"]
    starts = {0, 4, 8}  # each paragraph's first row, two characters (60 px) in
    lines = [line(t, 160 if r in starts else 100, 100 + 40 * r, 1000 if r + 1 not in starts
                  else 700, 30) for r, t in enumerate(text)]
    paragraphs = render(read_order(lines)).markdown.split("\n\n")
    assert [p.splitlines()[0] for p in paragraphs] == [text[r] for r in sorted(starts)]
    hung = [line("1. The supplier delivers the goods named in the order", 100, 100, 1000),
            line("within thirty days of the order's date, at its cost,", 150, 140, 1000),
            line("to the address the buyer gives in writing.", 150, 180, 900),
            line("2. The buyer pays each invoice within thirty days.", 100, 220, 1000)]
    assert "\n\n" not in render(read_order(hung)).markdown.split("2.")[0].strip()
    receipt = [line("BAR WANG RICE@PERMAS JAYA", 300, 100, 700),
               line("NO. 17-G, JALAN SETIA", 340, 140, 660),
               line("81200 JOHOR BAHRU, JOHOR", 310, 180, 690)]
    assert "\n\n" not in render(read_order(receipt)).markdown


def test_the_last_line_of_a_paragraph_boxed_taller_than_its_lines_is_no_heading():
    """A paragraph of Chinese wraps inside a word, and its last line ("己吗？", a
    character and a question mark) is boxed taller than the full lines over it (33 px
    among 23, Easydict's ocr-zh-text-two-columns-1): it ends that paragraph. A row as
    tall under a paragraph's white is a heading, and so is a title's second row."""
    full = [(text * 2, 23) for text in ZH]  # 32 characters: each row full, 100 to 780
    rows = [*full[:5], None, *full[5:], ("己吗？", 33), None, ("第二部分", 33), None,
            *full[:5]]
    lines, y = [], 40
    for row in rows:  # rows 17 px apart, as typeset; None: a paragraph's white
        if row:
            text, height = row
            lines.append(line(text, 100, y, 780 if height == 23 else 100 + 21 * len(text),
                              h=height))
        y += 40
    structure = {l.text: l.role for l in render(read_order(lines)).lines}
    assert structure["己吗？"] == "text"
    assert structure["第二部分"] == "heading"
    title = [line("北方分公司", 100, 40, 400, h=60), line("年度简报", 100, 110, 340, h=60)]
    structure = {l.text: l.role for l in render(read_order(title + column(100, 220, ZH)))
                 .lines}
    assert structure["北方分公司"] == structure["年度简报"] == "heading"


def test_aligned_cells_become_a_table():
    grid = [["Item", "Region", "Amount"], ["Paper", "North", "12.50"],
            ["Toner", "South", "99.00"], ["Stapler", "East", "4.20"]]
    lines = [line(cell, 100 + 300 * c, 100 + 45 * r) for r, row in enumerate(grid)
             for c, cell in enumerate(row)]
    page = render(read_order(lines))
    assert page.markdown.split("\n") == [
        "| Item | Region | Amount |", "|---|---|---|", "| Paper | North | 12.50 |",
        "| Toner | South | 99.00 |", "| Stapler | East | 4.20 |"]
    assert {l.role for l in page.lines} == {"table"}
    assert page.text.split("\n")[1] == "Paper North 12.50"


def test_a_table_keeps_its_rows_of_one_cell_and_ends_with_a_row_of_cells():
    """A real statistics table (PubTabNet's): a section's label on a row of its own
    and an item's name wrapped onto a second line stay rows of the one table; the
    text under the table is not taken into it."""
    grid = [["Variable", "Hazard ratio", "p value"], ["Age (median)", "", "0.716"],
            ["≤69", "1.000", ""], ["Gender", "", ""], ["Male", "1.000", "0.142"],
            ["Treatment with", "0.839", "0.310"], ["antipsychotic drugs", "", ""],
            ["Female", "1.210", "0.042"]]
    lines = [line(cell, 100 + 300 * c, 100 + 45 * r, 100 + 300 * c + 12 * len(cell))
             for r, row in enumerate(grid) for c, cell in enumerate(row) if cell]
    lines.append(line("Values are medians of the three trials", 100, 100 + 45 * len(grid)))
    page = render(read_order(lines))
    table = [row for row in page.markdown.split("\n") if row.startswith("|")]
    assert table == ["| Variable | Hazard ratio | p value |", "|---|---|---|",
                     "| Age (median) |  | 0.716 |", "| ≤69 | 1.000 |  |", "| Gender |  |  |",
                     "| Male | 1.000 | 0.142 |", "| Treatment with | 0.839 | 0.310 |",
                     "| antipsychotic drugs |  |  |", "| Female | 1.210 | 0.042 |"]
    assert page.markdown.endswith("\n\nValues are medians of the three trials")


def test_a_tables_columns_a_fifth_of_a_line_apart_are_its_cells():
    """A real table (PubTabNet's): "Mean", "SD" and "Median" stand 7 to 17 px apart
    at 33 px lines, closer than two lines of one sentence may (TABLE_CELL_GAP); lines
    that align down the rows are cells all the same. A totals row whose label reaches
    4 px into the amounts' column stays in the table."""
    edges = [(0, 220), (234, 297), (304, 343), (360, 441), (449, 520)]
    grid = [["Type of delay", "Mean", "SD", "Median", "IQR"],
            ["Patient delay", "55.3", "40.0", "59", "5-123"],
            ["Healthcare services delay", "76.5", "91.2", "45", "38-128"],
            ["Total diagnostic delay", "131.4", "94.3", "104", "17-187"]]
    lines = [line(cell, x0, 2 + 37 * r, x1, h=33) for r, row in enumerate(grid)
             for (x0, x1), cell in zip(edges, row)]
    lines += [line("All patients", 356, 150, 453, h=33), line("402.5", 462, 150, 520, h=33)]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table == ["| Type of delay | Mean | SD | Median | IQR |", "|---|---|---|---|---|",
                     "| Patient delay | 55.3 | 40.0 | 59 | 5-123 |",
                     "| Healthcare services delay | 76.5 | 91.2 | 45 | 38-128 |",
                     "| Total diagnostic delay | 131.4 | 94.3 | 104 | 17-187 |",
                     "|  |  |  | All patients | 402.5 |"]


def test_a_cells_wrapped_lines_stay_in_its_row():
    """A real table of release thresholds (ICDAR 2013's eu-001), its rows set
    single-spaced: a pollutant's name wrapped onto a second line ("(as HCl)") is the
    same cell, as the first word under it would not have fitted beside the line
    above it. A name short enough to have taken the next word ("Methane (CH4)" under
    "compounds (NMVOC)"), and a row that fills every column, are rows of their own."""
    grid = [["Pollutant", "to air", "to water"], ["Ammonia (NH3)", "10 000", "50"],
            ["Chlorine and inorganic compounds", "10 000", "2 000"], ["(as HCl)", "", ""],
            ["Halons", "1", "1"], ["Non-methane volatile organic", "100 000", "5"],
            ["compounds (NMVOC)", "", ""], ["Methane (CH4)", "", "1 000"]]
    lines = [line(cell, (100, 520, 720)[c], 100 + 32 * r, (100, 520, 720)[c] + 12 * len(cell))
             for r, row in enumerate(grid) for c, cell in enumerate(row) if cell]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table == ["| Pollutant | to air | to water |", "|---|---|---|",
                     "| Ammonia (NH3) | 10 000 | 50 |",
                     "| Chlorine and inorganic compounds (as HCl) | 10 000 | 2 000 |",
                     "| Halons | 1 | 1 |",
                     "| Non-methane volatile organic compounds (NMVOC) | 100 000 | 5 |",
                     "| Methane (CH4) |  | 1 000 |"]


def test_a_cell_of_two_lines_set_centred_on_its_row_stays_in_its_row():
    """A Chinese quarterly report's income statement (pdfplumber's issue-67 example): a
    label of two lines is set centred on its row, its first line half a line over the
    row's figures and its last half a line under them, each a row of its own by its
    centre. Its lines join the row, without a space where the Chinese runs on; a
    receipt's item names, each between the rows of quantities and prices over and under
    it, reaching into both alike, stay rows of their own."""
    h, pitch = 30, 40  # line height; the rows' pitch: a centred line overlaps 0.33 of each
    rows = [("项目", "本期发生额", "上期发生额", 0), ("营业收入", "4,755,785.11", "5,699,227.63", 1),
            ("归属母公司所有者的其他综合收", "", "", 2), ("", "3,144,125.23", "-1,819,426.10", 2.5),
            ("益的税后净额", "", "", 3), ("基本每股收益", "-0.0053", "-0.0178", 4)]
    lines = [line(text, (100, 600, 900)[c], 100 + pitch * r, (100, 600, 900)[c] + 20 * len(text), h)
             for *cells, r in rows for c, text in enumerate(cells) if text]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table[2:] == ["| 营业收入 | 4,755,785.11 | 5,699,227.63 |",
                         "| 归属母公司所有者的其他综合收益的税后净额 | 3,144,125.23 | \\-1,819,426.10 |",
                         "| 基本每股收益 | \\-0.0053 | \\-0.0178 |"]
    receipt = [("Item", "Qty", "Total", -0.9), ("Teh (B)", "", "", 0), ("", "1 x", "2.10", 0.45),
               ("Cham (B)", "", "", 0.9), ("", "1 x", "2.10", 1.35), ("Take Away", "", "", 1.8),
               ("", "2 x", "0.40", 2.25)]  # OCR's boxes overlap a quarter of a line
    lines = [line(text, (100, 600, 800)[c], 100 + 50 * r, (100, 600, 800)[c] + 14 * len(text), h)
             for *cells, r in receipt for c, text in enumerate(cells) if text]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table[2:] == ["| Teh (B) |  |  |", "|  | 1 x | 2.10 |", "| Cham (B) |  |  |",
                         "|  | 1 x | 2.10 |", "| Take Away |  |  |", "|  | 2 x | 0.40 |"]


def test_a_table_s_long_chinese_item_names_stay_its_first_column():
    """A hospital's blood count (pdfplumber's issue-461 example, read by OCR; its
    geometry): under the patient's details, each row an item name of up to 13
    characters, the method, a flag, the result, its unit and the reference range.
    Counted in words, a long name is as long as a line of running text, yet the rows it
    fills go on across the gutter to their units and ranges: the names are not read as a
    column before the rest of the table, nor the units and ranges after it."""
    items = [("白细胞计数(WBC)", "↓", "3.9", "E+9/L", "[4.0-10.0]"),
             ("中性粒细胞计数(NEU#)", "", "2.33", "E+9/L", "[1.8-6.3]"),
             ("淋巴细胞计数(LYM#)", "", "1.16", "E+9/L", "[1.1-3.2]"),
             ("单核细胞计数(MON#)", "", "0.25", "E+9/L", "[0.1-0.6]"),
             ("嗜酸性粒细胞计数(EOS#)", "", "0.12", "E+9/L", "[0.02-0.52]"),
             ("嗜碱性粒细胞计数(BAS#)", "", "0.030", "E+9/L", "[0-0.06]"),
             ("中性粒细胞百分比(NEU%)", "", "59.6", "%", "[40-75]"),
             ("淋巴细胞百分比(LYM%)", "", "29.9", "%", "[20.0-50.0]"),
             ("单核细胞百分比(MON%)", "", "6.5", "%", "[3.0-10.0]"),
             ("嗜酸性粒细胞百分比(EOS%)", "", "3.1", "%", "[0.4-8.0]"),
             ("嗜碱性粒细胞百分比(BAS%)", "", "0.90", "%", "[0-1.0]"),
             ("红细胞计数(RBC)", "", "5.37", "E+12/L", "[4.3-5.8]"),
             ("血红蛋白(HGB)", "", "159", "g/L", "[130-175]"),
             ("红细胞压积(HCT)", "", "47.6", "%", "[40.0-50.0]"),
             ("平均红细胞体积(MCV)", "", "88.6", "fL", "[82.0-100.0]"),
             ("平均红细胞血红蛋白含量(MCH)", "", "29.5", "Pg", "[27.0-34.0]"),
             ("平均红细胞血红蛋白浓度(MCHC)", "", "333", "g/L", "[316-354]"),
             ("红细胞分布宽度标准差(RDW-SD)", "", "42.2", "fL", "[35.0-56.0]"),
             ("红细胞分布宽度变异系数(RDW-CV)", "", "13.4", "%", "[11.0-16.0]"),
             ("平均血小板体积(MPV)", "↑", "13.2", "fL", "[6.5-12.0]"),
             ("血小板压积(PCT)", "", "0.198", "%", "[0.108-0.282]"),
             ("血小板计数(PLT)", "", "149", "E+9/L", "[125-350]")]
    grid = [("项目", "检验方法", "提示", "结果", "单位", "参考范围"),
            *((name, "仪器法", *rest) for name, *rest in items)]
    starts = (18, 424, 616, 698, 836, 948)

    def width(text: str) -> float:  # the report's print: 22 px a Chinese character
        return sum(22 if ord(ch) > 0x2000 else 11 for ch in text)

    lines = [line(cell, starts[c], 210 + 31 * r, starts[c] + width(cell), 28)
             for r, row in enumerate(grid) for c, cell in enumerate(row) if cell]
    details = [("性别：男", 307, 106), ("年龄：50岁", 465, 105), ("送检科室：", 606, 107),
               ("住院/门诊号：", 18, 138), ("采样时间：2021-06-04 09:00", 309, 139),
               ("送检时间：2021-06-04 19:38", 605, 139), ("实验编号：", 976, 138),
               ("临床诊断：", 18, 170), ("样本类型：EDTA抗凝血", 608, 170),
               ("样本状态：正常", 974, 167), ("建议与解释：无", 19, 928), ("以下空白", 126, 957)]
    lines += [line(text, x, y, x + width(text), 28) for text, x, y in details]
    table = [row for row in render(read_order(lines)).markdown.split("\n")
             if row.startswith("| ")]
    head = table.index("| 项目 | 检验方法 | 提示 | 结果 | 单位 | 参考范围 |")
    assert table[head + 16] == "| 平均红细胞血红蛋白含量(MCH) | 仪器法 |  | 29.5 | Pg | \\[27.0-34.0\\] |"
    assert len(table) - head == 1 + len(items)


def test_an_agenda_s_items_hung_beside_their_numbers_and_a_speck_are_no_table():
    """A school board's agenda (pdfplumber's cupertino_usd_4-6-16.pdf, its text layer's
    boxes): each item's number, and its heading and paragraph hung indented beside it;
    under the paragraph a speck the text layer holds ("`"). A list's numbers, a speck
    and bullets a symbol font drew ("■") label no rows: the items are read as text, not
    as a table of two columns. A column of ratings ("$$$") beside them does."""
    paragraph = [(1434, "The public may address the Board on any agenda item and any item"),
                 (1492, "Board president will only call on those who have filled out comment"),
                 (1477, "each speaker will be allotted three (3) minutes. The Board will not"),
                 (1477, "non-agenda item comments at this time, although the item may be"),
                 (1486, "Code 35145.5). The comments shall be made from the podium. In"),
                 (1447, "Code 54954.2 – No action or discussion shall be undertaken on any"),
                 (1401, "posted agenda. The Board shall limit the total time to 30 minutes."),
                 (1493, "response to the speaker including negative and positive reactions"),
                 (1313, "ensure that all members of the public feel free to voice their")]

    def agenda(marks: list[str]) -> list[Line]:
        lines = [line(marks[0], 211, 1065, 240, 40),
                 line("PUBLIC COMMENT – ITEMS ON THE AGENDA", 288, 1065, 963, 40)]
        lines += [line(text, 288, 1101 + round(31.9 * i), x1, 36)
                  for i, (x1, text) in enumerate(paragraph)]
        return lines + [line(marks[1], 211, 1388, 224, 39), line(marks[2], 211, 1423, 240, 40),
                        line("CLOSED SESSION", 288, 1423, 562, 40)]

    for marks in (["2.", "`", "3."], ["■", "■", "■"]):
        markdown = render(read_order(agenda(marks))).markdown
        assert "|" not in markdown, markdown
    rated = render(read_order(agenda(["$$$", "$$", "$$$"]))).markdown
    assert "| $$$ | PUBLIC COMMENT – ITEMS ON THE AGENDA |" in rated, rated


def test_figures_under_a_row_are_a_row_of_their_own():
    # ICDAR 2013's eu-002: the last year has no figures for two quarters; figures do
    # not wrap, however full the cells above them are
    grid = [["Year", "Q1", "Q2", "Q3", "Total"], ["2006", "74.7", "84.1", "96.5", "367.1"],
            ["2007", "148.8", "142.3", "156.7", "633.9"], ["2008", "120.9", "106", "", "226.8"]]
    lines = [line(cell, 100 + 150 * c, 100 + 32 * r) for r, row in enumerate(grid)
             for c, cell in enumerate(row) if cell]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table[-2:] == ["| 2007 | 148.8 | 142.3 | 156.7 | 633.9 |",
                          "| 2008 | 120.9 | 106 |  | 226.8 |"]


def test_a_capital_starts_a_cell_unless_the_cell_above_is_left_open():
    # a research report's analysts (a name under the colleague's e-mail address), and
    # ICDAR 2013's eu-004 (a list of retailers wrapped after a semicolon)
    grid = [["Analyst", "Phone"], ["David.Risinger@morganstanley.com", "+1 212 761-6494"],
            ["Matthew Harrison", ""], ["Matthew.Harrison@morganstanley.com", "+1 212 761-8055"],
            ["France Monoprix 28; Casino 25;", "18.2"], ["Intermarche 23; Auchan 19", ""],
            ["Germany Aldi 90; Metro 33", "12.6"]]
    lines = [line(cell, (100, 600)[c], 100 + 32 * r, (100, 600)[c] + 12 * len(cell))
             for r, row in enumerate(grid) for c, cell in enumerate(row) if cell]
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table[2:] == ["| David.Risinger@morganstanley.com | \\+1 212 761-6494 |",
                         "| Matthew Harrison |  |",
                         "| Matthew.Harrison@morganstanley.com | \\+1 212 761-8055 |",
                         "| France Monoprix 28; Casino 25; Intermarche 23; Auchan 19 | 18.2 |",
                         "| Germany Aldi 90; Metro 33 | 12.6 |"]


def test_a_header_over_one_row_of_figures_is_a_table_and_its_wrapped_line_stays_in_it():
    # ICDAR 2013's eu-007: a table of two rows, the second's label wrapped onto a line
    # under it; two rows of two lines stay text (they may be anything)
    grid = [["Years", "1990", "1992", "1993"], ["Budget Coefficient for Coffee,", "0.323", "0.272", "0.265"],
            ["Tea, Herb Tea", "", "", ""]]
    lines = [line(cell, (100, 560, 700, 840)[c], 100 + 32 * r) for r, row in enumerate(grid)
             for c, cell in enumerate(row) if cell]
    lines.append(line("Source: national accounts", 100, 300))
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table == ["| Years | 1990 | 1992 | 1993 |", "|---|---|---|---|",
                     "| Budget Coefficient for Coffee, Tea, Herb Tea | 0.323 | 0.272 | 0.265 |"]
    pairs = [line("Name", 100, 100), line("Ann Smith", 600, 100),
             line("Phone", 100, 145), line("555 0101", 600, 145)]
    assert "|" not in render(read_order(pairs)).markdown


def test_a_tables_row_labels_are_not_cut_off_as_a_column():
    # ICDAR 2013's eu-021: each label stands beside two rows of figures ("Count",
    # "Percentage"), so half of the table's rows have nothing left of the gutter and
    # the table alone reads as a column; every label stands in one of its rows
    lines, order = [], []
    for i, label in enumerate(["Alcohol use", "Allergies", "Chronic illness", "Drug use",
                               "Eating disorder", "Injury", "Harassment", "Stress"]):
        top = 100 + 64 * i
        lines.append(line(label, 100, top, 320))
        order.append(label)
        for j, (name, figures) in enumerate((("Count", ("20", "56", "391")),
                                             ("Percentage", ("4.3%", "12.0%", "83.7%")))):
            row = [line(name, 420, top + 32 * j, 560)] + [
                line(figure, 640 + 140 * k, top + 32 * j, 700 + 140 * k) for k, figure in enumerate(figures)]
            lines += row
            order += [cell.text for cell in row]
    assert order_of(lines[::-1]) == order
    table = [row for row in render(read_order(lines)).markdown.split("\n") if row.startswith("|")]
    assert table[2:4] == ["| Alcohol use | Count | 20 | 56 | 391 |", "|  | Percentage | 4.3% | 12.0% | 83.7% |"]


def test_a_table_cut_where_white_stands_between_its_rows_is_one_table():
    # ICDAR 2013's eu-007: a group's brands under its totals, then white before the next
    # group; the reading order cuts the table there, and its Markdown is one table
    groups = [("Astra Calve", "Total: 0%", "Total: 47%"), ("Besnier", "Total: 18.1%", "Total: 0%"),
              ("Vedial", "Total: 0%", "Total: 19%")]
    lines, top = [line("Groups", 100, 40, 260), line("Butter", 400, 40, 520),
                  line("Margarine", 700, 40, 860), line("Low fat", 1000, 40, 1100)], 72
    for name, butter, margarine in groups:
        lines += [line(name, 100, top, 260), line(butter, 400, top, 560),
                  line(margarine, 700, top, 860), line("Total: 9.5%", 1000, top, 1160)]
        lines += [cell for i in (1, 2) for cell in (line(f"(Brand {i},", 700, top + 32 * i, 860),
                                                     line(f"Brand {i} (8.4%)", 1000, top + 32 * i, 1200))]
        top += 200
    blocks = read_order(lines)
    assert len(blocks) == 3
    markdown = render(blocks).markdown.split("\n")
    assert all(row.startswith("|") for row in markdown)
    assert markdown[:4] == ["| Groups | Butter | Margarine | Low fat |", "|---|---|---|---|",
                            "| Astra Calve | Total: 0% | Total: 47% | Total: 9.5% |",
                            "|  |  | (Brand 1, | Brand 1 (8.4%) |"]
    assert len(markdown) == 2 + 3 * 3


def test_an_organisation_charts_boxes_are_read_box_by_box():
    # scribeocr's chart_01: rows of boxes, each a name, a title and a date
    people = [("Bo Hamilton (000131923)", "Field Sales Spec Pharma", "4/9/2012"),
              ("Christopher Clark (000130316)", "Field Sales Spec Pharma", "1/16/2012"),
              ("Denise Davies (000060733)", "District Sales Mgr Pharma", "1/11/2010")]
    boxes = [[line(t, 100 + 450 * b + 20 * (i == 2), 100 + 30 * i, h=25)
              for i, t in enumerate(person)] for b, person in enumerate(people)]
    below = [line(t, 100 + 450 * b, 300 + 30 * i, h=25) for b, person in enumerate(people)
             for i, t in enumerate(person)]
    got = order_of([l for box in boxes for l in box][::-1] + below)
    assert got[:9] == [t for person in people for t in person]


@pytest.mark.parametrize("grid", [
    [["Qty", "Price", "Amount"], ["1", "9.00", "9.00"], ["2", "4.50", "9.00"]],
    [["GST Summary", "Amount (RM)", "Tax (RM)"], ["6%", "30.00", "1.80"]],
], ids=["header-over-figures", "header-over-one-row"])
def test_a_table_under_its_header_is_not_taken_for_cards(grid):
    lines = [line(cell, 100 + 300 * c, 100 + 30 * r, h=25) for r, row in enumerate(grid)
             for c, cell in enumerate(row)]
    assert order_of(lines[::-1]) == [cell for row in grid for cell in row]


def test_empty_page():
    assert read_order([]) == []
    page = render([])
    assert (page.text, page.markdown, page.lines) == ("", "", [])


def test_column_names_with_digits_stay_the_header():
    # quarters, years and names like "EU-15" head their columns as words do (a digit in
    # the first row took it for data, and an empty header went over it)
    for names in (["Q1", "Q2", "Q3", "Q4"], ["1995*", "1996/7", "2007-08", "FY2009"],
                  ["EU-15", "EU-25", "Finland", "Sweden"]):
        grid = [["", *names], ["Sales", "12.0", "13.5", "14.1", "15.0"],
                ["Costs", "10.2", "11.0", "11.9", "12.3"], ["Staff", "120", "118", "121", "125"]]
        lines = [line(cell, 100 + 150 * c, 100 + 40 * r, 160 + 150 * c)
                 for r, row in enumerate(grid) for c, cell in enumerate(row) if cell]
        table = render(read_order(lines)).markdown.split("\n")
        assert table[:3] == ["|  | " + " | ".join(map(escape_markdown, names)) + " |",
                             "|---|---|---|---|---|",
                             "| Sales | 12.0 | 13.5 | 14.1 | 15.0 |"]


def test_names_over_groups_of_columns_head_an_html_table_whose_cells_span():
    # ICDAR 2013's eu-012: "Finland", "EU-15" centred each over four columns of
    # "Female | Male | Total | 15-24"; they fit none of its columns, ended the table and
    # stood over it as a line of text; a pipe table cannot hold a cell over four columns
    x = [100] + [300 + 110 * i for i in range(8)]
    rows = [["", "Female", "Male", "Total", "15-24", "Female", "Male", "Total", "15-24"],
            ["1995", "15.1", "15.7", "15.4", "29.7", "12.0", "8.7", "10.1", "21.1"],
            ["2000", "10.6", "9.1", "9.8", "21.4", "9.3", "6.4", "7.7", "15.3"],
            ["2005", "8.6", "8.2", "8.4", "20.1", "8.9", "7.0", "7.9", "16.7"]]
    lines = [line("Finland", 460, 100, 560), line("EU-15", 900, 100, 980)]
    lines += [line(cell, x[c], 140 + 40 * r, x[c] + 80) for r, row in enumerate(rows)
              for c, cell in enumerate(row) if cell]
    markdown = render(read_order(lines)).markdown
    [table] = [block for block in parse_blocks(markdown) if block.kind == "table"]
    assert markdown.startswith("<table>") and format_problems(markdown) == []
    assert table.rows[0] == ["", "Finland", "EU-15"] and table.rows[1] == rows[0]
    assert [span for _, span in table.spans[0]] == [1, 4, 4]
    assert table.rows[2:] == rows[1:]


def test_item_rows_with_figures_get_an_empty_header():
    items = [("Paper A4", "4.20"), ("Toner", "29.90"), ("Stapler", "7.10")]
    lines = [l for r, (item, price) in enumerate(items)
             for l in (line(item, 40, 100 + 40 * r), line(price, 480, 100 + 40 * r))]
    page = render(read_order(lines))
    assert page.markdown.split("\n")[:3] == ["|  |  |", "|---|---|", "| Paper A4 | 4.20 |"]


# Chinese running text: no spaces between words (the prose rules counted words by
# spaces, and took every Chinese line for a label)
ZH = ["本年度公司在各个地区的收入均有增长", "成本控制在去年制定的计划范围之内",
      "客户订购的纸张和墨粉比以往更多", "北方的新办公室也按时开业董事会",
      "感谢全体员工在这一艰难时期的努力", "能源和运输价格大幅上涨合同续签",
      "产品中再生材料的比例创下新高", "档案部门完成了历史文件的数字化"]


def test_two_columns_of_chinese_are_read_one_after_the_other():
    title = line("北方分公司简报（2026年）", 100, 40, 700, h=60)
    left = column(100, 160, [f"左{t}" for t in ZH])
    right = column(560, 160, [f"右{t}" for t in ZH])
    assert order_of([*right, title, *left]) == [title.text, *(l.text for l in left),
                                               *(l.text for l in right)]


def test_a_book_spread_reads_the_left_page_then_the_right():
    """Two pages scanned side by side: each page's running header and number belong to
    it, not to a banner over both pages read first."""
    pages = []
    for number, x in enumerate((80, 1000)):
        header = line(("企业档案管理实务", "第三章 档案的整理与保管")[number], x, 30, x + 300)
        body = column(x, 110, [f"{'左右'[number]}{t}" for t in ZH])
        folio = line(str(170 + number), x + 180, 460, x + 215)
        pages.append([header, *body, folio])
    got = order_of([line for page in reversed(pages) for line in page])
    assert got == [l.text for page in pages for l in page]


@pytest.mark.parametrize("numbers, spread", [(("— 9 —", "— 10 —"), True),
                                             (("— 9 —", "— 9 —"), False)])
def test_an_exam_paper_s_two_pages_numbered_one_after_the_other(numbers, spread):
    """An exam paper scanned as a spread (PDF-Extract-Kit's exam_paper.png): questions
    and their choices in rows on each page, no columns of running text, the page
    numbers "— 9 —" and "— 10 —" at each page's foot, a publisher's line across the
    spine under both. The two pages were read as one, row by row across the spine;
    the left page is read before the right one now, the publisher's line after both.
    Numbers that do not follow each other make no spread."""
    pages = []
    for page, x in enumerate((100, 1100)):
        questions = [[line(f"({'ABC'[i % 3]} ){i}. Look at page {page} item {i}", x, 60 + 60 * i,
                           x + 300),
                      line("A. face", x + 400, 60 + 60 * i, x + 500),
                      line("B. eyes", x + 600, 60 + 60 * i, x + 700)] for i in range(8)]
        number = line(numbers[page], x + 300, 600, x + 380)
        pages.append([l for row in questions for l in row] + [number])
    publisher = line("关注微信公众号获取更多学习资料", 800, 660, 1400)
    got = order_of([*pages[1], publisher, *pages[0]])
    if spread:
        assert got == [*(l.text for l in pages[0]), *(l.text for l in pages[1]), publisher.text]
    else:
        assert got[:3] == [pages[0][0].text, pages[0][1].text, pages[0][2].text]
        assert got[3] == pages[1][0].text


def test_a_banner_over_the_columns_of_one_page_is_still_read_first():
    """A report's banner (its title beside the date) stands above columns whose gutter
    is as narrow as a page's: read first, across, not as two pages."""
    banner = [line("Annual report", 100, 30, 400), line("2 December 2026", 560, 30, 800)]
    left = column(100, 120, [f"left {t}" for t in PROSE])
    right = column(560, 120, [f"right {t}" for t in PROSE])
    assert order_of([*right, *banner, *left]) == [*(l.text for l in banner),
                                                 *(l.text for l in left),
                                                 *(l.text for l in right)]


def test_a_column_that_starts_beside_a_figure_is_read_after_the_one_under_it():
    """A paper's page (Pix2Text's page2.png): a figure, which holds no lines, across the
    top of the left column, the right column's first lines beside it, a white under
    them; the left column begins under the figure with its caption. The right column's
    first lines are its top, read with it after the left column, not a head of the
    page read first."""
    top = [line("operation as defined in [25] is given by", 560, 20, 940),
           line("(F * k)(p) = sum F(s)k(t). (1)", 640, 70, 900)]
    right = column(560, 160, [f"right {t}" for t in PROSE])
    left = column(100, 260, [f"left {t}" for t in PROSE])
    assert order_of([*right, *left, *top]) == [*(l.text for l in left), *(l.text for l in top),
                                               *(l.text for l in right)]


def test_columns_that_end_at_a_caption_a_line_s_spacing_under_them_are_read_first():
    """A journal's page (RapidLayout's layout.jpg): two columns of running text, then,
    a line's spacing lower, a table's caption across the page and its rows. No
    section's white stands between, and the caption crosses the gutter: the columns
    were read as rows, across both. They end at the caption now, read one after the
    other, the caption and the table after them."""
    left = column(100, 40, [f"left {t}" for t in PROSE[:6]])
    right = column(560, 40, [f"right {t}" for t in PROSE[:6]])
    caption = line("Table 4 Comparison results of table structure recognition", 200, 280, 860)
    table = [line(text, x0, 320 + 40 * row, x1) for row in range(5)
             for x0, x1, text in ((100, 600, f"the method of its paper number {row}"),
                                  (700, 760, f"9{row}.5"))]
    assert order_of([*table, *right, caption, *left]) == [
        *(l.text for l in left), *(l.text for l in right), caption.text,
        *(l.text for l in table)]


def test_columns_at_the_foot_a_line_s_spacing_under_a_table_are_read_after_it():
    """The same read up the page (scribeocr's multicol_08 has two columns a line's
    spacing under its photos' captions): a table's rows across the page, two columns
    under them; the columns begin under the table's last row."""
    table = [line(text, x0, 40 + 40 * row, x1) for row in range(5)
             for x0, x1, text in ((100, 600, f"the method of its paper number {row}"),
                                  (700, 760, f"9{row}.5"))]
    left = column(100, 240, [f"left {t}" for t in PROSE[:6]])
    right = column(560, 240, [f"right {t}" for t in PROSE[:6]])
    assert order_of([*right, *left, *table]) == [
        *(l.text for l in table), *(l.text for l in left), *(l.text for l in right)]


def test_a_line_above_one_column_is_read_first_where_both_columns_begin_under_it():
    """A date at the right above two columns that begin alike: the page's head."""
    date = line("2 December 2026", 700, 30, 940)
    left = column(100, 120, [f"left {t}" for t in PROSE])
    right = column(560, 120, [f"right {t}" for t in PROSE])
    assert order_of([*right, *left, date]) == [date.text, *(l.text for l in left),
                                               *(l.text for l in right)]


def test_a_reviewer_reorders_the_blocks_of_a_page():
    """The reviewer's order (block numbers, as the JSON's layout gives them) rebuilds
    the page's text from its stored lines, each block's rows as they were read."""
    title = line("Annual report 2026", 100, 40, 900, h=60)
    left = column(100, 160, [f"left {t}" for t in PROSE])
    right = column(560, 160, [f"right {t}" for t in PROSE])
    page = render(read_order([title, *left, *right]))
    stored = [{"text": l.text, "box": l.box, "score": l.score, "block": l.block, "role": l.role}
              for l in page.lines]
    again = in_order(stored, [0, 1, 2])
    assert (again.text, again.markdown) == (page.text, page.markdown)
    swapped = in_order(stored, [0, 2, 1])
    assert swapped.text.splitlines() == [title.text, *(l.text for l in right),
                                         *(l.text for l in left)]
    assert swapped.markdown.startswith("# Annual report 2026\n\nright line 0")
    with pytest.raises(ValueError, match="each of the page's blocks once: 0, 1, 2"):
        in_order(stored, [0, 2, 2])


def _table_rows(top: float, rows_: int, pitch: float = 40) -> list[Line]:
    """A table across two columns' width: four short cells a row, placed by its own
    columns, not the prose's (its second cell ends before the prose's gutter, its
    third starts after it)."""
    cells = []
    for number in range(rows_):
        y = top + number * pitch
        cells += [line(f"Item {number}", 100, y, 300), line(f"North {number}", 360, y, 450),
                  line(f"{number * 37}", 620, y, 680), line(f"{number * 1.5:.2f}", 760, y, 840)]
    return cells


@pytest.mark.parametrize("white", [60, 24], ids=["a line apart", "half a line apart"])
def test_columns_above_and_below_a_table_across_them_are_read_band_by_band(white):
    """Issue 50: two columns, a table across both, two columns again. The gutter holds
    from top to bottom (no table cell crosses it), yet each band of columns is read
    left then right, and the table row by row between them, also where only half a
    line's white stands between the table and the columns."""
    upper_left = column(100, 100, [f"upper left {t}" for t in PROSE])
    upper_right = column(560, 100, [f"upper right {t}" for t in PROSE])
    table_top = 100 + 8 * 40 - 10 + white
    table = _table_rows(table_top, 5)
    lower_top = table_top + 5 * 40 - 10 + white
    lower_left = column(100, lower_top, [f"lower left {t}" for t in PROSE])
    lower_right = column(560, lower_top, [f"lower right {t}" for t in PROSE])
    got = order_of([*lower_right, *table, *upper_right, *lower_left, *upper_left])
    cells = [l.text for l in sorted(table, key=lambda l: (l.box[1], l.box[0]))]
    assert got == [*(l.text for l in upper_left), *(l.text for l in upper_right), *cells,
                   *(l.text for l in lower_left), *(l.text for l in lower_right)]


def test_columns_under_a_figure_across_them_are_read_after_those_above_it():
    """A figure across both columns holds no lines: its white, several line heights
    tall, ends the columns above it; its caption is read before the columns under it."""
    upper_left = column(100, 100, [f"upper left {t}" for t in PROSE])
    upper_right = column(560, 100, [f"upper right {t}" for t in PROSE])
    caption = line("Figure 2. Revenue by region", 100, 100 + 8 * 40 + 300, 480)
    lower_left = column(100, 100 + 8 * 40 + 360, [f"lower left {t}" for t in PROSE])
    lower_right = column(560, 100 + 8 * 40 + 360, [f"lower right {t}" for t in PROSE])
    got = order_of([*lower_right, caption, *upper_right, *lower_left, *upper_left])
    assert got == [*(l.text for l in upper_left), *(l.text for l in upper_right),
                   caption.text, *(l.text for l in lower_left),
                   *(l.text for l in lower_right)]


def _worded(pieces: list[tuple[str, float]], y: float) -> Line:
    """One detected line over several runs of words, each (text, its left x): its words'
    boxes 12 px a character with 10 px between words, as a recogniser gives them."""
    words = []
    for text, x in pieces:
        for word in text.split():
            words.append(Word(word, [x, y, x + 12 * len(word), y + H], 0.9))
            x += 12 * len(word) + 10
    return Line(text=" ".join(w.text for w in words), box=[words[0].box[0], y,
                words[-1].box[2], y + H], score=0.9, words=words)


def test_lines_a_detector_joined_across_a_narrow_gutter_are_cut_there():
    """Issue 50: justified columns an em apart are one detected line a row; their words
    leave the gutter white down the page. The lines are cut there and the columns read
    one after the other; a form's label and value, whose white lines up as well, stay
    one line."""
    words = "the annual report shows that revenue grew in every region while costs stayed".split()
    lefts = [" ".join(words[i:i + 5]) for i in range(8)]
    rights = [" ".join(words[i + 1:i + 6]) for i in range(8)]
    joined = [_worded([(left, 100), (right, 492)], 100 + 40 * i)
              for i, (left, right) in enumerate(zip(lefts, rights))]
    assert all(l.box[2] - l.box[0] > 550 for l in joined)
    assert order_of(joined) == lefts + rights
    form = [_worded([(label, 100), (value, 492)], 100 + 40 * i)
            for i, (label, value) in enumerate([("Name:", "Jane Smith"), ("Date:", "12.03.2026"),
                                                ("Account:", "DE12 5001"), ("Phone:", "555 0100"),
                                                ("City:", "Berlin"), ("Country:", "Germany")])]
    assert len(read_order(form)[0].lines) == len(form)


def _block_markdown(rows: list[list[Line]]) -> str:
    return render([Block(rows=rows)]).markdown


def test_running_text_side_by_side_is_no_table():
    """Issue 50: rows that line up as a table's are running text where no column holds
    short cells (two columns of prose whose gutter was not found), or none but a
    list's numbers beside its hanging items; a column of labels makes a table of them
    ("Low-income | Less than 50")."""
    prose = [[line(f"left {t}", 100, 100 + 40 * i, 480), line(f"right {t}", 560, 100 + 40 * i, 940)]
             for i, t in enumerate(PROSE[:5])]
    assert "|" not in _block_markdown(prose)
    items = ["Opened on time the board thanks all staff", "for their work during a period",
             "Paper and toner were ordered before the", "new office in the north opened"]
    listed = [[line(f"{i // 2 + 1}.", 100, 100 + 40 * i, 130), line(text, 160, 100 + 40 * i, 560)]
              if i % 2 == 0 else [line(text, 160, 100 + 40 * i, 560)]
              for i, text in enumerate(items)]
    markdown = _block_markdown(listed)
    assert "|" not in markdown and all(text in markdown for text in items)
    labels = [("Income level of individual or geography", "% of the area median income"),
              ("Low-income", "Less than 50"), ("Moderate-income", "At least 50 and less than 80"),
              ("Middle-income", "At least 80 and less than 120"), ("Upper-income", "120 or more")]
    table = [[line(label, 100, 100 + 40 * i, 460), line(value, 560, 100 + 40 * i, 940)]
             for i, (label, value) in enumerate(labels)]
    assert _block_markdown(table).split("\n")[2] == "| Low-income | Less than 50 |"


def test_two_short_columns_of_running_text_are_read_one_after_the_other():
    """Two lines a column, too few to judge columns by their length: lines of running
    text that fill each side are columns; a form's two rows of labels and values are
    rows."""
    title = line("Two short columns", 100, 40, 400)
    left = column(100, 120, ["left one of a column of running prose text",
                             "left two of the column"])
    right = column(560, 120, ["right one of a column of running prose text",
                              "right two of the column"])
    assert order_of([*right, title, *left]) == [title.text, *(l.text for l in left),
                                                *(l.text for l in right)]
    form = [line("Name:", 100, 120, 180), line("Jane Smith", 560, 120, 700),
            line("Department of the office:", 100, 160, 400), line("Archives", 560, 160, 680)]
    assert order_of(form) == ["Name:", "Jane Smith", "Department of the office:", "Archives"]


def _justified(text: str, x0: float, x1: float, y: float) -> list[Word]:
    """The words of a justified line from ``x0`` to ``x1``: 12 px a character, the
    white shared out between them, as a typesetter spreads it."""
    words = text.split()
    white = (x1 - x0 - 12 * sum(len(word) for word in words)) / (len(words) - 1)
    boxes, x = [], x0
    for word in words:
        boxes.append(Word(word, [x, y, x + 12 * len(word), y + H], 0.9))
        x += 12 * len(word) + white
    return boxes


def test_a_few_lines_joined_across_a_column_gutter_are_cut_there():
    """Issue 50: where a gutter is too narrow for a detector's boxes, it joins a few
    rows of two columns into one line, too few to be cut for themselves; the columns'
    other lines, running text that ends and starts at the gutter, show it is one, and
    the joined lines are cut there (they had split the page across both columns)."""
    words = ("the annual report shows that revenue grew in every region while costs "
             "stayed close to the plan of last year").split()
    lefts = [" ".join(words[i:i + 6]) for i in range(11)]
    rights = [" ".join(words[i + 2:i + 7]) for i in range(11)]
    lines = []
    for i, (left, right) in enumerate(zip(lefts, rights)):
        y = 100 + 40 * i
        halves = [_justified(left, 100, 560, y), _justified(right, 580, 1040, y)]
        pieces = [halves[0] + halves[1]] if i < 3 else halves
        lines += [Line(text=" ".join(w.text for w in words), score=0.9, words=words,
                       box=[words[0].box[0], y, words[-1].box[2], y + H])
                  for words in pieces]
    assert order_of(lines) == lefts + rights


def test_a_line_up_the_side_margin_is_read_with_the_foot_of_the_page():
    """A line printed up the page beside everything else (a journal's download stamp)
    is page furniture, read after the body; one turned on its side between the page's
    lines (a table's turned heading) stays where it stands."""
    body = column(100, 100, PROSE)
    stamp = line("Downloaded from archive.example.org on July 24, 2024", 20, 120, 50, h=700)
    blocks = read_order([stamp, *body])
    assert [l.text for block in blocks for l in block.lines] == [*(l.text for l in body), stamp.text]
    assert blocks[-1].furniture == "footer" and blocks[0].furniture is None
    turned = line("Turned heading", 520, 100, 550, h=300)
    right = column(600, 100, PROSE)
    assert all(block.furniture is None for block in read_order([turned, *body, *right]))


def test_a_stamp_cut_in_pieces_up_the_margin_is_read_with_the_foot_of_the_page():
    """A scanned paper's arXiv stamp, which the detector cut in four (PDF-Extract-Kit's
    paper.png): two pieces turned on their side, two short ones ("3", "202") in the
    same strip. They joined the left column's rows, a table of stamp and text; they
    are furniture now, read up the margin from its foot, after the body."""
    body = column(100, 100, PROSE + PROSE)
    pieces = [line("202", 16, 100, 59, h=87), line("3334v2 [stat.ML]", 10, 230, 65, h=334),
              line("3", 22, 551, 53, h=26), line("arXiv:21", 14, 600, 62, h=158)]
    blocks = read_order([*pieces, *body])
    assert [l.text for block in blocks for l in block.lines] == [
        *(l.text for l in body), *(l.text for l in pieces[::-1])]
    assert blocks[-1].furniture == "footer"


def test_a_word_up_the_binding_found_a_character_at_a_time_is_furniture():
    """An exam paper's binding strip (PDF-Extract-Kit's exam_paper.png): "密封线内要答题"
    printed up the margin, which the detector found a character at a time, far apart.
    The characters joined the questions' rows; they are furniture, read up the margin.
    Numbers down the margin (a transcript's line numbers) stay where they stand."""
    body = column(100, 100, [f"左{t}" for t in ZH + ZH])
    glyphs = [line(ch, 40, 720 - 80 * i, 60) for i, ch in enumerate("密封线内要答题")]
    blocks = read_order([*glyphs, *body])
    assert [l.text for block in blocks for l in block.lines] == [
        *(l.text for l in body), *"密封线内要答题"]
    assert blocks[-1].furniture == "footer"
    numbers = [line(str(i), 40, 100 + 40 * i, 60) for i in range(1, 8)]
    assert all(block.furniture is None for block in read_order([*numbers, *body]))


def test_two_short_columns_that_end_their_paragraphs_are_read_one_after_the_other():
    """Issue 52: two columns of a line of running text and its paragraph's short end
    each were read line by line across the gutter. Two rows of a form or a table stay
    rows: long labels marked as labels beside long values, labels in a stack narrower
    than the values', a table's cells centred in their columns."""
    left = [line("Sales grew in every region this year while", 100, 120, 480),
            line("costs stayed on plan.", 100, 160)]
    right = [line("The board thanks every member of staff for", 560, 120, 940),
             line("the work.", 560, 160)]
    assert order_of([*right, *left]) == [l.text for l in left + right]
    marked = [line("Full name of the applicant:", 100, 120, 480),
              line("Jane Elizabeth Smith of Cambridge", 560, 120, 940),
              line("Address:", 100, 160), line("12 High Street", 560, 160)]
    assert order_of(marked[::-1]) == [l.text for l in marked]
    narrower = [line("Name of the account holder", 100, 120, 400),
                line("Jane Elizabeth Smith of Cambridge, United Kingdom", 560, 120, 1100),
                line("Bank", 100, 160), line("Northwind Savings", 560, 160)]
    assert order_of(narrower[::-1]) == [l.text for l in narrower]
    centred = [line("Sales grew in every region this year while", 100, 120, 480),
               line("The board thanks every member of staff for", 560, 120, 940),
               line("costs stayed on plan.", 140, 160), line("the work.", 690, 160)]
    assert order_of(centred[::-1]) == [l.text for l in centred]


def test_a_short_double_spaced_page_reads_in_paragraphs_not_a_paragraph_a_line():
    """Page 2 of a listed company's quarterly report (pdfplumber's issue-67-example.pdf,
    scanned at 200 dpi and read by OCR; its geometry): three paragraphs, double-spaced,
    each opened two characters in. With six lines of running text the page is not
    typeset enough to measure its line spacing (TYPESET_LINES), so each line, a line
    height of white under the last, was a section and a paragraph of its own, and
    sentences were cut in two. Its spacing is now measured where its lines wrap (a line
    that fills the measure and the line under it, starting at the margin): the
    paragraphs read whole, apart where more white and an indent open the next."""
    paragraphs = [["公司董事会、监事会及董事、监事、高级管理人员保证季度报告内容的真",
                   "实、准确、完整，不存在虚假记载、误导性陈述或者重大遗漏，并承担个别和",
                   "连带的法律责任。"],
                  ["所有董事均已出席了审议本次季报的董事会会议。"],
                  ["公司负责人刘道骐、主管会计工作负责人肖寻及会计机构负责人(会计主管",
                   "人员)钱扣明声明：保证季度报告中财务报表的真实、准确、完整。"]]
    boxes = [[83, 239, 990, 268], [28, 301, 990, 331], [26, 360, 238, 393],
             [83, 434, 687, 467], [84, 507, 990, 537], [29, 567, 835, 601]]
    texts = [text for paragraph in paragraphs for text in paragraph]
    lines = [Line(text=text, box=box, score=0.95) for text, box in zip(texts, boxes)]
    lines += [Line(text="东北电气发展股份有限公司2018年第一季度报告全文", box=[299, 27, 720, 47],
                   score=0.95),
              Line(text="第一节 重要提示", box=[386, 134, 631, 170], score=0.95),
              Line(text="2", box=[25, 1492, 41, 1514], score=0.95)]
    markdown = read_lines(lines, page_height=1536).markdown
    body = markdown.split("第一节 重要提示\n\n", 1)[1].split("\n\n## Page furniture")[0]
    assert body.split("\n\n") == ["\n".join(paragraph) for paragraph in paragraphs]
