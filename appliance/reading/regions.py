"""The regions of a page set in columns, from its pixel layout alone, in reading order:
each column and each title, caption or footer across them.

A vision model reads such a page column by column (``engines.tiling``): a full-width
strip of it holds the tops of all its columns side by side, which a model reading strip
after strip interleaves. The regions are the reading order's blocks (``reading.order``)
of the layout's line boxes, which stand in for lines of text; the engine is handed this
finder with the page (``PageRequest.columns``), as it knows nothing of reading.
"""

from __future__ import annotations

import math

from appliance.page import Line
from appliance.raster.layout import Layout
from appliance.reading.order import read_order

Box = tuple[int, int, int, int]

# A word and its space in Latin print are about this many character heights wide: the
# pixel layout has no text, and the reading order's column test counts words per line.
WORD_WIDTH = 3.0
# Print this many times the body's size is a title's: its words are joined again.
LARGE_PRINT = 1.5
# A column of a page set in columns runs at least this share of the text's height, and
# the regions (columns, titles, captions, footers) are at most this many per column.
COLUMN_SHARE = 0.25
MAX_REGIONS_PER_COLUMN = 3
# A column is at least this many lines of print tall.
COLUMN_LINES = 3
# A region reaches this many character heights past its lines' boxes (ascenders,
# descenders and accents the box of smeared glyphs may clip).
REGION_MARGIN = 0.6


def column_regions(layout: Layout, width: int, height: int) -> list[Box] | None:
    """The regions of a page set in columns, in reading order: each column (the blocks
    of the reading order stacked in one column, joined) and each title, caption or
    footer across them. None for a page not set in columns (no two blocks side by
    side), a form or a receipt among them: the reading order keeps label and value
    stacks in rows."""
    size = layout.char_height_px
    if not size or len(layout.line_boxes) < 2:
        return None
    # stand-in text, a one-letter word per estimated word: with no words of letters and
    # no figures, only the rule for prose on both sides of a gutter can hold; the rules
    # that need the text (a table's rows, a sidebar beside prose, an address) cannot
    # tell a ruled table's columns from a page's without it
    lines = [Line(" ".join("w" * max(1, round((right - left) / (WORD_WIDTH * size)))),
                  [left, top, right, bottom], 1.0)
             for left, top, right, bottom in _large_print_joined(layout.line_boxes, size)]
    boxes = [block.box for block in read_order(lines)]
    # a block beside a column (lines of text over three lines tall) is part of one; one
    # beside none spans the columns, or is a word of a title set wide
    in_column = [any(_side_by_side(box, other) and other[3] - other[1] > COLUMN_LINES * size
                     for other in boxes if other is not box)
                 for box in boxes]
    if not any(in_column):
        return None
    regions: list[list[float]] = []
    joinable = False  # whether the region before was part of a column
    for box, part in zip(boxes, in_column):
        if part and joinable and _one_column(regions[-1], box):
            regions[-1] = [min(regions[-1][0], box[0]), regions[-1][1],
                           max(regions[-1][2], box[2]), max(regions[-1][3], box[3])]
        else:
            regions.append(list(box))
        joinable = part
    # columns hold most of the page's text: a form with a few short blocks side by side
    # would be cut into many small regions and is read in strips
    extent = max(r[3] for r in regions) - min(r[1] for r in regions)
    tall = [r for r in regions if r[3] - r[1] >= COLUMN_SHARE * extent]
    if (not any(_side_by_side(a, b) for i, a in enumerate(tall) for b in tall[i + 1:])
            or len(regions) > MAX_REGIONS_PER_COLUMN * len(tall)):
        return None
    pad = REGION_MARGIN * size
    return [(max(0, int(left - pad)), max(0, int(top - pad)),
             min(width, math.ceil(right + pad)), min(height, math.ceil(bottom + pad)))
            for left, top, right, bottom in regions]


def _large_print_joined(boxes: list[Box], size: float) -> list[Box]:
    """The line boxes with the words of large print (a title) that the layout's smear,
    sized for the body text, left apart joined again along their line."""
    joined: list[list[int]] = []
    for box in sorted(boxes, key=lambda b: (b[1], b[0])):
        tall = box[3] - box[1]
        last = next((other for other in reversed(joined)
                     if tall > LARGE_PRINT * size and other[3] - other[1] > LARGE_PRINT * size
                     and min(box[3], other[3]) - max(box[1], other[1]) > 0.5 * tall
                     and 0 <= box[0] - other[2] < tall), None)
        if last is None:
            joined.append(list(box))
        else:
            last[:] = [last[0], min(last[1], box[1]), box[2], max(last[3], box[3])]
    return [tuple(box) for box in joined]


def _side_by_side(a: list[float], b: list[float]) -> bool:
    return a[1] < b[3] and b[1] < a[3] and (a[2] <= b[0] or b[2] <= a[0])


def _one_column(above: list[float], below: list[float]) -> bool:
    """Whether ``below`` goes on the column ``above`` ends: under it, mostly across the
    same stretch of the page."""
    shared = min(above[2], below[2]) - max(above[0], below[0])
    return below[1] >= above[3] - 1 and shared > 0.5 * min(above[2] - above[0],
                                                           below[2] - below[0])
