"""How a page reads: reading order and structure from the boxes of recognised lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

from appliance.page import Line, Recognition

if TYPE_CHECKING:
    from appliance.reading.markdown import TableReader

# How lines become text and Markdown, by version: bump it when that changes. A page's
# provenance names the version that read it (``pipeline.read``).
RECIPE = "layout/v28"


def read_lines(lines: list[Line], lean_deg: float = 0.0,
               page_furniture: str = "separate",
               page_height: float | None = None,
               table_reader: TableReader | None = None) -> Recognition:
    """A page's reading from its line boxes, whoever found them (the classic engine,
    a PDF's own text): its lines in reading order with their blocks and roles, its
    text and its Markdown with the page furniture placed as ``page_furniture`` says
    (``reading.order``, ``reading.markdown``), and the layout doubt of running text
    read across a gutter (``reading.doubt``). ``page_height``: the page's, in the
    lines' pixels, where the caller knows it. ``table_reader``: another reader of the
    tables' structure (``reading.markdown.TableReader``)."""
    from appliance.reading.doubt import LAYOUT_DOUBT, layout_doubt
    from appliance.reading.markdown import render
    from appliance.reading.order import read_order

    blocks = read_order(lines, lean_deg=lean_deg, page_height=page_height)
    page = render(blocks, page_furniture, table_reader)
    doubt = layout_doubt(blocks)
    return Recognition(text=page.text, markdown=page.markdown, lines=page.lines,
                       flags=[LAYOUT_DOUBT] if doubt else [],
                       provenance={LAYOUT_DOUBT: doubt} if doubt else {})
