"""Page furniture a document shows and a page alone cannot: a line printed at the same
edge of page after page (a journal's "P.N.J. Lane et al. / Journal of Hydrology 310
(2005) 253–265", a contract's "合同编号 2024-118", a report's title over each page)
is its running header or footer, whatever its print or the white around it.

``reading.furniture`` finds a page's furniture from that page alone, by the cues a
header carries (a page number at its outer end, smaller print, white apart); a running
header in the body's print, close to the body and unnumbered, has none of them. Read
together, a document's pages show it by repetition, in any script: a line among the
``EDGE_ROWS`` rows at the top or the foot of a page is furniture where lines of the
same text (its figures aside: the page numbers in it change) stand at that edge, at
the same height, on ``MIN_PAGES`` pages or more, itself and its neighbours
(``NEIGHBOURS`` either side). A row is taken whole or not at all, from the edge
inwards; a table's rows (a statement's column heads over each page), a title's larger
print, a figure's caption and a row of figures alone are not taken.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache

from appliance.page import Furniture, Line, Structure
from appliance.reading.furniture import EDGE_ROWS, is_caption, is_page_number
from appliance.reading.lines import HEADING_RATIO, centre, line_height, median_height, rows

# Pages a line must stand on to be running: the first page of a report or an article
# often has none, and a letter's two pages may both open with its letterhead.
MIN_PAGES = 3
# Pages either side of a page its running lines are looked for on: a book's left and
# right pages each have their own, so each stands on every other page. A document's
# pages are compared with their neighbours only, so a long one costs what a short one
# does a page.
NEIGHBOURS = 4
# How far, as a share of the page's height, one page's line may stand from another's
# and still be the same running line: a scanner's feed shifts a page by a few
# millimetres (1.5 % of an A4 page is 4.5 mm).
SAME_HEIGHT = 0.015
# How alike two readings of one running line are (difflib's ratio): OCR reads one
# header a character or two differently from page to page.
SAME_TEXT = 0.8

_FIGURES = re.compile(r"\d+")
_LETTER = re.compile(r"[^\W\d_]")  # a letter of any script
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class _Candidate:
    page: int
    index: int  # in the page's lines
    top: bool  # at the page's top, else at its foot
    height: float  # the line's centre, as a share of the page's height
    key: str  # its text, its figures one mark
    # whether it may be running (else its row is body): no figure's caption ("Figure 3
    # to paragraph (h)(4)", "Figure 4 ..."), no table's, no title's print
    eligible: bool
    # whether it holds words or is a page number: a row of figures alone (a table's
    # dates and sums, alike on every page once their figures are one mark) is body
    worded: bool


@dataclass
class Repeated:
    """A page's lines that are running furniture, by their index in its lines, with
    their role (header or footer, page number for a line that is one): those at its
    top, those at its foot."""

    top: dict[int, Furniture] = field(default_factory=dict)
    foot: dict[int, Furniture] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.top or self.foot)


def repeated_furniture(pages: list[tuple[list[Line], float] | None]) -> list[Repeated]:
    """For each page (its lines, in any order, and its height in their pixels; None
    for a page without positioned lines), the lines of its body that are running
    furniture. A row is taken whole or not at all, from the page's edge inwards: a
    figure's labels repeated over its columns, beside the body's first lines, are not
    taken, nor is a second row under a first that is body."""
    edges = [_edges(number, *page) if page else ([], []) for number, page in enumerate(pages)]
    repeated = set()
    for side in (0, 1):  # the top, the foot
        on_page = [[candidate for row in page_edges[side] for candidate in row
                    if candidate and candidate.eligible] for page_edges in edges]
        for number, candidates in enumerate(on_page):
            near = [other for page in on_page[max(number - NEIGHBOURS, 0):number + NEIGHBOURS + 1]
                    for other in page]
            repeated.update(candidate for candidate in candidates
                            if len({other.page for other in near
                                    if abs(other.height - candidate.height) <= SAME_HEIGHT
                                    and _same_text(candidate.key, other.key)}) >= MIN_PAGES)
    found = [Repeated() for _ in pages]
    for number, (tops, feet) in enumerate(edges):
        for edge_rows, taken, edge_role in ((tops, found[number].top, Furniture.HEADER),
                                            (feet, found[number].foot, Furniture.FOOTER)):
            for row in edge_rows:
                ours = [candidate for candidate in row if candidate is not None]
                if not ours:  # the page's own furniture
                    continue
                if not (all(candidate in repeated for candidate in ours)
                        and any(candidate.worded for candidate in ours)):
                    break
                for candidate in ours:
                    text = pages[number][0][candidate.index].text
                    taken[candidate.index] = (Furniture.PAGE_NUMBER if is_page_number(text)
                                              else edge_role)
    return found


def _edges(number: int, lines: list[Line], page_height: float
           ) -> tuple[list[list[_Candidate | None]], list[list[_Candidate | None]]]:
    """The page's top ``EDGE_ROWS`` rows, and its bottom ones, each from the edge
    inwards: a candidate for each line of its body, None for the furniture the page
    found itself. No rows at all on a page of so few rows that its edges meet."""
    if not lines or page_height <= 0:
        return [], []
    body = median_height(lines)
    page_rows = rows(lines, body)
    if len(page_rows) <= 2 * EDGE_ROWS:
        return [], []
    index = {id(line): position for position, line in enumerate(lines)}

    def candidate(line: Line, top: bool) -> _Candidate | None:
        if line.furniture is not None:
            return None
        key = _key(line.text)
        return _Candidate(number, index[id(line)], top, centre(line) / page_height, key,
                          eligible=bool(key) and not is_caption(line.text)
                          and line.structure != Structure.TABLE
                          and line_height(line) < HEADING_RATIO * body,
                          worded=bool(_LETTER.search(line.text)) or is_page_number(line.text))
    return ([[candidate(line, True) for line in row] for row in page_rows[:EDGE_ROWS]],
            [[candidate(line, False) for line in row] for row in page_rows[::-1][:EDGE_ROWS]])


def _key(text: str) -> str:
    return _FIGURES.sub("0", _SPACE.sub("", text.casefold()))


@lru_cache(maxsize=65536)  # a document's header is compared with itself page after page
def _same_text(one: str, other: str) -> bool:
    if one == other:
        return True
    matcher = SequenceMatcher(None, one, other, autojunk=False)
    return matcher.real_quick_ratio() >= SAME_TEXT and matcher.ratio() >= SAME_TEXT
