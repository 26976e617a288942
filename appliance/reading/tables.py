"""A page's tables: runs of rows whose cells fall into the same columns, and each run
as a Markdown table (``reading.markdown`` describes what makes one).

Cells are the separate lines of a row (or lines closer than TABLE_CELL_GAP, where
that reads the run longer); columns are where the cells' horizontal extents overlap
from row to row. Rows that hold the wrapped lines of the cells above them
(``_wraps_on``) are joined to them, and so are the lines of a header set on several
rows (``_join_header``). Names of groups of columns over a table (``_group_head``)
head it, and the table is then HTML, each name's cell spanning its group's columns.
"""

from __future__ import annotations

import re

from appliance.page import Line, unspaced
from appliance.quality.html_tables import Cell, table_lines
from appliance.quality.markdown import escape_markdown
from appliance.reading.lines import (PROSE_WORDS, first_word_width, median_height, overlap,
                                     starts_item, word_count)

# {first row index: (index after the last, the table's columns as x extents, whether
# each line is a cell of its own)}
Runs = dict[int, tuple[int, list[list[float]], bool]]

MIN_TABLE_ROWS = 3
# A list's numbers or bullets, which stand beside its items as a column of their own
# where the items hang indented ("1.", "a)", "(iv)", "•", "一、").
LIST_MARKER = re.compile(r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxlcIVXLC]{1,5})[.)]|[•·▪‣◦∙*–-]|[①-⑳]"
                         r"|[一二三四五六七八九十]{1,3}、")
# Two rows are a table where each holds this many cells in the same columns (a header
# over one row of figures: "Products | Butter | Margarine | Low fat products" over
# "Turnover Ffr. m. | 6028 | 1385 | 836"); two rows of two cells may be anything.
SHORT_TABLE_CELLS = 3
TABLE_CELL_GAP = 1.0  # line heights between two lines of a row for them to be two cells
# A cell may reach this many line heights into the next column ("Amount due" under
# "Unit price", 4 px into the amounts' column) and still stand in its own.
COLUMN_SLACK = 0.25
# a year or a span of years names a column ("1995*", "1996/7", "FY2008"), as a header
# does, and so does a band of ages or sizes ("15-24")
COLUMN_LABEL = re.compile(r"(?:FY\s?)?(?:1[89]|20)\d\d(?:\s*[-/–]\s*(?:\d\d?|\d{4}))?[*†']*"
                          r"|\d{1,3}\s*[-–]\s*\d{1,3}")
HEAD_GAP = 1.0  # line heights between a row of column groups and the row under it
# a cell that ends so, in this many words or more, ends a sentence: no group's name
SENTENCE_ENDS = (".", "!", "?", "。", "！", "？")
SENTENCE_WORDS = 4
WRAP_GAP = 0.2  # line heights between a cell's line and its wrapped continuation: single-spaced


def table_runs(rows: list[list[Line]], body: float) -> Runs:
    """Runs of rows that form a table: {first row index: (index after the last, the
    table's columns as x extents, whether each line is a cell of its own)}.

    Each line is tried as a cell of its own first: a table's columns may stand closer
    than TABLE_CELL_GAP ("Mean | SD | Median" a fifth of a line height apart), and
    lines that align down the rows are cells wherever they stand. Else lines closer
    than that are one cell (a sentence the detector split in two)."""
    runs: Runs = {}
    index = floor = 0
    while index < len(rows):
        (end, columns), apart = max(
            ((_table_run(rows, index, body, apart), apart) for apart in (True, False)),
            key=lambda run: run[0][0])
        if (end - index >= MIN_TABLE_ROWS or (end - index == 2 and all(
                len(_cells(row, body, apart)) >= SHORT_TABLE_CELLS for row in rows[index:end]))) \
                and not _prose_side_by_side(rows[index:end], columns, body, apart):
            start = _group_head(rows, floor, index, columns, body, apart)
            end = _wrapped_tail(rows, end, columns, body, apart)
            runs[start] = (end, columns, apart)
            index = floor = end
        else:
            index += 1
    return joined(runs)


def _prose_side_by_side(rows: list[list[Line]], columns: list[list[float]], body: float,
                        apart: bool) -> bool:
    """Whether rows that line up as a table's are running text side by side: no column
    of short cells (figures, or fewer than PROSE_WORDS words), as in columns of prose
    whose gutter was not found; or none but a list's markers beside its items. A table
    has labels or figures in a column at least ("Low-income | Less than 50"). Prose
    written as a table loses its words' order, worse than a table missed."""
    filled: list[list[str]] = [[] for _ in columns]
    for row in rows:
        for i, cell in enumerate(_grid_row(row, columns, body, apart)):
            if cell:
                filled[i].append(" ".join(line.text for line in cell).strip())
    short = [texts for texts in filled if texts and 2 * sum(
        _is_value(text) or word_count(text) < PROSE_WORDS for text in texts) > len(texts)]
    return not short or (len(short) == 1 and short[0] is filled[0]
                         and all(LIST_MARKER.fullmatch(text) or _mark(text)
                                 for text in filled[0]))


def _mark(text: str) -> bool:
    """A character on its own that is no letter or digit: a bullet a symbol font drew
    ("■", or "¢" where its font maps it so), a speck beside a list ("`"). It labels no
    row ("$$$", a cost's rating, does)."""
    return len(text) == 1 and not text.isalnum()


def joined(runs: Runs) -> Runs:
    """The runs with each run that starts where the one above ends, in the same
    columns (as many, each under the one above), made one table: a row that would
    have widened a column into its neighbour (a cell's long wrapped line) ended the
    first, and the rest of the table started the next."""
    result: Runs = {}
    previous = None
    for start in sorted(runs):
        end, columns, apart = runs[start]
        if previous is not None:
            first_end, first_columns, first_apart = result[previous]
            if first_end == start and first_apart == apart and len(first_columns) == len(columns) \
                    and all(overlap(*above, *below) > 0 for above, below in zip(first_columns, columns)):
                result[previous] = (end, [[min(a[0], b[0]), max(a[1], b[1])]
                                          for a, b in zip(first_columns, columns)], apart)
                continue
        result[start] = (end, columns, apart)
        previous = start
    return result


def _table_run(rows: list[list[Line]], index: int, body: float, apart: bool
               ) -> tuple[int, list[list[float]]]:
    """The rows from ``index`` on that fit one table's columns: (index after the last
    row of two cells or more, the columns)."""
    end = last = index
    columns: list[list[float]] = []
    while end < len(rows):
        cells = _cells(rows[end], body, apart)
        merged = _merge_columns(columns, cells) if len(cells) >= 2 or (
            columns and _in_one_column(columns, cells)) else None
        if merged is None:
            break
        columns = merged
        end += 1
        if len(cells) >= 2:
            last = end
    return last, columns  # a table ends with a row of cells, not the text under it


def _group_head(rows: list[list[Line]], floor: int, start: int, columns: list[list[float]],
                body: float, apart: bool) -> int:
    """The index of the table's first row with the rows of column groups over it (rows
    from ``floor`` on, each within HEAD_GAP line heights over the next): names that each
    stand over two columns or more ("Finland" over "Female | Male | Total", "Course
    year" over "1st | 2nd | 3rd-5th"), which ended the table, for its columns cannot
    hold them."""
    while start > floor and (found := _group_row(rows[start - 1], columns, body, apart)) and \
            _heads(found, rows[start], columns, body, apart) and \
            min(line.box[1] for line in rows[start]) - \
            max(line.box[3] for line in rows[start - 1]) <= HEAD_GAP * body:
        start -= 1
    return start


def _heads(groups: list[tuple[list[int], list[Line]]], below: list[Line],
           columns: list[list[float]], body: float, apart: bool) -> bool:
    """Whether each group stands over a name in each of its columns in the row ``below``:
    the columns' names (words, not figures), or the groups of a row of groups; and the
    row labels' column is filled in one of the two rows at most (the head of the row
    labels stands once). A form's title or a long value over a table has no name under
    each of its columns, and a form's label ("Name:") has another label under it."""
    cells = _grid_row(below, columns, body, apart)
    under = _group_row(below, columns, body, apart)
    if under:
        named = {i for hits, _ in under for i in hits}
    else:
        named = {i for i, cell in enumerate(cells)
                 if cell and not _is_value(" ".join(line.text for line in cell))}
    labelled = any(hits == [0] for hits, _ in groups)
    return all(set(hits) <= named for hits, _ in groups if len(hits) > 1) and not (
        labelled and cells[0])


def _group_row(row: list[Line], columns: list[list[float]], body: float, apart: bool
               ) -> list[tuple[list[int], list[Line]]] | None:
    """The row as names of groups of the table's columns, each with the columns it
    stands over; None where it is not such a row. Each cell stands within its columns,
    one over two or more, none over another's, none over the row labels' column and
    another (a caption or a line of text does that), and none ends a sentence (the last
    line of a paragraph over a form)."""
    slack = COLUMN_SLACK * body
    groups: list[tuple[list[int], list[Line]]] = []
    taken: set[int] = set()
    for cell in _cells(row, body, apart):
        text = " ".join(line.text for line in cell).rstrip()
        if text.endswith(SENTENCE_ENDS) and word_count(text) >= SENTENCE_WORDS:
            return None
        x0, x1 = cell[0].box[0], cell[-1].box[2]
        hits = [i for i, (c0, c1) in enumerate(columns) if overlap(x0, x1, c0, c1) > slack]
        if not hits or taken & set(hits) or (len(hits) > 1 and hits[0] == 0) or \
                x0 < columns[hits[0]][0] - slack or x1 > columns[hits[-1]][1] + slack:
            return None
        taken.update(hits)
        groups.append((hits, cell))
    if not any(len(hits) > 1 for hits, _ in groups):
        return None
    return [(_centred_span(hits, (cell[0].box[0] + cell[-1].box[2]) / 2, columns, taken, body),
             cell) for hits, cell in groups]


def _centred_span(hits: list[int], centre: float, columns: list[list[float]],
                  taken: set[int], body: float) -> list[int]:
    """The columns of a group whose name stands centred over them: the columns its name
    covers, and the free ones beside them while its middle stays within a line height
    of the name's ("Finland" over the middle two of "Female | Male | Total | 15-24").
    The row labels' column is no group's."""
    first, last = hits[0], hits[-1]

    def off(a: int, b: int) -> float:
        return abs((columns[a][0] + columns[b][1]) / 2 - centre)

    def free(i: int) -> bool:
        return 0 < i < len(columns) and i not in taken

    while True:
        wider = [(a, b) for a, b in ((first - 1, last + 1), (first - 1, last), (first, last + 1))
                 if (a == first or free(a)) and (b == last or free(b))]
        if not wider:
            break
        a, b = min(wider, key=lambda span: (off(*span), span[0] - span[1]))
        if off(a, b) > max(off(first, last), body):
            break
        taken.update(range(a, b + 1))
        first, last = a, b
    return list(range(first, last + 1))


def _wrapped_tail(rows: list[list[Line]], end: int, columns: list[list[float]], body: float,
                  apart: bool) -> int:
    """The index after the table's last row and the rows under it that hold its wrapped
    lines (``_wraps_on``: "Tea, Herb Tea" under "Budget Coefficient for Coffee,")."""
    above = _grid_row(rows[end - 1], columns, body, apart)
    while end < len(rows) and _in_one_column(columns, _cells(rows[end], body, apart)):
        below = _grid_row(rows[end], columns, body, apart)
        if not _wraps_on(above, below, columns, body):
            break
        above = [cell + more for cell, more in zip(above, below)]
        end += 1
    return end


def _grid_row(row: list[Line], columns: list[list[float]], body: float, apart: bool
              ) -> list[list[Line]]:
    """A table's row as the lines of each of its columns (a column it leaves empty,
    empty): each cell in the column it overlaps most."""
    cells: list[list[Line]] = [[] for _ in columns]
    for cell in _cells(row, body, apart):
        x0, x1 = cell[0].box[0], cell[-1].box[2]
        cells[max(range(len(columns)), key=lambda i: overlap(x0, x1, *columns[i]))] = cell
    return cells


def _in_one_column(columns: list[list[float]], cells: list[list[Line]]) -> bool:
    """Whether a row of one cell stands under one of the table's columns only: a row
    of the table with one cell filled (a section's label, a cell's wrapped line)."""
    x0, x1 = cells[0][0].box[0], cells[0][-1].box[2]
    return len(cells) == 1 and sum(overlap(x0, x1, c0, c1) > 0 for c0, c1 in columns) == 1


def _cells(row: list[Line], body: float, apart: bool = False) -> list[list[Line]]:
    """A row's lines grouped into cells: each line a cell where ``apart``, else lines
    closer than TABLE_CELL_GAP line heights are one cell (a sentence split in two by
    the detector)."""
    if apart:
        return [[line] for line in row]
    cells = [[row[0]]]
    for line in row[1:]:
        if line.box[0] - cells[-1][-1].box[2] < TABLE_CELL_GAP * body:
            cells[-1].append(line)
        else:
            cells.append([line])
    return cells


def _merge_columns(columns: list[list[float]], cells: list[list[Line]]) -> list[list[float]] | None:
    """The table's columns (x extents) with this row's cells added; None when a cell
    would overlap two columns or two cells one column: the row does not fit."""
    spans = [[cell[0].box[0], cell[-1].box[2]] for cell in cells]
    if not columns:
        return spans
    slack = COLUMN_SLACK * median_height([line for cell in cells for line in cell])
    merged = [list(column) for column in columns]
    used: set[int] = set()
    for x0, x1 in spans:
        hits = [i for i, (c0, c1) in enumerate(merged) if overlap(x0, x1, c0, c1) > slack]
        if len(hits) > 1 or (hits and hits[0] in used):
            return None
        if hits:
            column = merged[hits[0]]
            column[0], column[1] = min(column[0], x0), max(column[1], x1)
            used.add(hits[0])
        else:
            merged.append([x0, x1])
    merged.sort()
    # a new column must not overlap a neighbour either
    if any(a[1] - b[0] > slack for a, b in zip(merged, merged[1:])):
        return None
    return merged


def table_markdown(rows: list[list[Line]], columns: list[list[float]], body: float,
                   apart: bool) -> list[str]:
    """The table as Markdown: a pipe table; an HTML table where names of column groups
    stand over it, each cell spanning the columns of its group (a pipe table cannot)."""
    groups: list[list[tuple[list[int], list[Line]]]] = []  # rows of groups (``_group_head``)
    while len(groups) + 1 < len(rows) and (
            found := _group_row(rows[len(groups)], columns, body, apart)) and \
            _heads(found, rows[len(groups) + 1], columns, body, apart):
        groups.append(found)
    grid: list[list[list[Line]]] = []  # row, column: the lines of that cell
    for row in rows[len(groups):]:
        cells = _grid_row(row, columns, body, apart)
        if grid and _wraps_on(grid[-1], cells, columns, body):
            for above, below in zip(grid[-1], cells):
                above.extend(below)
        else:
            grid.append(cells)
    grid = _join_centred(grid)
    _join_header(grid, body)
    text = [[_cell_text(cell) for cell in cells] for cells in grid]
    named = not any(map(_is_value, text[0]))  # column names, not data
    if groups:
        return _html_table(groups, text, named, len(columns))
    text = [[escape_markdown(cell) for cell in cells] for cells in text]
    if not named:
        text.insert(0, [""] * len(columns))
    out = ["| " + " | ".join(text[0]) + " |", "|" + "---|" * len(columns)]
    return out + ["| " + " | ".join(cells) + " |" for cells in text[1:]]


def _cell_text(cell: list[Line]) -> str:
    """A cell's lines as one text: a space between two lines, none where a line of a
    script written without spaces goes on onto the next ("归属母公司所有者的其他综合收"
    over "益的税后净额")."""
    text = ""
    for line in cell:
        glued = text and line.text and unspaced(text[-1]) and unspaced(line.text[0])
        text += line.text if glued or not text else " " + line.text
    return text


def _html_table(groups: list[list[tuple[list[int], list[Line]]]], text: list[list[str]],
                named: bool, width: int) -> list[str]:
    """The table as HTML: the rows of column groups, and the row of column names where
    there is one, head it."""
    head = []
    for found in groups:
        cells: list[Cell] = []
        column = 0
        for hits, lines in found:
            cells += [Cell("", header=True) for _ in range(hits[0] - column)]
            cells.append(Cell(" ".join(line.text for line in lines), colspan=len(hits),
                              header=True))
            column = hits[-1] + 1
        head.append(cells + [Cell("", header=True) for _ in range(width - column)])
    if named:
        head.append([Cell(cell, header=True) for cell in text[0]])
    return table_lines(head + [[Cell(cell) for cell in cells]
                               for cells in text[1 if named else 0:]])


def _is_value(cell: str) -> bool:
    """Whether a cell holds a value rather than a name: mostly digits ("48.70", "RM48.70",
    "12%"), and not a year or a band (``COLUMN_LABEL``: "1994", "15-24", which head
    columns of figures). "Q1", "EU-15", "population 1995 (mn)" and "1st year" are names."""
    text = cell.replace(" ", "")
    digits = sum(ch.isdigit() for ch in text)
    return digits * 2 > len(text) and not COLUMN_LABEL.fullmatch(cell.strip())


def _join_centred(grid: list[list[list[Line]]]) -> list[list[list[Line]]]:
    """The grid with the lines of a cell set centred on its row joined to that row: a
    cell of two lines beside a row of one-line cells stands half a line over them and
    half a line under (a Chinese report's "归属于上市公司股东的扣除非经常性损" over its
    row's figures, "益的净利润（元）" under them; "本报告期末比上年度末" over a header's
    other names, "增减" under them), so that each of its lines is a row of its own
    (``_centred_on``). A row is joined by one such row over it and one under it, each
    reaching into its height and no other row's: a receipt's item names between the
    rows of their quantities and prices reach into the rows over and under them alike."""
    beside = [[other for other in (index - 1, index + 1)
               if 0 <= other < len(grid) and _centred_on(row, grid[other])]
              for index, row in enumerate(grid)]
    hosts = {index: near[0] for index, near in enumerate(beside) if len(near) == 1}
    joined = {host for host in set(hosts.values())
              if hosts.get(host - 1) == host and hosts.get(host + 1) == host}
    if not joined:
        return grid
    rows = []
    for index, row in enumerate(grid):
        if index in joined:
            rows.append([sorted(above + cell + below, key=lambda line: line.box[1])
                         for above, cell, below in zip(grid[index - 1], row, grid[index + 1])])
        elif hosts.get(index) not in joined:
            rows.append(row)
    return rows


def _centred_on(row: list[list[Line]], other: list[list[Line]]) -> bool:
    """Whether ``row`` holds lines of the cells of the row ``other`` next to it: it fills
    fewer columns than ``other`` (which fills two or more), only columns ``other``
    leaves empty, with words, and its lines reach into the height of ``other``'s (a
    centred cell's first line stands half a line over its row's, its last half a line
    under). A row of a dense table fills a column the row next to it fills (its
    label's), and a receipt's item over its quantity and price stands clear of it."""
    filled = [i for i, cell in enumerate(row) if cell]
    theirs = [i for i, cell in enumerate(other) if cell]
    return bool(filled) and len(theirs) >= 2 and len(filled) < len(theirs) and \
        not set(filled) & set(theirs) and _gap(other, row) < 0 and \
        any(ch.isalpha() for i in filled for line in row[i] for ch in line.text)


def _gap(one: list[list[Line]], other: list[list[Line]]) -> float:
    """The white between two rows of a grid (negative where their lines overlap)."""
    return max(_top(one), _top(other)) - min(_bottom(one), _bottom(other))


def _join_header(grid: list[list[list[Line]]], body: float) -> None:
    """Make the table's first rows one header row where they are the lines of its
    column names: rows whose first cell (the head of the row labels' column) is
    empty, each within WRAP_GAP line heights under the one above, over a row whose
    first cell is filled ("population | number of" over "(mn) | enterprises" over
    "| (000)", then "EU15 | 372.3 | 2553"). A header of two rows whose first cell is
    filled stays two ("Country" beside a row of sub-headings)."""
    if grid[0][0]:
        return
    head = 1
    while head < len(grid) and not grid[head][0] and \
            _top(grid[head]) - _bottom(grid[head - 1]) <= WRAP_GAP * body:
        head += 1
    if 1 < head < len(grid) and grid[head][0]:
        grid[:head] = [[[line for row in grid[:head] for line in row[i]]
                        for i in range(len(grid[0]))]]


def _top(cells: list[list[Line]]) -> float:
    return min(line.box[1] for cell in cells for line in cell)


def _bottom(cells: list[list[Line]]) -> float:
    return max(line.box[3] for cell in cells for line in cell)


def _wraps_on(above: list[list[Line]], below: list[list[Line]], columns: list[list[float]],
              body: float) -> bool:
    """Whether the row ``below`` holds the wrapped lines of the cells of the row
    ``above``: it fills some of the columns ``above`` fills and no other, and in each
    the line above it is as wide as its column allows, so that the first word under it
    would not have fitted (the line was wrapped, not ended), and stands no more than
    WRAP_GAP line heights over it; and each holds a word, since figures do not wrap
    ("2008 | 120.9" under "2007 | 148.8 | 142.3"); one that starts with a capital
    letter continues only a cell left open (``_left_open``: "Monoprix 28; Casino 25;"
    over "Intermarche 23;"), for a capital more often starts a cell ("Matthew Harrison"
    under "David.Risinger@morganstanley.com", a section's label "Staff"). A row that
    fills every column of the one above is a row of its own, as is one under a short
    cell ("Total" under "Tax")."""
    filled = [i for i, cell in enumerate(below) if cell]
    if not filled or len(filled) == sum(1 for cell in above if cell):
        return False
    for i in filled:
        if not above[i]:
            return False
        last, first = above[i][-1], below[i][0]
        letters = [ch for line in below[i] for ch in line.text if ch.isalpha()]
        if not letters or (letters[0].isupper() and not _left_open(last.text)):
            return False
        if starts_item(first.text):  # "二、市场分析" under a table: a heading, not a cell's wrap
            return False
        if first.box[1] - last.box[3] > WRAP_GAP * body:
            return False
        width = columns[i][1] - columns[i][0]
        if (last.box[2] - last.box[0]) + first_word_width(first) <= width:
            return False
    return True


def _left_open(text: str) -> bool:
    """Whether a cell's line ends mid-clause: on a comma, semicolon, colon, dash or
    slash, or inside a bracket ("200 (as" over "BTEX)")."""
    text = text.rstrip()
    return text.endswith((",", ";", ":", "-", "–", "/", "&")) or any(
        text.count(opening) > text.count(closing) for opening, closing in ("()", "[]"))
