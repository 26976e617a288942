"""Vertical text: Chinese, Japanese and Korean set in columns (a headline beside the
body, a classical page), each column read top to bottom, the columns right to left.

A line is a column when its box stands at least ``VERTICAL_ASPECT`` times taller than
wide and most of its letters are of a script that is written so (``page.is_column``).
The engine has read such a crop turned (RapidOCR turns one 1.5 times taller than wide) and gives each
character's box. Latin text turned on its side (a book's spine, a journal's download
stamp up the margin) is no column: the engine reads the crop turned whichever way
reads better, and it stays a line (in the side margin, furniture: ``reading.order``).

Columns side by side, overlapping over most of the shorter one's height and at most
``COLUMN_GAP`` column widths apart, are one block, read right to left. The page's
other lines are read as before (``reading.order``); a block of columns stands before
the first of their blocks that does not end above its top.
"""

from __future__ import annotations

from appliance.page import Line

# the columns of a classical page stand one to one and a half widths apart
COLUMN_GAP = 2.0
COLUMN_OVERLAP = 0.5  # of the shorter column's height, for two columns of one block


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
