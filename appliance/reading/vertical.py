"""Vertical text: Chinese, Japanese and Korean set in columns (a headline beside the
body, a classical page), each column read top to bottom, the columns right to left.

A line is a column when its box stands at least ``VERTICAL_ASPECT`` times taller than
wide and most of its letters are of a script that is written so. The engine has read
such a crop turned (RapidOCR turns one 1.5 times taller than wide) and gives each
character's box. Latin text turned on its side (a book's spine, a journal's download
stamp up the margin) is no column: the engine reads the crop turned whichever way
reads better, and it stays a line (in the side margin, furniture: ``reading.order``).

Columns side by side, overlapping over most of the shorter one's height and at most
``COLUMN_GAP`` column widths apart, are one block, read right to left. The page's
other lines are read as before (``reading.order``); a block of columns stands before
the first of their blocks that does not end above its top.
"""

from __future__ import annotations

import re

from appliance.engines.base import Line

VERTICAL_ASPECT = 1.5  # as RapidOCR's: a crop this much taller than wide is read turned
SCRIPT_SHARE = 0.5  # of a column's letters at least, in a script written in columns
# the columns of a classical page stand one to one and a half widths apart
COLUMN_GAP = 2.0
COLUMN_OVERLAP = 0.5  # of the shorter column's height, for two columns of one block
# Han (with its extensions and compatibility forms), kana, Hangul syllables
_VERTICAL_SCRIPT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af"
                              r"\uf900-\ufaff]")


def is_column(box, text: str) -> bool:
    """Whether a line of ``text`` in ``box`` is a column of vertical text."""
    x0, y0, x1, y1 = box
    letters = [ch for ch in text if ch.isalnum()]
    if x1 <= x0 or y1 - y0 < VERTICAL_ASPECT * (x1 - x0) or len(letters) < 2:
        return False
    return sum(bool(_VERTICAL_SCRIPT.match(ch)) for ch in letters) >= SCRIPT_SHARE * len(letters)


def column_blocks(columns: list[Line]) -> list[list[Line]]:
    """The columns grouped into blocks, each block's columns right to left; the blocks
    top to bottom (right before left where they start level)."""
    blocks: list[list[Line]] = []
    for column in sorted(columns, key=lambda line: -line.box[2]):
        for block in blocks:
            if _next_column(block[-1], column):
                block.append(column)
                break
        else:
            blocks.append([column])
    return sorted(blocks, key=lambda block: (min(line.box[1] for line in block),
                                             -max(line.box[2] for line in block)))


def _next_column(right: Line, column: Line) -> bool:
    """Whether ``column`` is the one read after ``right`` in a block: left of it, near,
    and beside it over most of their heights."""
    width = max(right.box[2] - right.box[0], column.box[2] - column.box[0])
    gap = right.box[0] - column.box[2]
    overlap = min(right.box[3], column.box[3]) - max(right.box[1], column.box[1])
    shorter = min(right.box[3] - right.box[1], column.box[3] - column.box[1])
    return -width / 2 <= gap <= COLUMN_GAP * width and overlap >= COLUMN_OVERLAP * shorter
