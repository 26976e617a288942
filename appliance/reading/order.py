"""Reading order from line boxes: columns read top to bottom, one after the other;
forms and receipts read row by row.

A recursive XY-cut on the boxes of the recognised lines (no pixels: any engine that
gives line boxes can use it). A region of the page is cut

1. down a *gutter* (``reading.gutters``): a vertical strip of white at least
   ``MIN_GUTTER`` line heights wide, when what lies on either side reads as columns
   (``reading.columns``), judged section by section (``_columns_hold``). A few lines
   may cross the strip (a title, a caption, a footer across the page): they become
   *spanners*. The
   region is then cut across above and below each spanner, so that the columns
   between two spanners are read one after the other, left before right, and each
   spanner in its place between them; but where a gutter no line crosses holds too
   and a spanner stands beside other lines (a magazine's headline right of its first
   column), the region is cut down that gutter first. Sections above the first one
   that reads as columns (a page header, a report's banner) are read first
   (``_head_above_columns``), but not on a book spread (``_spine``: two pages on one
   scan, each with its own running header, read one after the other), nor where they
   are one column's top beside a figure (``_column_top``);
2. across a *section gap*: white across the full width of the region, taller than
   ``SECTION_GAP`` line heights and, on a typeset page, than its own line spacing by
   ``SECTION_MARGIN`` (``_section_gap``), but not between a ruled table's rows, which
   its padding sets so far apart (``_table_rows_joined``). Top goes before bottom;
3. where columns of running text at its top or foot end at a line across their gutter
   with no section's white between (a table's caption a line's spacing under them),
   above and below that line (``_columns_end``);
4. otherwise it is one block, read as rows: a row is the lines whose vertical
   centres lie within half a line height of the row's own centre, left to right;
   or, where it is a row of cards (an organisation chart's boxes, ``is_card_row``),
   one block per card, left to right.

Columns of vertical text take no part in the cut: they are read as blocks of their
own, right to left (``reading.vertical``); nor do lines printed up the side margin
(``reading.furniture.up_the_margin``), which are read with the page's foot.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import replace

import numpy as np

from appliance.page import Block, Furniture, Line, is_column
from appliance.reading.columns import (MIN_COLUMN_LINES, figure_share, is_card_row, is_column_cut,
                                      prose)
from appliance.reading.furniture import (EDGE_ROWS, FOOTER_GAP, TYPESET_LINES, find_furniture,
                                         is_page_number, running_lines, up_the_margin)
from appliance.reading.gutters import MIN_GUTTER, find_gutters, levelled, split_at_gutters
from appliance.reading.lines import centre, median_height, overlap, rows
from appliance.reading.tables import MIN_TABLE_ROWS
from appliance.reading.vertical import column_blocks

# White across a region at least this many median line heights tall separates sections.
# Under 0.9: a real brochure (OCRmyPDF's linn.png) has 0.75 between a bulleted list
# across the page and the two columns under it; at 0.9 the page was one block, read
# row by row across both columns.
SECTION_GAP = 0.7
# On a typeset page the white between sections is also SECTION_MARGIN line heights
# more than its lines of running text stand apart (``_section_gap``). Chinese books
# set their lines 0.5 to 0.75 line heights apart (the boxes hug characters that have
# no ascenders or descenders): at SECTION_GAP alone each line was a section of its own,
# and a book spread was read line by line across its spine. Any margin from 0.2 to 0.7
# reads the pages measured alike.
SECTION_MARGIN = 0.35
SPACING_PAIRS = 8  # pairs of lines one under the other that measure the line spacing
WRAPPED_PAIRS = 3  # ... on a short page, pairs of a full line and the one it wraps onto
SPACING_REACH = 3.0  # line heights below a line where the next one may stand
# The spine of a book spread (two pages scanned side by side) is white this many line
# heights wide: both pages' inner margins (the Chinese spreads built for the eval set
# have 6 to 7; gutters between the columns of one page have 1 to 3).
SPINE_GUTTER = 4.0
# White across a region this many line heights tall ends the columns above it (a
# figure across the page, which holds no lines): the columns under it are a band of
# their own. Paragraphs stand a line height or so apart, staggered from column to
# column.
BAND_WHITE = 3.0
# ... and a band of rows across the columns is a table's when at least this share of
# the cells on one side of the gutter are figures (quantities, amounts): narrow columns
# of prose hold short lines too, in rows that line up, but no figures.
TABLE_FIGURES = 0.5
# A ruled table's rows, padded apart by a section's white, are one region where they
# hold this many cells each (``_table_rows_joined``).
TABLE_CELLS = 3


def read_order(lines: list[Line], lean_deg: float = 0.0,
               page_height: float | None = None) -> list[Block]:
    """The page's blocks in reading order (see the module docstring).

    ``lean_deg``: the angle by which the page's text lines descend to the right (image
    coordinates, degrees), where the engine measured one. The page is read as if
    turned level: half a degree over a 1600-pixel column moves its lines 14 pixels
    sideways, enough to close a narrow gutter, and the preprocessor leaves leans under
    ``deskew_min_angle_deg`` alone. The lines keep their own boxes.

    ``page_height``: the page's height in the lines' pixels, where the caller knows it
    (its furniture stands in its margins, ``reading.furniture``).
    """
    columns, across = [], []
    for line in split_at_gutters(lines, lean_deg):
        if line.box[3] > line.box[1] and line.box[2] > line.box[0]:
            (columns if is_column(line.box, line.text) else across).append(line)
    blocks: list[Block] = []
    if across:
        level = levelled(across, lean_deg)
        height = median_height(level)
        gap = _section_gap(level, height)
        cut: list[Block] = []
        roles: dict[int, Furniture] = {}
        for page in _pages(level, height, gap):
            page_blocks, page_roles = _page(page, height, gap, page_height)
            cut += page_blocks
            roles.update(page_roles)
        # the blocks were cut on the levelled page; they hold the lines as they came,
        # each marked with its furniture role
        own = {id(flat): line for flat, line in zip(level, across)}
        blocks = [replace(block, rows=[[replace(own[id(line)], furniture=roles.get(id(line)))
                                        for line in row] for row in block.rows])
                  for block in cut]
    for group in column_blocks(columns):
        _place(blocks, Block(rows=[[column] for column in group], vertical=True))
    return blocks


def _place(blocks: list[Block], columns: Block) -> None:
    """Put a block of vertical columns before the first body block that does not end
    above its top (a headline right of the body it heads), or after the body."""
    top = columns.box[1]
    at = next((index for index, block in enumerate(blocks)
               if block.furniture is None and block.box[3] > top), None)
    if at is None:  # after the body, before a footer
        at = next((index for index, block in enumerate(blocks)
                   if block.furniture == Furniture.FOOTER), len(blocks))
    blocks.insert(at, columns)


def _page(lines: list[Line], height: float, gap: float, page_height: float | None
          ) -> tuple[list[Block], dict[int, Furniture]]:
    """One page's blocks: its header (``reading.furniture``, found before the body is
    cut, so that no rule takes it for a banner or a spanner), its body, its footer, the
    lines up its side margin; and its lines' furniture roles ({id(line): role})."""
    margin = up_the_margin(lines)
    aside = {id(line): Furniture.FOOTER for line in margin}
    edges = find_furniture([line for line in lines if id(line) not in aside], page_height, gap)
    roles = {**edges[Furniture.HEADER], **edges[Furniture.FOOTER], **aside}
    body = [line for line in lines if id(line) not in roles]
    blocks = [Block(rows=rows(region, height)) for region in _cut(body, height, gap) if region]
    header, footer = ([line for line in lines if id(line) in edges[edge]]
                      for edge in (Furniture.HEADER, Furniture.FOOTER))
    if header:
        blocks.insert(0, Block(rows=rows(header, height), furniture=Furniture.HEADER))
    if footer:
        blocks.append(Block(rows=rows(footer, height), furniture=Furniture.FOOTER))
    if margin:
        blocks.append(Block(rows=[[line] for line in margin], furniture=Furniture.FOOTER))
    return blocks, roles


def _pages(lines: list[Line], height: float, gap: float) -> list[list[Line]]:
    """The pages of a book spread (two pages scanned side by side), left before right,
    each read whole with its own header and number; [lines] for one page. A line
    printed up a side margin (a stamp, ``reading.furniture.up_the_margin``) is no page
    of its own: it goes with the page it stands beside."""
    margin = {id(line) for line in up_the_margin(lines)}
    if margin and len(margin) < len(lines):
        pages = _pages([line for line in lines if id(line) not in margin], height, gap)
        page_left = min(line.box[0] for page in pages for line in page)
        for line in lines:
            if id(line) in margin:
                (pages[0] if line.box[2] <= page_left else pages[-1]).append(line)
        return pages
    if len(lines) < 2:
        return [lines]
    sections = _section_splits(lines, gap)
    gutters = find_gutters(lines, height)
    if numbered := _numbered_spread(lines, gutters, height):
        return numbered
    for x, crossing, _width in gutters:
        votes = _section_votes(sections, x)
        if _columns_hold(lines, x, votes):
            head, _body = _head_above_columns(sections, votes, x, height)
            if _spine((x, crossing, votes), gutters, head, height):
                return [[line for line in lines if line.box[2] <= x],
                        [line for line in lines if line.box[0] >= x]]
            break  # the first gutter that reads as columns is the one _cut would take
    return [lines]


def _numbered_spread(lines: list[Line], gutters: list[tuple[float, list[Line], float]],
                     height: float) -> list[list[Line]]:
    """The two pages of a spread whose page numbers follow each other, at the foot or
    the head of each side of a gutter SPINE_GUTTER line heights wide ("— 9 —" left,
    "— 10 —" right: an exam paper's two pages, whose questions read as rows, not as
    columns), left before right; lines across the spine below or above everything
    else (a publisher's line at the scan's foot) are read after both, a page of their
    own. [] where the scan is no such spread."""
    for x, crossing, width in gutters:
        if width < SPINE_GUTTER * height:
            continue
        inside = [line for line in lines if line not in crossing]
        if not inside:
            continue
        top, bottom = min(line.box[1] for line in inside), max(line.box[3] for line in inside)
        if any(top < line.box[3] and line.box[1] < bottom for line in crossing):
            continue  # a line across the spine between the pages' lines: one page
        left = [line for line in inside if line.box[2] <= x]
        right = [line for line in inside if line.box[0] >= x]
        numbers = [_edge_page_number(side, height) for side in (left, right)]
        if None not in numbers and numbers[1] == numbers[0] + 1:
            return [left, right, crossing] if crossing else [left, right]
    return []


def _edge_page_number(lines: list[Line], height: float) -> int | None:
    """The page number standing alone in one of the first or last EDGE_ROWS rows of
    ``lines``, or None."""
    page_rows = rows(lines, height) if lines else []
    for row in page_rows[:EDGE_ROWS] + page_rows[-EDGE_ROWS:]:
        if len(row) == 1 and is_page_number(row[0].text):
            digits = re.search(r"\d+", row[0].text)
            if digits:
                return int(digits.group())
    return None


def _cut(lines: list[Line], height: float, gap: float) -> list[list[Line]]:
    if len(lines) < 2:
        return [lines]
    sections = _section_splits(lines, gap)
    columns = []
    gutters = find_gutters(lines, height)
    for x, crossing, _width in gutters:
        votes = _section_votes(sections, x)
        if _columns_hold(lines, x, votes):
            columns.append((x, crossing, votes))
    if columns:
        head, body = _head_above_columns(sections, columns[0][2], columns[0][0], height)
        if head:
            return _cut(head, height, gap) + _cut(body, height, gap)
        if len(bands := _bands(sections, columns[0][0], height)) > 1:
            return [region for band in bands for region in _cut(band, height, gap)]
    # a line across any of the column gutters separates what is above from below
    spanners = [line for line in lines if any(line in crossing for _x, crossing, _v in columns)]
    if columns and not columns[0][1] and _beside_others(spanners, lines):
        spanners = []  # cut down the clean gutter first: a cut across would split a column
    if spanners:
        return [region for piece in _between(lines, spanners) for region in _cut(piece, height, gap)]
    if columns:
        x = columns[0][0]
        left = [line for line in lines if line.box[2] <= x]
        right = [line for line in lines if line.box[0] >= x]
        tail = _footer(left, right, height) + _footer(right, left, height)
        if tail:  # read after the columns, not after the first one
            body = [line for line in lines if line not in tail]
            return _cut(body, height, gap) + _cut(tail, height, gap)
        return _cut(left, height, gap) + _cut(right, height, gap)
    if len(sections) > 1 and len(groups := _table_rows_joined(sections, height)) > 1:
        return [region for group in groups for region in _cut(group, height, gap)]
    if len(parts := _columns_end(lines, height)) > 1:
        return [region for part in parts for region in _cut(part, height, gap)]
    return _cards(lines, gutters, height) or [lines]


def _table_rows_joined(sections: list[list[Line]], height: float) -> list[list[Line]]:
    """``sections`` with each run of a ruled table's rows joined: a ruled table pads its
    cells, so that white a section's height stands between its rows (PDF-Extract-Kit's
    watermark.png: 1.1 line heights). A run is MIN_TABLE_ROWS sections or more, each
    but the last a single row, whose rows hold the same number of cells, TABLE_CELLS
    or more, each cell over the one above it (a form's labels beside their values, two
    to a row, stay apart, and so do an organisation chart's rows of cards, a name, a
    title and a date in each)."""
    groups: list[list[list[Line]]] = [[sections[0]]]
    for above, below in zip(sections, sections[1:]):
        above_rows = rows(above, height)
        last, first = above_rows[-1], rows(below, height)[0]
        if len(above_rows) == 1 and len(last) == len(first) >= TABLE_CELLS and all(
                overlap(upper.box[0], upper.box[2], lower.box[0], lower.box[2]) > 0
                for upper, lower in zip(last, first)):
            groups[-1].append(below)
        else:
            groups.append([below])
    return [[line for section in group for line in section]
            for run in groups
            for group in ([run] if len(run) >= MIN_TABLE_ROWS else [[part] for part in run])]


def _columns_end(lines: list[Line], height: float) -> list[list[Line]]:
    """The region cut across where columns of running text end at a line across their
    gutter with no section's white between (a journal's two columns over a table and
    its caption, set a line's spacing apart): the lines above the first line that
    crosses the gutter of the columns at the region's top, and the rest; or, read up
    the page, the columns at its foot and what stands above them. [lines] where
    neither end of the region is such columns."""
    down = sorted(lines, key=lambda line: line.box[1])
    if end := _columns_run(down, height):
        return [down[:end], down[end:]]
    up = sorted(lines, key=lambda line: -line.box[3])
    if end := _columns_run(up, height):
        return [up[end:], up[:end]]
    return [lines]


def _columns_run(sequence: list[Line], height: float) -> int:
    """How many of ``sequence`` (from one end of a region) are columns of running text
    down a gutter none of them crosses, ended by the next line, which crosses it and
    stands clear of them (no line overlaps both); 0 where they are no such columns.
    What the lines cover across the region is marked as they come, so that each row's
    white is looked up, not measured afresh (pages of tables have 600 lines)."""
    covered = np.zeros(int(max(line.box[2] for line in sequence)) + 2, dtype=bool)
    left, right = covered.size, 0
    top, bottom = math.inf, -math.inf
    for count, line in enumerate(sequence):
        if count >= 2 * MIN_COLUMN_LINES and (bottom <= line.box[1] or top >= line.box[3]):
            gutters = _clean_gutters(covered, left, right, height)
            if not gutters:
                return 0
            if any(line.box[0] < x < line.box[2] and _prose_columns(sequence[:count], x)
                   for x in gutters):
                return count
        covered[int(line.box[0]):int(line.box[2]) + 1] = True
        left, right = min(left, int(line.box[0])), max(right, int(line.box[2]))
        top, bottom = min(top, line.box[1]), max(bottom, line.box[3])
    return 0


def _clean_gutters(covered: np.ndarray, left: int, right: int, height: float) -> list[float]:
    """The middles of the runs of white no line covers between ``left`` and ``right``,
    MIN_GUTTER line heights wide or more (``reading.gutters.find_gutters``'s gutters
    that no line crosses)."""
    edges = np.diff(np.concatenate(([1], covered[left:right + 1], [1])).astype(np.int8))
    starts, ends = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
    wide = ends - starts >= MIN_GUTTER * height
    return [left + (start + end - 1) / 2 for start, end in zip(starts[wide], ends[wide])]


def _prose_columns(lines: list[Line], x: float) -> bool:
    """Whether both sides of the gutter at ``x`` are MIN_COLUMN_LINES lines or more of
    running text."""
    left = [line for line in lines if line.box[2] <= x]
    right = [line for line in lines if line.box[0] >= x]
    return min(len(left), len(right)) >= MIN_COLUMN_LINES and prose(left) and prose(right)


def _spine(column: tuple[float, list[Line], list],
           gutters: list[tuple[float, list[Line], float]], head: list[Line],
           height: float) -> bool:
    """Whether the column gutter is the spine of a book spread (two pages on one scan)
    rather than a gutter between the columns of one page under its banner: no line
    crosses it, it is SPINE_GUTTER line heights wide (both pages' inner margins), and
    the head above the columns is a row of one line a side, each page's running
    header, not a banner's rows (a title beside the date, a subtitle beside the
    target price). Each page's header and number then belong to it."""
    x, crossing, _votes = column
    width = next(w for gx, _c, w in gutters if gx == x)
    sides = ([line for line in head if line.box[2] <= x],
             [line for line in head if line.box[0] >= x])
    return (not crossing and width >= SPINE_GUTTER * height
            and all(len(rows(side, height)) <= 1 for side in sides))


def _cards(lines: list[Line], gutters: list[tuple[float, list[Line], float]],
           height: float) -> list[list[Line]]:
    """The cards of a row of cards (an organisation chart's boxes: a name, a title,
    a date in each) between the ``gutters`` no line crosses, left to right; [] where
    the region is no such row."""
    edges = sorted(x for x, crossing, _width in gutters if not crossing)
    if not edges:
        return []
    bounds = [-math.inf, *edges, math.inf]
    stacks = [[line for line in lines if low <= (line.box[0] + line.box[2]) / 2 < high]
              for low, high in zip(bounds, bounds[1:])]
    stacks = [stack for stack in stacks if stack]
    return stacks if is_card_row(stacks, height) else []


def _between(lines: list[Line], spanners: list[Line]) -> list[list[Line]]:
    """``lines`` cut across above and below each spanner: the runs of other lines
    between spanners, and each spanner alone, top to bottom."""
    pieces: list[list[Line]] = []
    current: list[Line] = []
    for line in sorted(lines, key=centre):
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
    return any(spanner.box[1] < centre(line) < spanner.box[3]
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


def _section_splits(lines: list[Line], gap: float) -> list[list[Line]]:
    """``lines`` split at every horizontal strip of white at least ``gap`` pixels
    tall (``_section_gap``), top to bottom."""
    ordered = sorted(lines, key=lambda line: line.box[1])
    sections = [[ordered[0]]]
    reach = ordered[0].box[3]
    for line in ordered[1:]:
        if line.box[1] - reach >= gap:
            sections.append([])
        sections[-1].append(line)
        reach = max(reach, line.box[3])
    return sections


def _section_gap(lines: list[Line], height: float) -> float:
    """The white, in pixels, that separates sections of the page: SECTION_GAP line
    heights, and on a typeset page SECTION_MARGIN more than its line spacing."""
    spacing = _line_spacing(lines, height)
    if spacing is None:
        return SECTION_GAP * height
    return max(SECTION_GAP, spacing + SECTION_MARGIN) * height


def _line_spacing(lines: list[Line], height: float) -> float | None:
    """The median white between a line of running text and the next one under it
    (overlapping half the narrower one's width), in line heights; None on a page that
    is not typeset (a form, a receipt) or has fewer than SPACING_PAIRS such pairs. A
    page with fewer lines of running text is measured where its text wraps
    (``_wrapped_spacing``)."""
    running = sorted(running_lines(lines), key=lambda line: line.box[1])
    if len(running) < TYPESET_LINES:
        return _wrapped_spacing(running, lines, height)
    white = [white for _line, _below, white in _stacked(running, running, height)]
    return statistics.median(white) if len(white) >= SPACING_PAIRS else None


def _wrapped_spacing(running: list[Line], lines: list[Line], height: float) -> float | None:
    """The line spacing of a short page of running text (a report's page of a few
    paragraphs, double-spaced, read a section a line), where its text wraps: a line
    of running text that fills its measure (its right edge that of two more, within a
    line height) and the line under it, which starts no further right (a paragraph's
    indented first line starts right of its lines). None with fewer than WRAPPED_PAIRS
    such pairs, or on a page not mostly of running text (a form's labels and values
    fill no measure, but a letter's paragraph on it may)."""
    if 2 * len(running) < len(lines):
        return None
    ends = [line.box[2] for line in running]
    full = [line for line in running if sum(abs(end - line.box[2]) <= height for end in ends) > 2]
    white = [white for line, below, white
             in _stacked(full, sorted(lines, key=lambda line: line.box[1]), height)
             if below.box[0] <= line.box[0] + height]
    return statistics.median(white) if len(white) >= WRAPPED_PAIRS else None


def _stacked(upper: list[Line], lines: list[Line], height: float
             ) -> list[tuple[Line, Line, float]]:
    """Each of the ``upper`` lines with the next of ``lines`` (top to bottom) under it,
    overlapping half the narrower one's width, and the white between them in line
    heights."""
    pairs = []
    for line in upper:
        width = line.box[2] - line.box[0]
        for below in lines:
            if below.box[1] < line.box[3] - 0.3 * height:
                continue
            if below.box[1] > line.box[3] + SPACING_REACH * height:
                break
            shared = overlap(line.box[0], line.box[2], below.box[0], below.box[2])
            if shared > 0.5 * min(width, below.box[2] - below.box[0]):
                pairs.append((line, below, (below.box[1] - line.box[3]) / height))
                break
    return pairs


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
    return is_column_cut([line for line in lines if line.box[2] <= x],
                          [line for line in lines if line.box[0] >= x])


def _section_votes(sections: list[list[Line]], x: float) -> list[tuple[bool | None, int]]:
    """Each section's vote on the gutter at ``x`` (columns, rows, or None where a side
    has too few lines to judge), weighed by its lines beside the gutter."""
    votes: list[tuple[bool | None, int]] = []
    for section in sections:
        left = [line for line in section if line.box[2] <= x]
        right = [line for line in section if line.box[0] >= x]
        if min(len(left), len(right)) >= MIN_COLUMN_LINES:
            votes.append((is_column_cut(left, right), len(left) + len(right)))
        else:
            votes.append((None, 0))
    return votes


def _bands(sections: list[list[Line]], x: float, height: float) -> list[list[Line]]:
    """The region in bands, each read on its own (its gutter looked for in the band
    alone), top to bottom, where what stands across the columns is not running text:

    - a band of rows of short cells on both sides of the gutter (a table across the
      columns, ``_table_band``) between or under sections that read as columns. A
      section whose top or bottom is such rows and the rest columns (a table the
      columns follow with only a line's white between) is cut first, at the widest
      white between the two (``_rows_apart``);
    - white across the region BAND_WHITE line heights tall (a figure, which holds no
      lines): the columns above it end there.

    A section of neither kind (too small to judge, a caption) joins the band it
    follows. [region] when no such band is found."""
    refined = [part for section in sections for part in _rows_apart(section, x)]
    bands: list[list[Line]] = []
    current, reach = None, None
    for section in refined:
        kind = _band_kind(section, x)
        top = min(line.box[1] for line in section)
        wide = reach is not None and top - reach >= BAND_WHITE * height
        if not bands or wide or (kind is not None and current is not None and kind != current):
            bands.append([])
            current = None
        if kind is not None:
            current = kind
        bands[-1].extend(section)
        reach = max(line.box[3] for line in section)
    return bands


def _band_kind(lines: list[Line], x: float) -> str | None:
    """"columns" where the lines beside the gutter at ``x`` read as columns, "rows"
    where they are a table's rows: short cells on both sides, MIN_COLUMN_LINES rows or
    more holding cells on both sides; None where a side has too few lines to judge or
    they are neither."""
    left = [line for line in lines if line.box[2] <= x]
    right = [line for line in lines if line.box[0] >= x]
    if min(len(left), len(right)) < MIN_COLUMN_LINES:
        return None
    if is_column_cut(left, right):
        return "columns"
    across = sum(1 for row in rows(left + right)
                 if row[0].box[2] <= x <= row[-1].box[0])
    table = (across >= MIN_COLUMN_LINES and not (prose(left) or prose(right))
             and max(figure_share(left), figure_share(right)) >= TABLE_FIGURES)
    return "rows" if table else None


def _rows_apart(section: list[Line], x: float) -> list[list[Line]]:
    """``section`` cut in two at its widest white where one side is a table's rows and
    the other columns (``_band_kind``); [section] where there is no such white."""
    ordered = sorted(section, key=lambda line: line.box[1])
    best, reach = None, ordered[0].box[3]
    for index in range(1, len(ordered)):
        white = ordered[index].box[1] - reach
        reach = max(reach, ordered[index].box[3])
        if white <= 0 or (best is not None and white <= best[0]):
            continue
        kinds = {_band_kind(ordered[:index], x), _band_kind(ordered[index:], x)}
        if kinds == {"rows", "columns"}:
            best = (white, index)
    if best is None:
        return [section]
    return [ordered[:best[1]], ordered[best[1]:]]


def _head_above_columns(sections: list[list[Line]], section_votes: list[tuple[bool | None, int]],
                        x: float, height: float) -> tuple[list[Line], list[Line]]:
    """The sections above the first one that reads as columns beside the gutter at
    ``x`` they voted on (a page's header, a report's banner: its title beside the
    ticker, the subtitle beside the target price), and the rest. The head is read
    first, as its own region, the columns under it after; ([], all) when the columns
    start at the top, or when the head is the top of one column beside a figure
    (``_column_top``)."""
    first = next((number for number, (vote, _weight) in enumerate(section_votes) if vote), 0)
    head = [line for section in sections[:first] for line in section]
    body = [line for section in sections[first:] for line in section]
    if head and _column_top(head, body, x, height):
        return [], head + body
    return head, body


def _column_top(head: list[Line], body: list[Line], x: float, height: float) -> bool:
    """Whether ``head`` is the top of one column, beside something that holds no lines
    (a figure, a photo): all of it on one side of the gutter at ``x``, and the other
    side's lines begin more than a line height lower than its own side's go on under
    it. Under a banner or a page's header, both columns begin alike."""
    left = [line for line in body if line.box[2] <= x]
    right = [line for line in body if line.box[0] >= x]
    if all(line.box[2] <= x for line in head):
        own, other = left, right
    elif all(line.box[0] >= x for line in head):
        own, other = right, left
    else:
        return False
    return bool(own and other) and (min(line.box[1] for line in other)
                                    > min(line.box[1] for line in own) + height)
