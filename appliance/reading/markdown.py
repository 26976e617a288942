"""A page's blocks (``reading.order``) as text and as Markdown with its structure.

- **Text**: one row per line, the lines of a row joined by a space, blocks in reading
  order.
- **Markdown**: the same words, every one of them escaped (OCR text never becomes
  markup by accident), with the structure the geometry shows:
  - *headings*: a row standing alone whose print is clearly larger than the page's
    body text (``HEADING_RATIO``; boxed taller or, in Chinese or Japanese print, its
    characters wider, ``_print_size``), short, without a full stop and no formula
    (``_formula``: its operators and indices make its box tall); ``#`` for the
    tallest size on the page, ``##`` for the next, ``###`` below. Rows of one print
    that follow each other with no paragraph's white between them, more than
    ``HEADING_MAX_ROWS`` of them, are running text however large their print: the
    page's body text is its median line's, and where small print (references, notes)
    has more lines than the body, the body's print is the taller; and a paragraph's
    last line, under a full line of its running text, is no heading however tall its
    box (``_ends_paragraph``);
  - *lists*: rows that start with a bullet (``•``, ``-``, ``*`` ...) or an enumerator
    (``1.``, ``2)``, ``a)``, Chinese ``1、``, ``一、``, ``（二）``, and ``1.`` with no
    space before Chinese text); an item ends, with a blank line, where its row, or the
    row its text carries on onto, ends short of the row under it (``_item_ends``);
  - *tables* (``reading.tables``): ``MIN_TABLE_ROWS`` or more consecutive rows of two or more cells whose
    cells fall into the same columns (cells are the separate lines of a row; columns
    are where the cells' horizontal extents overlap from row to row), and between
    them rows of one cell within one column (a section's label, a wrapped line of a
    cell: the other cells of that row are empty); a row that holds the wrapped lines
    of the cells above it is joined to them; the first row
    is the header unless it holds figures (item rows of a receipt: the header stays
    empty; a year or a name such as "Q1" names a column); names of groups of columns
    over the table head it too, and the table is HTML, its cells spanning (a pipe
    table cannot);
  - *paragraphs*: the rest, a blank line where the gap between rows is wider than
    ``PARAGRAPH_GAP`` line heights, where a row of running text opens indented
    (``_indented_first_line``), and between blocks.

The lines come back marked with their ``block`` (the reading-order index of their
block) and, in the body, their ``structure`` (heading, list, table or text), which the
JSON output carries as their ``role``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

from appliance.page import Block, Furniture, Line, Structure, is_column
from appliance.quality.markdown import escape_markdown
from appliance.reading.furniture import body_pitch, running_lines
from appliance.reading.lines import (BULLET, ENUMERATOR, HEADING_RATIO, PROSE_WORDS,
                                     char_pitch, first_word_width, median_height, starts_item,
                                     word_count)
from appliance.reading.lines import rows as row_groups
from appliance.reading.order import SECTION_MARGIN
from appliance.reading.tables import Runs, joined, table_markdown, table_runs

# Another reader of a table's structure (a model on the page's pixels, which the
# reading never sees): a table's lines, and whether the rules read it whole (one run
# of rows, nothing else), to its Markdown lines, or None for the rules'.
TableReader = Callable[[list[Line], bool], list[str] | None]

# What the body's Markdown is followed by, with ``furniture="separate"``: the running
# headers, footers and page numbers, one row a line.
FURNITURE_HEADING = "## Page furniture"
PARAGRAPH_GAP = 1.2  # line heights of white between rows that start a paragraph
# How far a paragraph's first line stands indented, in line heights: an em or two of
# Latin print, two characters of Chinese (one character is about a line height)
INDENT = (0.6, 4.0)
RAGGED = 2.5  # line heights a line of ragged-right text may end short of the next
HEADING_MAX_WORDS = 12
HEADING_MAX_ROWS = 3  # a title may take three rows; more of one print are running text
# what ends a clause or a sentence, in Latin and in Chinese or Japanese print
_STOPS = (".", ",", ";", ":", "。", "，", "、", "；", "：")

_ORDERED = re.compile(r"\d+[.)]")  # a marker Markdown numbers its item by


@dataclass
class Page:
    text: str
    markdown: str
    lines: list[Line]  # in reading order, each marked with its block and role


def render(blocks: list[Block], furniture: str = "separate",
           table_reader: TableReader | None = None) -> Page:
    """Text and Markdown of ``blocks`` (in reading order). The page's furniture (its
    header and footer blocks) is, as ``furniture`` says, left where it stands
    ("keep"), read after the body under FURNITURE_HEADING ("separate"), or left out of
    the text and Markdown ("drop"; its lines are still in ``Page.lines``). Each table
    the rules find is written by ``table_reader`` where it gives one, else by them."""
    body = [block for block in blocks if block.furniture is None]
    edges = [block for block in blocks if block.furniture is not None]
    if furniture != "keep":
        blocks = body + edges
    lines = [line for block in blocks for line in block.lines]
    if not lines:
        return Page("", "", [])
    shown = blocks if furniture == "keep" else body
    # print heights are those of the lines across: a column's height is its length
    across = [block for block in body if not block.vertical]
    height = median_height([line for block in blocks if not block.vertical
                            for line in block.lines] or lines)
    pitch = body_pitch(running_lines([line for block in across for line in block.lines]))
    headings = _headings(across, height, pitch)
    parts: list[str] = []
    # what each line of the body is in the Markdown: text unless found otherwise
    structure = {id(line): Structure.TEXT for block in body for line in block.lines}
    body_parts = _body_parts(shown, height)
    index = 0
    while index < len(body_parts):
        if parts:
            parts.append("")
        end = index
        while table_reader and end < len(body_parts) and _tabular(*body_parts[end]):
            end += 1
        rows, tables = body_parts[index]
        # a table the rules read as one run is the part's own (``_block_markdown``);
        # one they broke up is handed over whole
        if end > index + 1 or (end == index + 1 and not _one_run(rows, tables)):
            region = [line for part, _ in body_parts[index:end] for row in part for line in row]
            if written := table_reader(region, False):
                structure.update((id(line), Structure.TABLE) for line in region)
                parts.extend(written)
                index = end
                continue
        parts.extend(_block_markdown(rows, tables, height, headings, table_reader,
                                     structure))
        index += 1
    if furniture == "separate" and edges:
        parts += ["", FURNITURE_HEADING, ""]
        parts.extend(part for block in edges for part in _rows_as_they_stand(block.rows))
    written = shown + (edges if furniture == "separate" else [])
    text = "\n".join(" ".join(line.text for line in row) for block in written
                     for row in block.rows)
    lines = [replace(line, block=number, structure=structure.get(id(line)))
             for number, block in enumerate(blocks) for line in block.lines]
    return Page(text=text, markdown="\n".join(parts).strip("\n"), lines=lines)


def _rows_as_they_stand(rows: list[list[Line]]) -> list[str]:
    """A header's or footer's rows, or a block's vertical columns, as they stand: no
    heading, list or table."""
    return [escape_markdown(" ".join(line.text for line in row)) for row in rows]


def _body_parts(blocks: list[Block], body: float
                ) -> list[tuple[list[list[Line]], Runs | None]]:
    """The blocks as parts of Markdown: each block's rows with its table runs; or the
    rows of a run of blocks that one table goes on through (``tables.joined``: the
    reading order cut a table where white stood between its rows). Furniture and vertical
    columns have no runs: a line each, as they stand."""
    parts: list[tuple[list[list[Line]], Runs | None]] = []
    for block in blocks:
        if block.furniture is not None or block.vertical:
            parts.append((block.rows, None))
            continue
        tables = table_runs(block.rows, body)
        if parts and parts[-1][1] and tables:
            rows, above = parts[-1]
            below = {start + len(rows): (end + len(rows), columns, apart)
                     for start, (end, columns, apart) in tables.items()}
            runs = joined({**above, **below})
            if len(runs) < len(above) + len(below):  # the table goes on into this block
                parts[-1] = (rows + block.rows, runs)
                continue
        parts.append((block.rows, tables))
    return parts


def _tabular(rows: list[list[Line]], tables: Runs | None) -> bool:
    """Whether a part is all table: runs the rules found, and between them only short
    rows (a header the runs left out, a section's label), no running text. Such parts
    one after the other are one region for another table reader: the rules cut a
    table into runs where its columns change, the model reads it whole."""
    if not tables:
        return False
    inside = {index for start, (end, _columns, _apart) in tables.items()
              for index in range(start, end)}
    return all(index in inside or word_count(" ".join(line.text for line in row)) < PROSE_WORDS
               for index, row in enumerate(rows))


def _one_run(rows: list[list[Line]], tables: Runs) -> bool:
    """Whether a part is one run of a table's rows and nothing else."""
    return list(tables) == [0] and tables[0][0] == len(rows)


def _block_markdown(rows: list[list[Line]], tables: Runs | None, body: float,
                    headings: dict[int, int], table_reader: TableReader | None,
                    structure: dict[int, Structure]) -> list[str]:
    """A part's Markdown (``_body_parts``); rows as they stand where it has no runs.
    ``headings``: the page's (``_headings``). What its lines are goes into
    ``structure`` ({id(line): what})."""
    if tables is None:
        return _rows_as_they_stand(rows)
    out: list[str] = []
    index = 0
    previous_bottom: float | None = None
    in_item = False  # the row above is a list item's, or the text it carries on onto
    while index < len(rows):
        row = rows[index]
        top = min(line.box[1] for line in row)
        if out and out[-1] != "" and (
                (previous_bottom is not None and top - previous_bottom > PARAGRAPH_GAP * body)
                or (not in_item and _indented_first_line(rows, index, body))):
            out.append("")
        if index in tables:
            end, columns, apart = tables[index]
            if out and out[-1] != "":
                out.append("")
            lines = [line for row in rows[index:end] for line in row]
            structure.update((id(line), Structure.TABLE) for line in lines)
            ruled = table_markdown(rows[index:end], columns, body, apart)
            # where the rules found names over groups of columns (HTML), theirs stand
            out.extend(ruled if ruled[0] == "<table>" or not table_reader
                       else table_reader(lines, True) or ruled)
            out.append("")
            previous_bottom = None
            index = end
            continue
        carried = in_item and out[-1] != "" and id(row) not in headings
        out.append(_row_markdown(row, headings.get(id(row), 0), structure))
        in_item = carried or structure.get(id(row[0])) == Structure.LIST
        if in_item and index + 1 < len(rows) and _item_ends(row, rows[index + 1]):
            out.append("")  # else Markdown reads the row under it as the item's (lazily)
        previous_bottom = max(line.box[3] for line in row)
        index += 1
    while out and out[-1] == "":
        out.pop()
    return out


def _indented_first_line(rows: list[list[Line]], index: int, body: float) -> bool:
    """Whether the row at ``index`` opens a paragraph by its first line's indent, as
    typeset text and Chinese text (two characters) open one without white over it: it
    starts INDENT line heights right of the rows over and under it, which start
    together, and runs on as far right as they do, within a few words (RAGGED line
    heights). A list item's lines hung under its marker stand indented one after the
    other; a receipt's or a letterhead's centred lines end short of the longer ones
    around them, or share no measure with the rows of their block, as a form's
    labels and values do not."""
    if not 0 < index < len(rows) - 1:
        return False
    (above, above_end), (start, end), (below, below_end) = (
        _edges(rows[i]) for i in (index - 1, index, index + 1))
    if not (INDENT[0] * body <= start - above <= INDENT[1] * body
            and abs(below - above) <= INDENT[0] * body
            and end >= max(above_end, below_end) - RAGGED * body):
        return False
    # the row under it a full line of a measure more rows share than a title takes
    return sum(1 for left, right in map(_edges, rows) if abs(left - below) <= INDENT[0] * body
               and abs(right - below_end) <= RAGGED * body) > HEADING_MAX_ROWS


def _row_markdown(row: list[Line], level: int, structure: dict[int, Structure]) -> str:
    """A row's Markdown: a heading of ``level`` (0: none), a list's item or text."""
    text = " ".join(line.text for line in row)
    if level:
        structure.update((id(line), Structure.HEADING) for line in row)
        return "#" * level + " " + escape_markdown(text)
    if bullet := BULLET.match(text):
        structure.update((id(line), Structure.LIST) for line in row)
        return "- " + escape_markdown(text[bullet.end():])
    if number := ENUMERATOR.match(text):
        structure.update((id(line), Structure.LIST) for line in row)
        marker = number.group(1)
        if _ORDERED.fullmatch(marker):  # "3." or "3)": an ordered item as it stands
            return f"{marker} " + escape_markdown(text[number.end():])
        return "- " + escape_markdown(text)  # "a)", "(b)", "一、": kept in the item's text
    return escape_markdown(text)


def _item_ends(item: list[Line], below: list[Line]) -> bool:
    """Whether a list's item row ends its item: the row under it is no item itself, and
    its first word would have fitted beside the item's text within the wider of the
    two rows (a section's numbered heading, "A. Broken Service Access Control", over
    its paragraph), so that it does not carry on the item's text."""
    text = " ".join(line.text for line in below)
    right = max(line.box[2] for line in [*item, *below])
    return (not starts_item(text)
            and max(line.box[2] for line in item) + first_word_width(below[0]) <= right)


def _headings(blocks: list[Block], body: float, pitch: float | None = None) -> dict[int, int]:
    """The rows of ``blocks`` that are headings, by ``id``, with their level: 1 for the
    tallest print among them, 2 for the next, 3 below. A row that ends a paragraph
    (``_ends_paragraph``) is none, however tall its box. ``pitch``: the width of a
    character of the body's, where it is written without spaces
    (``reading.furniture.body_pitch``)."""
    running = {id(row) for block in blocks for row in _running_text(block.rows, body)}
    edges = [_edges(row) for block in blocks for row in block.rows]
    found = [row for block in blocks
             for before, above, row in zip([None, None, *block.rows], [None, *block.rows],
                                           block.rows)
             if id(row) not in running and _heading_candidate(row, body, pitch)
             and not _ends_paragraph(before, above, row, edges, body)]
    size = {id(row): round(_print_size(row, body, pitch) * body) for row in found}
    sizes = sorted(set(size.values()), reverse=True)
    return {id(row): min(3, sizes.index(size[id(row)]) + 1) for row in found}


def _ends_paragraph(before: list[Line] | None, above: list[Line] | None, row: list[Line],
                    edges: list[tuple[float, float]], body: float) -> bool:
    """Whether ``row`` is the last line of the paragraph ``above`` wraps onto: ``row``
    starts where ``above`` does, stands under it as ``above`` stands under the row
    ``before`` it (no more white than the paragraph's lines have between them, give or
    take SECTION_MARGIN line heights: a heading has more over it), and ``above`` is a
    full line of the page's running text, no heading's, its left and right edges those
    of more rows than a title takes (HEADING_MAX_ROWS), within a line height (Chinese
    "己吗？" under its paragraph, boxed taller than its lines)."""
    if before is None or above is None:
        return False
    left, right = _edges(above)
    sharing = sum(1 for a, b in edges if abs(a - left) <= body and abs(b - right) <= body)
    spacing = _white(before, above)
    return (sharing > HEADING_MAX_ROWS and not _heading_candidate(above, body)
            and _white(above, row) <= spacing + SECTION_MARGIN * body
            and abs(_edges(row)[0] - left) <= body)


def _white(above: list[Line], below: list[Line]) -> float:
    return min(line.box[1] for line in below) - max(line.box[3] for line in above)


def _edges(row: list[Line]) -> tuple[float, float]:
    return min(line.box[0] for line in row), max(line.box[2] for line in row)


def _print_size(row: list[Line], body: float, pitch: float | None = None) -> float:
    """How much larger a row's print is than the body's: its box's height against the
    body's lines', or, written without spaces on a page of such print, the width of its
    characters against theirs where that says more (a detector pads a line of Chinese
    by its glyphs: a paper's title boxed 1.14 times the body's lines is 1.38 times as
    wide a character)."""
    taller = median_height(row) / body
    own = char_pitch(row) if pitch is not None else None
    return max(taller, own / pitch) if own is not None else taller


def _heading_candidate(row: list[Line], body: float, pitch: float | None = None) -> bool:
    """A short row in print HEADING_RATIO larger than the body's (``_print_size``),
    without a stop, no formula."""
    text = " ".join(line.text for line in row).strip()
    return (_print_size(row, body, pitch) >= HEADING_RATIO
            and 0 < word_count(text) <= HEADING_MAX_WORDS
            and not text.endswith(_STOPS)
            and any(ch.isalpha() for ch in text)
            and not _formula(text))


def _formula(text: str) -> bool:
    """Whether ``text`` is a formula: an equals sign or a mathematical operator beyond
    ASCII's (∑, ∫, ≤, ×, →). A formula's box is tall by its operators, indices and
    fractions, not by its print."""
    return any(ch == "=" or (ord(ch) > 127 and unicodedata.category(ch) == "Sm")
               for ch in text)


def _running_text(rows: list[list[Line]], body: float) -> list[list[Line]]:
    """The rows in runs of more than HEADING_MAX_ROWS rows of one print with no
    paragraph's white between them (``_close``). A row is of a run's print unless
    HEADING_RATIO taller or shorter than the run's median line; one shorter between
    two of its print (OCR boxes a line without descenders shorter) does not end it."""
    runs: list[list[list[Line]]] = []
    for index, row in enumerate(rows):
        run = runs[-1] if runs else []
        after = rows[index + 1:index + 2]
        if run and _close(run[-1], row, body) and (
                _one_print(run, [row])
                or (median_height(row) < _print(run) and after
                    and _close(row, after[0], body) and _one_print(run, after))):
            run.append(row)
        else:
            runs.append([row])
    return [row for run in runs if len(run) > HEADING_MAX_ROWS for row in run]


def _close(above: list[Line], below: list[Line], body: float) -> bool:
    """Whether no paragraph's white stands between two rows: less than PARAGRAPH_GAP
    line heights of the taller print, theirs or the page body's."""
    return _white(above, below) <= PARAGRAPH_GAP * max(body, median_height(above),
                                                       median_height(below))


def _one_print(rows: list[list[Line]], others: list[list[Line]]) -> bool:
    """Whether two sets of rows are of one print: neither's median line HEADING_RATIO
    taller than the other's."""
    a, b = _print(rows), _print(others)
    return max(a, b) < HEADING_RATIO * min(a, b)


def _print(rows: list[list[Line]]) -> float:
    return median_height([line for row in rows for line in row])


def layout_blocks(lines: list[dict]) -> list[dict]:
    """The blocks of a stored page, from its lines' ``block`` and ``role``: each with its
    reading-order index, its box, the roles of its lines and the indexes of its lines
    in the page's ``lines`` (the JSON output's ``layout``). Empty for lines without
    blocks (an engine that reads the page whole, such as the vision model)."""
    blocks: dict[int, dict] = {}
    for index, line in enumerate(lines):
        if line.get("block") is None:
            continue
        x0, y0, x1, y1 = line["box"]
        block = blocks.setdefault(line["block"], {"order": line["block"], "box": [x0, y0, x1, y1],
                                                  "roles": [], "lines": []})
        box = block["box"]
        block["box"] = [min(box[0], x0), min(box[1], y0), max(box[2], x1), max(box[3], y1)]
        if line.get("role") and line["role"] not in block["roles"]:
            block["roles"].append(line["role"])
        block["lines"].append(index)
    return [blocks[order] for order in sorted(blocks)]


def in_order(lines: list[dict], order: list[int], furniture: str = "separate",
             table_reader: TableReader | None = None) -> Page:
    """A stored page (its lines, with their ``block`` and ``role``) rendered again with
    its blocks in ``order`` (block numbers, as ``layout_blocks`` gives them): a
    reviewer's reading order. Each block keeps its rows, and the page's furniture is
    placed as ``furniture`` says (``render``, as is ``table_reader``). ValueError unless
    ``order`` names each of the page's blocks once."""
    blocks: dict[int, list[Line]] = {}
    for line in lines:
        if line.get("block") is not None:
            blocks.setdefault(line["block"], []).append(Line.from_dict(line))
    if sorted(order) != sorted(blocks):
        raise ValueError(f"name each of the page's blocks once: {', '.join(map(str, sorted(blocks)))}")
    height = median_height([line for block in blocks.values() for line in block])
    return render([_stored_block(blocks[number], height) for number in order], furniture,
                  table_reader)


def _stored_block(lines: list[Line], height: float) -> Block:
    """A stored block as it was read: a block of vertical text (``reading.vertical``) its
    columns in their stored order, a column a row; any other its lines in rows."""
    if all(is_column(line.box, line.text) for line in lines):
        return Block(rows=[[line] for line in lines], vertical=True)
    return Block(rows=row_groups(lines, height), furniture=_furniture(lines))


def _furniture(lines: list[Line]) -> Furniture | None:
    """A stored block's furniture role (the edge it stands at), None for the body."""
    roles = {line.furniture for line in lines}
    for edge in (Furniture.HEADER, Furniture.FOOTER):
        if edge in roles:
            return edge
    return Furniture.FOOTER if Furniture.PAGE_NUMBER in roles else None
