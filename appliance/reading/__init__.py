"""How a page reads: reading order and structure from the boxes of recognised lines."""

from __future__ import annotations

from appliance.engines.base import Line, Recognition


def read_lines(lines: list[Line], lean_deg: float = 0.0) -> Recognition:
    """A page's reading from its line boxes, whoever found them (the classic engine,
    a PDF's own text): its lines in reading order with their blocks and roles, its
    text and its Markdown (``reading.order``, ``reading.markdown``)."""
    from appliance.reading.markdown import render
    from appliance.reading.order import read_order

    page = render(read_order(lines, lean_deg=lean_deg))
    return Recognition(text=page.text, markdown=page.markdown, lines=page.lines)
