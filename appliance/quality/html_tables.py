"""Tables whose cells span columns or rows, which Markdown's pipe tables cannot hold: a
page's Markdown holds them as HTML (the format contract, ``quality.blocks``). One
reader and one writer serve every engine, so such a table is written one way and read
one way wherever it came from: the classic reader's column groups
(``reading.tables``), a vision model's HTML (``engines.converters``).

The HTML written is rebuilt from the cells, never passed on: tags ``table``,
``thead``, ``tbody``, ``tr``, ``th`` and ``td``, the attributes ``rowspan`` and
``colspan`` (numbers), the text escaped; one row a line and no blank line, so that
it is one HTML block of Markdown.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

MAX_SPAN = 100  # a runaway rowspan/colspan from a looping model must not blow up the table
# An HTML table block as Markdown has one (CommonMark's HTML blocks): a line that opens
# with <table, to its </table>, else to the first blank line (a table a model cut off);
# "<table" inside a sentence, or escaped, is text.
HTML_TABLE = re.compile(r"^ {0,3}<table\b.*?(?:</table\s*>|(?=\n[ \t]*\n)|\Z)",
                        re.IGNORECASE | re.DOTALL | re.MULTILINE)


@dataclass
class Cell:
    text: str
    rowspan: int = 1
    colspan: int = 1
    header: bool = False  # a <th>


class _TableReader(HTMLParser):
    """Rows of cells of one HTML table; text inside a nested table belongs to the outer
    cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.rows: list[list[Cell]] = []
        self._parts: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self._depth += 1
        elif self._depth == 1 and tag == "tr":
            self._end_cell()
            self.rows.append([])
        elif self._depth == 1 and tag in ("td", "th"):
            self._end_cell()
            if not self.rows:
                self.rows.append([])
            spans = dict(attrs)
            self.rows[-1].append(Cell("", _span(spans.get("rowspan")), _span(spans.get("colspan")),
                                      tag == "th"))
            self._parts = []
        elif self._parts is not None and tag in ("br", "td", "th", "tr", "p", "div", "li"):
            self._parts.append(" ")  # <br> and nested blocks separate words

    def handle_endtag(self, tag):
        if tag == "table":
            self._depth -= 1
            if self._depth == 0:
                self._end_cell()
        elif self._depth == 1 and tag in ("td", "th"):
            self._end_cell()

    def handle_data(self, data):
        if self._parts is not None:
            self._parts.append(data)

    def close(self) -> None:
        super().close()
        self._end_cell()  # a cut-off table's last cell

    def _end_cell(self) -> None:
        if self._parts is not None:
            self.rows[-1][-1].text = " ".join("".join(self._parts).split())
            self._parts = None


def _span(value: str | None) -> int:
    try:
        return min(max(int(value or 1), 1), MAX_SPAN)
    except ValueError:
        return 1


def read_table(source: str) -> list[list[Cell]]:
    """The rows of the first HTML table in ``source`` (a cut-off one read as far as it
    goes); rows without cells left out."""
    reader = _TableReader()
    # A cut-off answer can end inside a tag ("<t"); the parser would keep it as text.
    reader.feed(re.sub(r"<[^>]*$", "", source))
    reader.close()
    return [row for row in reader.rows if row]


def spans(rows: list[list[Cell]]) -> bool:
    """Whether a cell of the table spans columns or rows."""
    return any(cell.rowspan > 1 or cell.colspan > 1 for row in rows for cell in row)


def placed(rows: list[list[Cell]]) -> list[tuple[int, int, Cell]]:
    """(row, column, cell) of each cell, the columns counted as a browser lays them out:
    a cell goes to the first column the cells spanning down from the rows above leave
    free."""
    taken: set[tuple[int, int]] = set()
    out = []
    for r, row in enumerate(rows):
        c = 0
        for cell in row:
            while (r, c) in taken:
                c += 1
            out.append((r, c, cell))
            taken.update((r + dr, c + dc) for dr in range(min(cell.rowspan, len(rows) - r))
                         for dc in range(cell.colspan))
            c += cell.colspan
    return out


def table_lines(rows: list[list[Cell]]) -> list[str]:
    """The table as HTML, a line a row: its leading rows of header cells (``th``) are
    its head."""
    head = 0
    while head < len(rows) and all(cell.header for cell in rows[head]):
        head += 1

    def line(row: list[Cell]) -> str:
        return "<tr>" + "".join(_cell_html(cell) for cell in row) + "</tr>"

    out = ["<table>"]
    if head:
        out += ["<thead>", *map(line, rows[:head]), "</thead>"]
    return out + ["<tbody>", *map(line, rows[head:]), "</tbody>", "</table>"]


def _cell_html(cell: Cell) -> str:
    tag = "th" if cell.header else "td"
    spans = "".join(f' {name}="{n}"' for name, n in (("rowspan", cell.rowspan),
                                                     ("colspan", cell.colspan)) if n > 1)
    return f"<{tag}{spans}>{html.escape(cell.text, quote=False)}</{tag}>"
