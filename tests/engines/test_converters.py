"""Model answers in each family's own format become Markdown that passes the format
contract, with the structure of the answer: real answers from
tests/fixtures/model_outputs (see SOURCES.md there), plus cut-off and malformed ones."""

import json
from pathlib import Path

import pytest

from appliance.engines.converters import to_markdown
from appliance.quality.blocks import format_problems, parse_blocks

FIXTURES = Path(__file__).parent.parent / "fixtures" / "model_outputs"
FORMATS = ["markdown", "html_markdown", "paddleocr_vl", "dots_layout_json", "deepseek_grounding"]
HEADER = ["项目名称", "数量/单位", "金额(元)", "备注"]
FIGURE_1 = "Figure 1: Four examples of complex page layouts across different document categories"


def convert(output_format: str, fixture: str) -> list:
    markdown = to_markdown(output_format, (FIXTURES / fixture).read_text(encoding="utf-8"))
    assert format_problems(markdown) == []  # an HTML table only where its cells span
    assert "<|" not in markdown
    return parse_blocks(markdown)


def kinds(blocks) -> list[str]:
    return [block.kind for block in blocks]


def headings(blocks) -> list[tuple[int, str]]:
    return [(block.level, block.text) for block in blocks if block.kind == "heading"]


def tables(blocks) -> list[list[list[str]]]:
    return [block.rows for block in blocks if block.kind == "table"]


def maths(blocks) -> list[str]:
    return [block.text for block in blocks if block.kind == "math"]


def shape(rows) -> tuple[int, set[int]]:
    return len(rows), {len(row) for row in rows}


# --- real answers -----------------------------------------------------------------------


def test_dots_layout_page_headings_and_all_cells_despite_the_missing_bracket():
    blocks = convert("dots_layout_json", "dots_ocr-layout-page.json")
    assert headings(blocks) == [
        (1, "DocLayNet: A Large Human-Annotated Dataset for Document-Layout Analysis"),
        (2, "ABSTRACT"), (2, "CCS CONCEPTS"), (2, "KEYWORDS"), (2, "ACM Reference Format:"),
    ]
    assert blocks[0].text == "arXiv:2206.01062v1 [cs.CV] 2 Jun 2022"
    # the last cell (a Footnote) is read though the answer has no closing "]"
    assert blocks[-1].text == "https://doi.org/10.1145/3534678.3539043"
    assert FIGURE_1 in [block.text for block in blocks]


def test_dots_layout_list_items_stay_lists():
    blocks = convert("dots_layout_json", "dots_ocr-layout-list.json")
    assert [text for _, text in headings(blocks)] == [
        "The Evolution of the Word Processor",
        "Pre-Digital Era (19th - Early 20th Century)",
        "The Birth of Word Processing (1960s - 1970s)",
        "The Rise of Personal Computers (1980s)",
    ]
    lists = [block.text for block in blocks if block.kind == "list"]
    assert len(lists) == 2
    assert lists[0].startswith("IBM MT/ST (Magnetic Tape/Selectric Typewriter):")
    assert "Wang Laboratories:" in lists[0]
    assert lists[1].startswith("WordStar (1978):") and "Microsoft Word (1983):" in lists[1]


def test_dots_table_loop_cut_mid_tag_keeps_both_tables():
    blocks = convert("dots_layout_json", "dots_ocr-table-loop-cut.json")
    assert kinds(blocks) == ["table", "table"]
    first, second = tables(blocks)
    assert shape(first) == (6, {4}) and first[0] == HEADER
    assert first[5] == ["金额合计(大写)", "壹仟伍佰叁拾捌元肆角", "", ""]
    # header, the 1,294.00 row, 16 empty rows, and the row the cut broke off
    assert shape(second) == (19, {4}) and second[0] == HEADER
    assert second[1] == ["", "", "1,294.00", ""]


@pytest.mark.parametrize("output_format", ["markdown", "html_markdown"])
def test_dots_table_colspan_stays_a_table_whose_cells_span(output_format):
    [table] = [block for block in convert(output_format, "dots_ocr-table-colspan.txt")
               if block.kind == "table"]
    assert shape(table.rows) == (4, {8, 4})
    assert table.rows[0] == HEADER + HEADER
    assert table.rows[3] == ["金额合计(大写) 贰拾伍元整", "", "(小写)25.00", ""]
    assert table.spans[3] == [[1, 1], [1, 3], [1, 1], [1, 3]]


def test_deepseek_grounding_table_with_rowspan_and_colspan():
    blocks = convert("deepseek_grounding", "deepseek_ocr-grounding-table.txt")
    assert kinds(blocks) == ["paragraph", "heading", "paragraph", "paragraph", "table",
                             "heading", "paragraph", "paragraph"]
    assert headings(blocks) == [(3, "5.1 Hyper Parameter Optimization"),
                                (3, "5.2 Quantitative Results")]
    assert blocks[3].text.startswith("Table 1. HPO performed in OTSL and HTML")  # the caption
    table = blocks[4]
    assert len(table.rows) == 10
    assert table.rows[0] == ["# enc-layers", "# dec-layers", "Language", "TEDs", "mAP (0.75)",
                             "Inference time (secs)"]
    assert table.spans[0] == [[2, 1], [2, 1], [2, 1], [1, 3], [2, 1], [2, 1]]
    assert table.rows[1] == ["simple", "complex", "all"]
    assert table.rows[2] == ["6", "6", "OTSL", "0.965", "0.934", "0.955", "0.88", "2.73"]
    assert table.rows[3][0] == "HTML"  # beside the rowspan="2" cells
    assert "$2x$ speed up" in blocks[2].text  # \( \) became $ $


def test_deepseek_grounding_title_and_centered_caption():
    blocks = convert("deepseek_grounding", "deepseek_ocr-grounding-title.txt")
    assert headings(blocks) == [
        (1, "DocLayNet: A Large Human-Annotated Dataset for Document-Layout Analysis"),
        (2, "ABSTRACT"), (2, "CCS CONCEPTS"), (2, "KEYWORDS"), (2, "ACM Reference Format:"),
    ]
    texts = [block.text for block in blocks]
    assert FIGURE_1 in texts  # the <center> around it is gone
    assert not any("<center>" in text for text in texts)


def test_deepseek_grounding_equations_and_broken_boxes():
    blocks = convert("deepseek_grounding", "deepseek_ocr-grounding-equations.txt")
    # the sub_title has no "#" of its own; without one it would read as a list from 3.
    assert headings(blocks) == [(2, "3. Lösung von DGL 1. Ordnung")]
    formulas = maths(blocks)
    assert len(formulas) == 11
    assert formulas[0].startswith("\\begin{align*}") and formulas[0].endswith("\\end{align*}")
    # behind "<|det|>[0.5ex] " (no <|/det|>): the box goes, the formula stays
    assert "y' = y; \\quad y_1(x) = e^x, \\quad y_2(x) = 3e^x." in formulas
    assert not any("0.5ex" in block.text for block in blocks)


@pytest.mark.parametrize("output_format", ["markdown", "html_markdown"])
def test_glm_table_recognition(output_format):
    [table] = tables(convert(output_format, "glm_ocr-table.txt"))
    assert shape(table) == (10, {4})
    assert table[0] == ["项目", "本期金额", "上期金额", "说明"]
    assert table[1] == ["非流动性资产处置损益，包括已计提资产减值准备的冲销部分",
                        "-342,273.79", "-828,932.00", ""]


def test_glm_sdk_page_headings_and_formulas():
    blocks = convert("html_markdown", "glm_ocr-page-sdk.txt")
    assert headings(blocks) == [(2, "7.4 胶缝"), (2, "8 点支承玻璃幕墙结构设计"),
                                (2, "8.1 玻璃面板")]
    formulas = maths(blocks)
    assert len(formulas) == 6
    assert formulas[0] == "\\frac {q l}{2 t _ {1}} \\leqslant f _ {1}"


def test_paddleocr_vl_answers_per_task():
    assert [(b.kind, b.text) for b in convert("paddleocr_vl", "paddleocr_vl-ocr.txt")] \
        == [("paragraph", "生甘草")]
    assert [(b.kind, b.text) for b in convert("paddleocr_vl", "paddleocr_vl-formula.txt")] \
        == [("math", "t_{n}\\in[0,\\infty]")]

    [otsl] = tables(convert("paddleocr_vl", "paddleocr_vl-table-otsl.txt"))
    assert shape(otsl) == (8, {3})
    assert otsl[0] == ["分组", "频数", "频率"]
    assert otsl[1] == ["[41,51)", "2", "$\\frac{2}{30}$"]
    assert otsl[7] == ["[101,111)", "2", "$\\frac{2}{30}$"]

    [chart] = tables(convert("paddleocr_vl", "paddleocr_vl-chart.txt"))
    assert shape(chart) == (5, {3})
    assert chart[0] == ["", "22Q3", "22Q3yoy"]
    assert chart[4] == ["外围地区", "45", "20%"]


def test_lightonocr_answer_cut_in_a_table_row():
    blocks = convert("html_markdown", "lightonocr-receipt-cut.txt")
    assert [b.text for b in blocks] == [
        "Document No : TD01167104", "Date : 25/12/2018 8:13:39 PM", "Cashier : MANIS",
        "Member :", "CASH BILL", "| CODE"]
    assert set(kinds(blocks)) == {"paragraph"}


def test_hunyuan_inline_math_passes_through():
    [block] = convert("html_markdown", "hunyuan_ocr-doc-parse-excerpt.txt")
    assert block.kind == "paragraph"
    assert "$ J^{q}/J^{q+1} $ is an $ (R/J) $-module; hence, by Corollary 8.43," in block.text


# --- cut-off, malformed and unknown ------------------------------------------------------


def test_dots_json_cut_mid_text_keeps_the_text_read_so_far():
    answer = (FIXTURES / "dots_ocr-layout-page.json").read_text(encoding="utf-8")
    cut = answer[: answer.index("are of adequate size to train such models")]
    markdown = to_markdown("dots_layout_json", cut)
    assert format_problems(markdown) == []
    blocks = parse_blocks(markdown)
    assert headings(blocks)[-1] == (2, "ABSTRACT")
    assert blocks[-1].text.startswith("Accurate document layout analysis is a key requirement")
    assert blocks[-1].text.endswith("While these datasets")


def test_dots_json_cut_before_any_text_keeps_the_cells_before():
    answer = (FIXTURES / "dots_ocr-layout-page.json").read_text(encoding="utf-8")
    cut = answer[: answer.index('[104, 1106')]  # inside the bbox of "CCS CONCEPTS"
    blocks = parse_blocks(to_markdown("dots_layout_json", cut))
    assert headings(blocks)[-1] == (2, "ABSTRACT")
    assert blocks[-1].text.endswith(
        "the preferred choice for general-purpose document-layout analysis.")


def test_dots_answer_that_is_no_layout_json_falls_back_to_the_text():
    assert to_markdown("dots_layout_json", "[not json") == "[not json"
    table = (FIXTURES / "glm_ocr-table.txt").read_text(encoding="utf-8")
    assert to_markdown("dots_layout_json", table) == to_markdown("html_markdown", table)


def test_dots_categories():
    cells = [
        {"bbox": [0, 0, 1, 1], "category": "Page-header", "text": "Running head"},
        {"bbox": [0, 0, 1, 1], "category": "Picture"},
        {"bbox": [0, 0, 1, 1], "category": "Title", "text": "A title\nover two lines"},
        {"bbox": [0, 0, 1, 1], "category": "Formula", "text": "$$E = mc^2$$"},
        {"bbox": [0, 0, 1, 1], "category": "Formula", "text": "\\[a^2 + b^2 = c^2\\]"},
        {"bbox": [0, 0, 1, 1], "category": "List-item", "text": "no marker"},
        {"bbox": [0, 0, 1, 1], "category": "Page-footer", "text": "12"},
    ]
    markdown = to_markdown("dots_layout_json", json.dumps(cells))
    assert [(b.kind, b.text) for b in parse_blocks(markdown)] == [
        ("heading", "A title over two lines"), ("math", "E = mc^2"),
        ("math", "a^2 + b^2 = c^2"), ("list", "no marker")]


def test_a_spanning_html_table_is_rebuilt_from_its_cells():
    # a model's HTML is never passed on: the tags and spans are written again, the
    # text escaped, every other attribute and element dropped
    answer = ('<table><tr><th rowspan="2" onclick="alert(1)">a|b<script>x</script></th>'
              '<th colspan="2">x<br>y &lt;img src=x onerror=alert(1)&gt;</th></tr>'
              '<tr><td>\\(z\\)</td><td style="color:red">w</td></tr><tr><td>1</td></tr></table>')
    markdown = to_markdown("markdown", answer)
    assert markdown.splitlines() == [
        "<table>", "<thead>",
        '<tr><th rowspan="2">a|bx</th><th colspan="2">x y &lt;img src=x onerror=alert(1)&gt;</th></tr>',
        "</thead>", "<tbody>", "<tr><td>$z$</td><td>w</td></tr>", "<tr><td>1</td></tr>",
        "</tbody>", "</table>"]
    assert format_problems(markdown) == []
    [table] = tables(parse_blocks(markdown))
    assert table == [["a|bx", "x y <img src=x onerror=alert(1)>"], ["$z$", "w"], ["1"]]
    # without a span it is a pipe table, as before
    assert to_markdown("markdown", "<table><tr><th>a|b</th><th>c</th></tr>"
                                   "<tr><td>1</td><td>2</td></tr></table>").splitlines() == [
        "| a\\|b | c |", "| --- | --- |", "| 1 | 2 |"]


def test_otsl_spans_are_the_spans_of_an_html_table():
    [table] = [block for block in parse_blocks(to_markdown(
        "paddleocr_vl", "<fcel>H<lcel><fcel>A<nl><fcel>R<fcel>1<fcel>2<nl><ucel><ecel><ecel><nl>"))
        if block.kind == "table"]
    assert table.rows == [["H", "A"], ["R", "1", "2"], ["", ""]]
    assert table.spans == [[[1, 2], [1, 1]], [[2, 1], [1, 1], [1, 1]], [[1, 1], [1, 1]]]
    # without a span, a pipe table
    [plain] = tables(parse_blocks(to_markdown("paddleocr_vl", "<fcel>a<fcel>b<nl><fcel>1<ecel><nl>")))
    assert plain == [["a", "b"], ["1", ""]]


def test_bracket_escapes_in_running_text_are_not_math():
    assert to_markdown("html_markdown", "See \\[1\\] and \\[2\\].") == "See \\[1\\] and \\[2\\]."


def test_unknown_format_is_refused():
    with pytest.raises(ValueError, match="'gemma3'.*dots_layout_json"):
        to_markdown("gemma3", "text")


@pytest.mark.parametrize("output_format", FORMATS)
@pytest.mark.parametrize("answer", ["", " \n\n "])
def test_empty_answer_is_empty_markdown(output_format, answer):
    assert to_markdown(output_format, answer) == ""
