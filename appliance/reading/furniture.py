"""Page furniture: the running header, the footer and the page number, found by where
they stand and what they hold, in any script.

A typeset page (``TYPESET_LINES`` lines of running text or more) may have, at its
top and at its bottom, up to ``EDGE_ROWS`` rows that are not its body:

- a **page number**: a row of one line that is a number as pages are numbered
  ("12", "- 12 -", "Page 3 of 10", "iv", "第 3 页"), at either edge, however close it
  stands to the body, and on any page (a form's "Page 2 of 3" too);
- a **numbered running header or footer**: on a typeset page, a row with the page
  number at its outer end and no title nor running text beside it ("44 | 中西比较美术学",
  "Chapter 2 | 45"; in Chinese or Japanese print its characters no wider than
  HEADING_RATIO times the body's, as a Latin row's height; in print smaller than the
  body's, however many its words: "254 | P.N.J. Lane et al. / Journal of Hydrology 310
  (2005) 253–265"), however close it stands to the body, unless the row next to it is
  numbered so too (a transcript's line numbers);
- a **header** or **footer**: on a typeset page, rows set apart from the body by
  white (``HEADER_GAP`` line heights below a header, ``FOOTER_GAP`` above a footer)
  whose print is no taller than the body's by ``HEADING_RATIO`` (a title is no
  header), in Chinese or Japanese print smaller than the body's, its characters
  narrower (``SMALLER_PRINT``: their boxes' height says their size less well), and
  which are no running text themselves (no line as wide as the page's running lines,
  ``MEASURE_SHARE``); or the same text at the top and at the bottom (a
  classification marking, "RESTRICTED").

A figure's or a table's caption ("Figure 3.", "Table 2", "图 3", "表 2") is none of
these, and nor is a row beyond it towards the body (the figure's labels over it): a
picture leaves no text, so at the foot of a page the caption under it stands in small
print set apart from the body, as a footer does.

And on any page, a line printed up or down the side margin beside everything else
(a journal's download stamp, a Bates number up a form's edge) is furniture read with
the page's foot (``up_the_margin``).

Forms and receipts have no running text: their first and last rows are content (a
form's title, a receipt's thank-you line) and only a page number is taken from them.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, replace

from appliance.page import UNSPACED, Furniture, Line
from appliance.reading.lines import HEADING_RATIO, char_pitch, median_height, rows, word_count

# A line turned on its side stands this many times taller than wide: three characters
# or more (a list's "1." alone stands one and a half times taller than wide).
TURNED_ASPECT = 3.0
# A strip of this many lines of one Chinese or Japanese character each, one above the
# other beside everything else, is a word printed up the margin (an exam paper's
# "密封线内不要答题" along its binding), which a detector finds a character at a time.
GLYPH_STACK = 3
# Rows at each edge that may be furniture: a header and a second line under it (the
# company, then the report's name), a footer and the page number under it.
EDGE_ROWS = 2
# A page of running text: this many lines of TYPESET_WORDS words or more. The nine real
# report and magazine pages measured have 25 to 60; receipts have none.
TYPESET_LINES = 12
# A line counted towards a typeset page: a word more than a line of running text
# (``reading.lines.PROSE_WORDS``, which judges narrow columns). Counted at four, a
# form's longer labels and notes make it typeset, and three of FUNSD's forms read
# worse (CER in order 0.07 -> 0.15 on one); at five for the columns, 36 of 216 built
# pages of prose in narrow columns are read across them.
TYPESET_WORDS = 5
# White between a header and the body, and between the body and a footer, in body
# line heights. Paragraphs of the body stand 0.3 to 1.0 apart on the pages measured;
# a letter's signature stands further from its last paragraph, so a footer needs more.
# The same white sets a footer apart under columns (``reading.order._footer``); at 2.5
# here, 3 of the built Chinese pages in columns kept their footer in the body.
HEADER_GAP = 1.2
FOOTER_GAP = 1.8
# A header in print smaller than the body's (at most this share of its height: a
# journal's 8 pt over its 10 pt text) needs only the white that separates the page's
# sections (``reading.order``): a Chinese journal's running header stands 0.8 line
# heights over its text, under HEADER_GAP, and stayed in the body. Chinese or
# Japanese print is furniture only so small, measured by its characters' width: a
# running header's are 0.78 to 0.85 of the body's on the built pages, four titles'
# 0.99 to 1.38 on Easydict's, their boxes 1.11 to 1.22 times as tall as the lines'.
SMALLER_PRINT = 0.9
# Furniture stands in the page's margins: where the page's height is known, a row that
# reaches further than this share of it from its edge is none (the captions under a
# picture at the top of a book page end 0.29 down it; the headers and footers found
# on the 250 real and built pages measured end within 0.14 of their edge).
EDGE_BAND = 0.2
# A line as wide as the page's running lines, to this share either way, fills the
# body's measure: a line of running text however few its words (a narrow column's:
# a paragraph carried over from the page before, over a section's heading, is no
# running header). Wider (a header over two columns) or narrower lines may be furniture.
# A page has a measure where at least half its running lines fill it (justified text:
# 0.89 of a paper's; a form's lines of five words or more, 0.26, have none).
MEASURE_SHARE = 0.95

# "12", "- 12 -", "· 12 ·" (Chinese journals; OCR reads it "- 12·" too), "Page 3",
# "Page 3 of 10", "3 / 10", "iv", "第 3 页", "第3页 共10页":
# not "0", "C", "x" or "4/79" (a form's codes, ticks and dates), nor 4-digit numbers
# (form ids), nor "[149]" (a citation a detector found apart from its line)
_NUMBER = r"(?:[1-9]\d{0,2}|[ivx]{2,6}|i)"
_PAGE_NUMBER = re.compile(
    rf"^(?:(?:page|p\.|pg\.?|seite|página|pagina|страница)\s*)?"
    rf"[-–—(·•・]?\s*{_NUMBER}\s*[-–—)·•・]?"
    rf"(?:\s+(?:of|von|de|di|из)\s+[1-9]\d{{0,2}}|\s+/\s+[1-9]\d{{0,2}})?$"
    rf"|^第\s*[1-9]\d{{0,2}}\s*[页頁](?:\s*[，,]?\s*共\s*[1-9]\d{{0,2}}\s*[页頁])?$",
    re.IGNORECASE)
# "Figure 3", "Fig. 3", "Table 2", "Abb. 3", "Tabelle 2", "Figura 3", "Tableau 2",
# "Рис. 3", "图 3", "图3-2", "表 2", "圖 3", "図 3": a caption's opening, in the languages
# whose page numbers ``_PAGE_NUMBER`` reads
_CAPTION = re.compile(
    r"^(?:fig(?:ure|\.)?|table|tab\.|abb(?:ildung|\.)|tabelle|figura|tabla|tabela|"
    r"tabella|tableau|рис(?:унок|\.)|таблица)\s*\d+|^[图圖図表]\s*\d+",
    re.IGNORECASE)



def is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.match(text.strip()))


def is_caption(text: str) -> bool:
    return bool(_CAPTION.match(text))


def running_lines(lines: list[Line]) -> list[Line]:
    """The lines of running text among ``lines`` (TYPESET_WORDS words or more): a page
    with TYPESET_LINES of them is typeset."""
    return [line for line in lines if word_count(line.text) >= TYPESET_WORDS]


def up_the_margin(lines: list[Line]) -> list[Line]:
    """The lines printed up or down the page beside all the others, in a side margin:
    a strip of lines that white no line crosses sets apart from the rest, holding a
    line turned on its side (TURNED_ASPECT) and no line wider than it: the pieces a
    detector cut such a line in stand there too (arXiv's stamp in four, "arXiv:21",
    "3", "3334v2 [stat.ML]", "202"). In the order they read: up the left margin from
    its foot, down the right one from its top, as stamps and spines are printed.
    Columns of vertical script are set apart before (``reading.vertical``); a line
    turned on its side inside the page (a table's turned heading) is none."""
    left = _edge_strip(sorted(lines, key=lambda line: line.box[0]),
                       lambda line: (line.box[0], line.box[2]))
    right = _edge_strip(sorted(lines, key=lambda line: -line.box[2]),
                        lambda line: (-line.box[2], -line.box[0]))
    if len(left) + len(right) >= len(lines):
        return []
    return (sorted(left, key=lambda line: -line.box[3])
            + sorted(right, key=lambda line: line.box[1]))


def _edge_strip(ordered: list[Line], span) -> list[Line]:
    """The lines of ``ordered`` (from a side edge of the page inwards; ``span``: a
    line's extent in that direction) before the first white no line crosses, where
    they are a turned line and pieces no wider than it; [] otherwise."""
    strip: list[Line] = []
    reach = -math.inf
    for line in ordered:
        start, end = span(line)
        if strip and start > reach:
            break
        strip.append(line)
        reach = max(reach, end)
    if len(strip) == len(ordered):
        return []
    if len(strip) >= GLYPH_STACK and all(UNSPACED.fullmatch(line.text.strip()) for line in strip):
        return strip  # a word up the margin, found a character at a time ("密", "封", "线")
    turned = [line for line in strip
              if line.box[3] - line.box[1] >= TURNED_ASPECT * (line.box[2] - line.box[0])]
    if not turned:
        return []
    widest = max(line.box[2] - line.box[0] for line in turned)
    return strip if all(line.box[2] - line.box[0] <= widest for line in strip) else []


def find_furniture(lines: list[Line], page_height: float | None = None,
                   section_white: float | None = None
                   ) -> dict[Furniture, dict[int, Furniture]]:
    """The page's furniture at its top (HEADER) and its bottom (FOOTER): for each,
    {id(line): role} of the lines there that are a header, a footer or a page number
    (see the module docstring), within EDGE_BAND of the page's edges where
    ``page_height`` (in the lines' pixels) is known. ``section_white``: the white, in
    those pixels, that separates the page's sections, where the caller measured it (a
    header in SMALLER_PRINT needs no more)."""
    if len(lines) < 3:
        return {Furniture.HEADER: {}, Furniture.FOOTER: {}}
    height = median_height(lines)
    page_rows = rows(lines, height)
    if len(page_rows) < 3:
        return {Furniture.HEADER: {}, Furniture.FOOTER: {}}
    running = running_lines(lines)
    typeset = len(running) >= TYPESET_LINES
    measure = _measure(running) if typeset else None
    pitch = body_pitch(running)
    top, bottom = _text(page_rows[0]), _text(page_rows[-1])
    header_gap = HEADER_GAP
    if section_white is not None and median_height(page_rows[0]) <= SMALLER_PRINT * height:
        header_gap = min(HEADER_GAP, section_white / height)
    body = _Body(height, measure, pitch)
    edges = {Furniture.HEADER: _edge(page_rows, bottom, body, typeset, Furniture.HEADER,
                                     header_gap),
             Furniture.FOOTER: _edge(page_rows[::-1], top, body, typeset, Furniture.FOOTER,
                                     FOOTER_GAP)}
    if page_height:
        by_id = {id(line): line for line in lines}
        inside = {Furniture.HEADER: lambda line: line.box[3] <= EDGE_BAND * page_height,
                  Furniture.FOOTER: lambda line: line.box[1] >= (1 - EDGE_BAND) * page_height}
        edges = {edge: {key: role for key, role in found.items() if inside[edge](by_id[key])}
                 for edge, found in edges.items()}
    return edges


@dataclass(frozen=True)
class _Body:
    """The print of a page's body: its lines' height, the width of its running lines
    where it has one (``_measure``), and the width of its characters where they are
    of a script written without spaces (``_pitch``)."""

    height: float
    measure: float | None
    pitch: float | None


def _edge(page_rows: list[list[Line]], other_edge: str, body: _Body, typeset: bool,
          role: Furniture, gap: float) -> dict[int, Furniture]:
    """The furniture among the first EDGE_ROWS rows of ``page_rows`` (the page's rows
    from the top down for its header, from the bottom up for its footer);
    ``other_edge``: the text of the row at the page's other edge."""
    height = body.height
    found: dict[int, Furniture] = {}
    # rows from a caption on towards the body are the figure's or the table's
    edge_rows = next((index for index, row in enumerate(page_rows[:EDGE_ROWS])
                      if is_caption(_text(row))), EDGE_ROWS)
    index = 0
    # rows that are furniture by what they hold, however close to the body
    while index < edge_rows:
        row = page_rows[index]
        if len(row) == 1 and is_page_number(row[0].text):
            found[id(row[0])] = Furniture.PAGE_NUMBER
        elif typeset and _numbered_running_row(row, page_rows[index + 1], body):
            found.update({id(line): Furniture.PAGE_NUMBER if is_page_number(line.text) else role
                          for line in row})
        elif _text(row) == other_edge:
            found.update({id(line): role for line in row})
        else:
            break
        index += 1
    if not typeset:
        return found
    # then rows of small print set apart from the body by white
    for count in range(edge_rows - index, 0, -1):
        group, nearest = page_rows[index:index + count], page_rows[index + count]
        if all(_small_print(row, body) for row in group) \
                and _set_apart(group[-1], nearest, height, gap):
            for line in (line for row in group for line in row):
                found[id(line)] = Furniture.PAGE_NUMBER if is_page_number(line.text) else role
            break
    return found


def _numbered_running_row(row: list[Line], neighbour: list[Line], body: _Body) -> bool:
    """A running header or footer with the page number at its outer end ("44 |
    Chapter title", "Book title | 45"): a page number first or last in the row, the
    rest small print, and the next row towards the body not numbered so too (a
    transcript's or a list's numbered lines)."""
    rest = [line for line in row if not _numbered_end(row, line)]
    # the row may span the measure, its number at the edge of it; beside the number,
    # print of the body's size is no title in any script, and print smaller than the
    # body's no running text however many its words ("P.N.J. Lane et al. / Journal
    # of Hydrology 310 (2005) 253–265")
    return (len(rest) < len(row) and bool(rest)
            and (_small_print(rest, replace(body, measure=None), HEADING_RATIO)
                 or _smaller_print(rest, body))
            and not any(_numbered_end(neighbour, line) for line in neighbour))


def _numbered_end(row: list[Line], line: Line) -> bool:
    return line in (row[0], row[-1]) and is_page_number(line.text)


def _small_print(row: list[Line], body: _Body, smaller: float = SMALLER_PRINT) -> bool:
    """No title and no running text: print no larger than the body's, and no line of
    twice a running line's words, nor one that fills the body's measure. A row's print
    is measured by the width of its characters where they are written without spaces
    (``reading.lines.char_pitch``), at most ``smaller`` times the body's, else by its
    lines' height, at most HEADING_RATIO times the body's (no title)."""
    pitch = char_pitch(row) if body.pitch else None
    print_ok = (pitch <= smaller * body.pitch if pitch
                else median_height(row) <= HEADING_RATIO * body.height)
    return print_ok and not any(
        word_count(line.text) >= 2 * TYPESET_WORDS
        or (body.measure is not None and _fills(line, body.measure)) for line in row)


def _smaller_print(row: list[Line], body: _Body) -> bool:
    """Print at most SMALLER_PRINT of the body's: by the width of its characters where
    they are written without spaces (``reading.lines.char_pitch``), else by height."""
    pitch = char_pitch(row) if body.pitch else None
    if pitch:
        return pitch <= SMALLER_PRINT * body.pitch
    return median_height(row) <= SMALLER_PRINT * body.height


def body_pitch(running: list[Line]) -> float | None:
    """The width of a character of the page's running text where most of its running
    lines are written without spaces, else None."""
    pitches = [pitch for line in running if (pitch := char_pitch([line]))]
    return statistics.median(pitches) if pitches and 2 * len(pitches) >= len(running) else None


def _measure(running: list[Line]) -> float | None:
    """The width of a line of the page's running text, where at least half of them
    have one (MEASURE_SHARE), else None."""
    width = statistics.median(line.box[2] - line.box[0] for line in running)
    return width if 2 * sum(_fills(line, width) for line in running) >= len(running) else None


def _fills(line: Line, measure: float) -> bool:
    return MEASURE_SHARE * measure <= line.box[2] - line.box[0] <= measure / MEASURE_SHARE


def _set_apart(row: list[Line], neighbour: list[Line], height: float, gap: float) -> bool:
    """Whether white at least ``gap`` line heights tall lies between ``row`` and the
    next row towards the body."""
    above = min(line.box[1] for line in row) < min(line.box[1] for line in neighbour)
    if above:
        white = min(line.box[1] for line in neighbour) - max(line.box[3] for line in row)
    else:
        white = min(line.box[1] for line in row) - max(line.box[3] for line in neighbour)
    return white >= gap * height


def _text(row: list[Line]) -> str:
    return " ".join(line.text for line in row).strip().casefold()
