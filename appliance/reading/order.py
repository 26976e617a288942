"""Reading order from line boxes: columns read top to bottom, one after the other;
forms and receipts read row by row.

A recursive XY-cut on the boxes of the recognised lines (no pixels: any engine that
gives line boxes can use it). A region of the page is cut

1. down a *gutter*: a vertical strip of white at least ``MIN_GUTTER`` line heights
   wide, when what lies on either side is a column of prose (``_is_column_cut``),
   judged section by section (``_columns_hold``). A few lines may cross the
   strip (a title, a caption, a footer across the page): they become *spanners*. The
   region is then cut across above and below each spanner, so that the columns
   between two spanners are read one after the other, left before right, and each
   spanner in its place between them; but where a gutter no line crosses holds too
   and a spanner stands beside other lines (a magazine's headline right of its first
   column), the region is cut down that gutter first. Sections above the first one
   that reads as columns (a page header, a report's banner) are read first
   (``_head_above_columns``);
2. across a *section gap*: white across the full width of the region, taller than
   ``SECTION_GAP`` line heights. Top goes before bottom;
3. otherwise it is one block, read as rows: a row is the lines whose vertical
   centres lie within half a line height of the row's own centre, left to right.

Why the column test matters: a receipt or a form has a white strip between its labels
and its values too ("CASH ... 30.90"), and reading all labels before all values
turns it into nonsense. Typeset columns hold prose, lines of four words and more;
labels and values have one to three. A long run of rows that fill their side with
prose, or with a table's rows (a label and its figures) that do not go on across the
gutter, beside other matter of some length (a report's sidebar of analysts' names and
charts, a column with tables in it) is a column as well, unless that other side is a
column of figures (a receipt's prices beside long item names), or nearly all of its
rows go on across the gutter to matter that does not read on its own (a table whose
first column holds long names, with phone and e-mail beside them). A typeset column (most
rows one line of running text) is read on its own beside even one or two lines: a
headline beside it is no row of it. An address beside values that carry their own
labels (an invoice's "Invoice to" block beside its number and dates) is a block of
its own as well: its lines are not their labels. (A test that also took sides whose lines
do not share rows for columns read FUNSD's forms worse: multi-line values and
signature blocks beside a label stack look exactly like that; and typeset columns of
one leading share rows as often.)
"""

from __future__ import annotations

import math
import re
import statistics
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from appliance.engines.base import Line

# White across a region at least this many median line heights tall separates sections.
# Under 0.9: a real brochure (OCRmyPDF's linn.png) has 0.75 between a bulleted list
# across the page and the two columns under it; at 0.9 the page was one block, read
# row by row across both columns.
SECTION_GAP = 0.7
# A gutter is at least this many median line heights wide. Typeset reports keep theirs
# narrow: one of the real report pages measured has 18 px of white between columns of
# 37 px lines, and word spaces inside a line are not gutters (the lines hold them).
MIN_GUTTER = 0.4
# Each side of a column cut has at least this many lines.
MIN_COLUMN_LINES = 3
# Prose: the median line of a side has at least this many words (a form's labels and
# values have one to three, a column of running text five or more).
PROSE_WORDS = 4
# One side is a column beside something else when it runs at least this many rows, at
# least half of them filling this share of the side's width with running text or a
# table's row ("Revenue (US$ m)  915.9  1,382.7"), and the other side has at least
# SIDEBAR_LINES lines (a sidebar, not three notes beside a form's values), at most
# MAX_FIGURE_SHARE of them a figure or two ("RM48.70 z", "45,866").
COLUMN_RUN = 10
PROSE_FILL = 0.6
SIDEBAR_LINES = 5
MAX_FIGURE_SHARE = 0.7
# ... unless at least TABLE_ROW_SHARE of its rows go on across the gutter (a table's
# rows; typeset prose beside a sidebar shares 20 to 70 % of its rows by chance).
TABLE_ROW_SHARE = 0.9
# A typeset column (RUNNING_SHARE of its rows one line of running text that fills it)
# is read on its own beside anything that is not figures, however short: a magazine's
# headline and subtitle beside its first column, a note in the margin.
RUNNING_SHARE = 0.75
_DIGIT = re.compile(r"\d")
_WORD = re.compile(r"[^\W\d_]{3,}")  # a word of letters, not a code or a unit
# An address beside values that carry their own labels (an invoice's "Invoice to" block
# beside its number and dates) is two blocks, not labels and values: an address is
# MIN_COLUMN_LINES to ADDRESS_LINES lines, one a row, aligned left, each with a word,
# none labelled; at least LABELLED_SHARE of the other side's rows are a label with
# its value ("Date of issue | 29 Mar 2020", "Invoice number: 2025-02-460"); and the
# two sides have different numbers of rows (a table's first column has a cell in
# each row of the rest).
ADDRESS_LINES = 8
LABELLED_SHARE = 0.75
_LABELLED = re.compile(r"^[^\W\d_][^:]{1,30}:\s*(\S.*)$")
# A footer under the columns stands this many line heights below the column it ends.
FOOTER_GAP = 1.8
# Lines that may cross a gutter (titles, captions, footers across the columns).
MAX_SPANNERS = 4
MAX_SPANNER_SHARE = 0.2


@dataclass
class Block:
    """A region read as rows, in reading order: its rows, each left to right."""

    rows: list[list[Line]]
    order: int = 0

    @property
    def lines(self) -> list[Line]:
        return [line for row in self.rows for line in row]

    @property
    def box(self) -> list[float]:
        boxes = [line.box for line in self.lines]
        return [min(b[0] for b in boxes), min(b[1] for b in boxes),
                max(b[2] for b in boxes), max(b[3] for b in boxes)]


def read_order(lines: list[Line], lean_deg: float = 0.0) -> list[Block]:
    """The page's blocks in reading order (see the module docstring).

    ``lean_deg``: the angle by which the page's text lines descend to the right (image
    coordinates, degrees), where the engine measured one. The page is read as if
    turned level: half a degree over a 1600-pixel column moves its lines 14 pixels
    sideways, enough to close a narrow gutter, and the preprocessor leaves leans under
    ``deskew_min_angle_deg`` alone. The lines keep their own boxes.
    """
    lines = [line for line in lines if line.box[3] > line.box[1] and line.box[2] > line.box[0]]
    if not lines:
        return []
    with _levelled(lines, lean_deg):
        height = median_height(lines)
        blocks = [Block(rows=rows(region, height)) for region in _cut(lines, height)]
    for number, block in enumerate(blocks):
        block.order = number
    return blocks


@contextmanager
def _levelled(lines: list[Line], lean_deg: float):
    """The lines' boxes moved as the page turned by ``-lean_deg`` would move their
    centres, while the block is running; their own boxes again after. Each keeps its
    width and height: a line that leans with the page is level then. The turned page
    is shifted back to where the lines' top-left corner was, so no coordinate turns
    negative (the gutter search indexes an array by x)."""
    if not lean_deg:
        yield
        return
    own = [line.box for line in lines]
    angle = math.radians(lean_deg)
    cos, sin = math.cos(angle), math.sin(angle)
    moves = []
    for x0, y0, x1, y1 in own:
        x, y = (x0 + x1) / 2, (y0 + y1) / 2
        moves.append((x * cos + y * sin - x, y * cos - x * sin - y))
    left = min(box[0] for box in own) - min(box[0] + dx for box, (dx, _dy) in zip(own, moves))
    top = min(box[1] for box in own) - min(box[1] + dy for box, (_dx, dy) in zip(own, moves))
    try:
        for line, (x0, y0, x1, y1), (dx, dy) in zip(lines, own, moves):
            line.box = [x0 + dx + left, y0 + dy + top, x1 + dx + left, y1 + dy + top]
        yield
    finally:
        for line, box in zip(lines, own):
            line.box = box


def rows(lines: list[Line], height: float | None = None) -> list[list[Line]]:
    """Lines grouped into rows, top to bottom, each row left to right.

    A line joins the current row when its vertical centre is within half a line
    height of the row's mean centre. The mean, not the union of the row's boxes: a
    union grows with every line it takes and swallows the next row on a page that
    leans a little.
    """
    if not lines:
        return []
    height = height or median_height(lines)
    result: list[list[Line]] = []
    centres: list[float] = []
    for line in sorted(lines, key=lambda item: (_centre(item), item.box[0])):
        if result and abs(_centre(line) - statistics.fmean(centres)) <= height / 2:
            result[-1].append(line)
            centres.append(_centre(line))
        else:
            result.append([line])
            centres = [_centre(line)]
    return [sorted(row, key=lambda item: item.box[0]) for row in result]


def _cut(lines: list[Line], height: float) -> list[list[Line]]:
    if len(lines) < 2:
        return [lines]
    sections = _section_splits(lines, height)
    columns = []
    for x, crossing in _gutters(lines, height):
        votes = _section_votes(sections, x)
        if _columns_hold(lines, x, votes):
            columns.append((x, crossing, votes))
    if columns:
        head, body = _head_above_columns(sections, columns[0][2])
        if head:
            return _cut(head, height) + _cut(body, height)
    # a line across any of the column gutters separates what is above from below
    spanners = [line for line in lines if any(line in crossing for _x, crossing, _v in columns)]
    if columns and not columns[0][1] and _beside_others(spanners, lines):
        spanners = []  # cut down the clean gutter first: a cut across would split a column
    if spanners:
        return [region for piece in _between(lines, spanners) for region in _cut(piece, height)]
    if columns:
        x = columns[0][0]
        left = [line for line in lines if line.box[2] <= x]
        right = [line for line in lines if line.box[0] >= x]
        tail = _footer(left, right, height) + _footer(right, left, height)
        if tail:  # read after the columns, not after the first one
            body = [line for line in lines if line not in tail]
            return _cut(body, height) + _cut(tail, height)
        return _cut(left, height) + _cut(right, height)
    if len(sections) > 1:
        return [region for section in sections for region in _cut(section, height)]
    return [lines]


def _gutters(lines: list[Line], height: float) -> list[tuple[float, list[Line]]]:
    """Candidate gutters, cleanest and widest first: (x, the lines that cross it).

    A gutter is a run of x at least MIN_GUTTER line heights wide that at most
    MAX_SPANNERS of the lines cross (and at most MAX_SPANNER_SHARE of them).
    """
    width = int(max(line.box[2] for line in lines)) + 2
    cover = np.zeros(width + 1, dtype=np.int32)
    for line in lines:
        cover[int(line.box[0])] += 1
        cover[int(line.box[2]) + 1] -= 1
    cover = np.cumsum(cover)[:width]
    allowed = min(MAX_SPANNERS, int(len(lines) * MAX_SPANNER_SHARE))
    left_edge = int(min(line.box[0] for line in lines))
    candidates = {}
    for crossing in range(allowed + 1):
        quiet = np.flatnonzero(cover[left_edge:] <= crossing) + left_edge
        for run in np.split(quiet, np.flatnonzero(np.diff(quiet) > 1) + 1):
            if len(run) and run[-1] - run[0] + 1 >= MIN_GUTTER * height:
                x = _whitest(cover, run)
                spanners = [line for line in lines if line.box[0] < x < line.box[2]]
                candidates[x] = (len(spanners), -(run[-1] - run[0]), x, spanners)
    return [(x, spanners) for _c, _w, x, spanners in sorted(candidates.values(),
                                                            key=lambda item: item[:2])]


def _whitest(cover: np.ndarray, run: np.ndarray) -> float:
    """The middle of the widest stretch of ``run`` that the fewest lines cover: where a
    line of a ragged column reaches into a gutter, the gutter is beside it."""
    lowest = cover[run].min()
    whitest = run[cover[run] == lowest]
    stretches = np.split(whitest, np.flatnonzero(np.diff(whitest) > 1) + 1)
    widest = max(stretches, key=len)
    return float(widest[0] + widest[-1]) / 2


def _between(lines: list[Line], spanners: list[Line]) -> list[list[Line]]:
    """``lines`` cut across above and below each spanner: the runs of other lines
    between spanners, and each spanner alone, top to bottom."""
    pieces: list[list[Line]] = []
    current: list[Line] = []
    for line in sorted(lines, key=_centre):
        if line in spanners:
            if current:
                pieces.append(current)
            pieces.append([line])
            current = []
        else:
            current.append(line)
    return pieces + ([current] if current else [])


def _beside_others(spanners: list[Line], lines: list[Line]) -> bool:
    """Whether another line stands beside a spanner (its centre within the spanner's
    height): a headline right of a column, which a cut across would split."""
    return any(spanner.box[1] < _centre(line) < spanner.box[3]
               for spanner in spanners for line in lines if line not in spanners)


def _footer(side: list[Line], other: list[Line], height: float) -> list[Line]:
    """The lines at the foot of ``side`` that stand apart from it (a gap of FOOTER_GAP
    line heights) and below everything on the ``other`` side: a footer or a note
    under the columns, not the end of this column."""
    bottom = max(line.box[3] for line in other)
    ordered = sorted(side, key=lambda line: line.box[1])
    reach = ordered[0].box[3]
    for number, line in enumerate(ordered[1:], 1):
        if line.box[1] > bottom and line.box[1] - reach >= FOOTER_GAP * height:
            return ordered[number:]
        reach = max(reach, line.box[3])
    return []


def _section_splits(lines: list[Line], height: float) -> list[list[Line]]:
    """``lines`` split at every horizontal strip of white taller than SECTION_GAP
    line heights, top to bottom."""
    ordered = sorted(lines, key=lambda line: line.box[1])
    sections = [[ordered[0]]]
    reach = ordered[0].box[3]
    for line in ordered[1:]:
        if line.box[1] - reach >= SECTION_GAP * height:
            sections.append([])
        sections[-1].append(line)
        reach = max(reach, line.box[3])
    return sections


def _columns_hold(lines: list[Line], x: float,
                  section_votes: list[tuple[bool | None, int]]) -> bool:
    """Whether the gutter at ``x`` separates columns, judged section by section
    (``_section_votes``): a form whose label and value stacks sit above a list or a
    signature block is rows in its form part, and those rows must not be read label
    stack first because the region as a whole looks like two columns. Sections too
    small to judge do not vote; when none can, the region is judged whole."""
    votes = {True: 0, False: 0}
    for vote, weight in section_votes:
        if vote is not None:
            votes[vote] += weight
    if votes[True] or votes[False]:
        return votes[True] >= votes[False]
    return _is_column_cut([line for line in lines if line.box[2] <= x],
                          [line for line in lines if line.box[0] >= x])


def _section_votes(sections: list[list[Line]], x: float) -> list[tuple[bool | None, int]]:
    """Each section's vote on the gutter at ``x`` (columns, rows, or None where a side
    has too few lines to judge), weighed by its lines beside the gutter."""
    votes: list[tuple[bool | None, int]] = []
    for section in sections:
        left = [line for line in section if line.box[2] <= x]
        right = [line for line in section if line.box[0] >= x]
        if min(len(left), len(right)) >= MIN_COLUMN_LINES:
            votes.append((_is_column_cut(left, right), len(left) + len(right)))
        else:
            votes.append((None, 0))
    return votes


def _head_above_columns(sections: list[list[Line]], section_votes: list[tuple[bool | None, int]]
                        ) -> tuple[list[Line], list[Line]]:
    """The sections above the first one that reads as columns beside the gutter they
    voted on (a page's header, a report's banner: its title beside the ticker, the
    subtitle beside the target price), and the rest. The head is read first, as its
    own region, the columns under it after; ([], all) when the columns start at the
    top."""
    first = next((number for number, (vote, _weight) in enumerate(section_votes) if vote), 0)
    return ([line for section in sections[:first] for line in section],
            [line for section in sections[first:] for line in section])


def _is_column_cut(left: list[Line], right: list[Line]) -> bool:
    """Whether the two sides of a gutter are columns read one after the other, rather
    than the two halves of rows (labels and their values, item and price)."""
    if not (left and right):
        return False
    if min(len(left), len(right)) < MIN_COLUMN_LINES:
        return any(_running_column(side) and _figure_share(other) <= MAX_FIGURE_SHARE
                   for side, other in ((left, right), (right, left)))
    if _prose(left) and _prose(right):
        return True
    if any(_address(side) and _labelled_values(other) and len(rows(side)) != len(rows(other))
           for side, other in ((left, right), (right, left))):
        return True  # a table's first column would have a cell in each of its rows
    return any(_reads_alone(side, other) and len(other) >= SIDEBAR_LINES
               and _figure_share(other) <= MAX_FIGURE_SHARE
               for side, other in ((left, right), (right, left)))


def _prose(lines: list[Line]) -> bool:
    return statistics.median(len(line.text.split()) for line in lines) >= PROSE_WORDS


def _reads_alone(lines: list[Line], other: list[Line]) -> bool:
    """A run of rows that read on their own (``_fills_with_text``), unless nearly all
    of them go on across the gutter and the other side does not read on its own: a
    table whose first column holds long names ("Shagun Singh Chadha, Senior Vice
    President | (203) 569-4345 | ssingh@...") is rows. Two pages of a transcript
    printed side by side share every row too, and both read on their own."""
    if not _fills_with_text(lines, other):
        return False
    height = median_height(lines)
    beyond = [_centre(line) for line in other]
    rows_ = rows(lines)
    going_on = sum(_goes_on(row, beyond, height) for row in rows_)
    return going_on < TABLE_ROW_SHARE * len(rows_) or _fills_with_text(other, lines)


def _fills_with_text(lines: list[Line], other: list[Line]) -> bool:
    """At least COLUMN_RUN rows, at least half of which fill their side with running
    text, or with a table's row (a label and its figures) that does not go on across
    the gutter to ``other``: a table whose item names stand left of a gutter and the
    rest of each row right of it is one table, not two columns."""
    rows_ = _filling_rows(lines)
    if len(rows_) < COLUMN_RUN:
        return False
    height = median_height(lines)
    beyond = [_centre(line) for line in other]
    full = sum(fills and (_running_text(row)
                          or (_table_row(row) and not _goes_on(row, beyond, height)))
               for row, fills in rows_)
    return 2 * full >= len(rows_)


def _running_column(lines: list[Line]) -> bool:
    """A run of rows, most of them (RUNNING_SHARE) a single line of running text that
    fills the side: a typeset column, not a form's labels beside their values."""
    rows_ = _filling_rows(lines)
    full = sum(fills and len(row) == 1 and _running_text(row) for row, fills in rows_)
    return len(rows_) >= COLUMN_RUN and full >= RUNNING_SHARE * len(rows_)


def _filling_rows(lines: list[Line]) -> list[tuple[list[Line], bool]]:
    """The side's rows, each with whether it spans PROSE_FILL of the side's width."""
    left = min(line.box[0] for line in lines)
    width = max(line.box[2] for line in lines) - left
    return [(row, _span(row) >= PROSE_FILL * width) for row in rows(lines)]


def _goes_on(row: list[Line], centres: list[float], height: float) -> bool:
    """Whether a line of the other side stands in ``row`` (its centre within a quarter
    of a line height of the row's)."""
    middle = statistics.fmean(_centre(line) for line in row)
    return any(abs(centre - middle) <= height / 4 for centre in centres)


def _span(row: list[Line]) -> float:
    return max(line.box[2] for line in row) - min(line.box[0] for line in row)


def _running_text(row: list[Line]) -> bool:
    return any(len(line.text.split()) >= PROSE_WORDS and _WORD.search(line.text)
               for line in row)


def _table_row(row: list[Line]) -> bool:
    """A label and two figures or more, each a line of its own."""
    return (len(row) >= 3 and sum(map(_is_figure, row)) >= 2
            and any(_WORD.search(line.text) for line in row))


def _address(lines: list[Line]) -> bool:
    """A few lines, one a row, aligned left, each with a word and none labelled."""
    rows_ = rows(lines)
    if not MIN_COLUMN_LINES <= len(rows_) <= ADDRESS_LINES:
        return False
    if any(len(row) > 1 or _LABELLED.match(row[0].text) or not _WORD.search(row[0].text)
           for row in rows_):
        return False
    height = median_height(lines)
    return max(line.box[0] for line in lines) - min(line.box[0] for line in lines) <= height


def _labelled_values(lines: list[Line]) -> bool:
    """Rows that are mostly a label with its value (see ``_label_and_value``)."""
    rows_ = rows(lines)
    return (len(rows_) >= MIN_COLUMN_LINES
            and sum(map(_label_and_value, rows_)) >= LABELLED_SHARE * len(rows_))


def _label_and_value(row: list[Line]) -> bool:
    """A label of words and a value with a figure in it, as two lines or as one."""
    if len(row) == 2:
        label, value = (line.text for line in row)
        return bool(_WORD.search(label) and not _DIGIT.search(label) and _DIGIT.search(value))
    labelled = _LABELLED.match(row[0].text) if len(row) == 1 else None
    return bool(labelled and _DIGIT.search(labelled.group(1)))


def _figure_share(lines: list[Line]) -> float:
    """The share of the lines that are a figure or two: a column of prices or values."""
    return sum(map(_is_figure, lines)) / len(lines)


def _is_figure(line: Line) -> bool:
    return bool(_DIGIT.search(line.text)) and len(line.text.split()) <= 2


def _centre(line: Line) -> float:
    return (line.box[1] + line.box[3]) / 2


def median_height(lines: list[Line]) -> float:
    return statistics.median(line_height(line) for line in lines)


def line_height(line: Line) -> float:
    return line.box[3] - line.box[1]
