"""Running furniture a document's pages show together (appliance.reading.repeated):
hand-made pages of lines, no OCR. A real document's pages, read through the daemon, are
in ``tests/outputs/test_document_furniture.py``; the effect on real documents is in the
README."""

from __future__ import annotations

import random
from dataclasses import replace

from appliance.page import Furniture, Line, Structure
from appliance.reading.repeated import MIN_PAGES, repeated_furniture
from tests.reading.test_reading import line

PAGE_HEIGHT = 1400.0
WORDS = ("the supplier delivers goods named in the order within thirty days of its date "
         "and the buyer pays each invoice by transfer to the account given on it unless "
         "both parties agree otherwise in writing signed by their officers").split()


def page(number: int, top: list[Line] | None = None) -> list[Line]:
    """A page of 25 rows of running text, no row like another page's at its place,
    under ``top``; the page's number at its foot."""
    body = [line(" ".join(random.Random(number * 100 + row).sample(WORDS, 9)), 100,
                 120 + 40 * row, 700) for row in range(25)]
    return [*(top or []), *body, line(str(number), 390, 1300, 410)]


def header(text: str = "Supply agreement NW-118 Northwind Traders", x0: float = 100,
           y0: float = 80) -> Line:
    """In the body's print, 10 px above its first row: no header by the page's own cues."""
    return line(text, x0, y0, x0 + 14 * len(text))


def found(pages: list[list[Line]]) -> list[dict[str, Furniture]]:
    """Each page's running furniture but its page number (which every page here has at
    its foot), by its lines' text."""
    running = repeated_furniture([(lines, PAGE_HEIGHT) for lines in pages])
    assert all(found.foot == {len(lines) - 1: Furniture.PAGE_NUMBER}
               for lines, found in zip(pages, running)) or len(pages) < MIN_PAGES
    return [{lines[index].text: role for index, role in found.top.items()}
            for lines, found in zip(pages, running)]


def test_a_line_at_the_same_edge_of_page_after_page_is_its_running_header():
    # OCR reads the header a character differently on one page; the first page has none
    pages = [page(1), page(2, [header()]), page(3, [header("Supply agreernent NW-118 Northwind "
                                                           "Traders")]),
             page(4, [header(y0=84)]), page(5, [header(y0=76)])]
    assert found(pages) == [
        {},
        {"Supply agreement NW-118 Northwind Traders": Furniture.HEADER},
        {"Supply agreernent NW-118 Northwind Traders": Furniture.HEADER},
        {"Supply agreement NW-118 Northwind Traders": Furniture.HEADER},
        {"Supply agreement NW-118 Northwind Traders": Furniture.HEADER},
    ]


def test_a_header_whose_page_number_changes_is_one_header_and_on_too_few_pages_none():
    pages = [page(number, [header(f"Annual report 2026 | page {number + 40}")])
             for number in range(1, MIN_PAGES + 1)]
    assert all("Annual report 2026 | page" in next(iter(f), "") for f in found(pages))
    assert found(pages[:MIN_PAGES - 1]) == [{}] * (MIN_PAGES - 1)
    # a gazette's page numbers, too long to read as a page's number alone, run beside it
    gazette = [page(number, [header("Federal Register / Vol. 85, No. 152"),
                             line(str(47697 + number), 900, 80, 980)]) for number in (1, 2, 3)]
    assert [set(f) for f in found(gazette)] == [{"Federal Register / Vol. 85, No. 152",
                                                 str(47697 + n)} for n in (1, 2, 3)]
    # at another height on a page, it is not that page's running header
    moved = [*pages[:MIN_PAGES - 1], page(MIN_PAGES, [header(y0=40)])]
    assert found(moved) == [{}] * MIN_PAGES


def test_a_row_is_running_whole_or_not_at_all():
    """A figure's labels repeated over a column, beside the body's first line, are no
    header; nor is a second row under a first that is body."""
    labels = [line("Before the change", 800, 120, 1000)]
    beside = [page(n, labels) for n in range(1, 4)]
    assert found(beside) == [{}] * 3
    under = [page(n, [line(" ".join(random.Random(-n).sample(WORDS, 5)), 100, 40, 500),
                      header(y0=80)]) for n in range(1, 4)]
    assert found(under) == [{}] * 3


def test_a_table_s_heads_a_title_a_caption_and_a_row_of_figures_are_no_running_header():
    heads = [replace(line(text, x, 80, x + 150), structure=Structure.TABLE)
             for x, text in ((100, "Date"), (300, "Description"), (500, "Amount"))]
    title = [line("Supply agreement", 100, 60, 500, h=60)]  # twice the body's print
    caption = [header("Figure 3 to paragraph (h)(4)")]
    figures = [line("07/17/2015", 100, 80, 260), line("1,250.00", 400, 80, 520)]
    for top in (heads, title, caption, figures):
        assert found([page(n, top) for n in range(1, 5)]) == [{}] * 4, top[0].text


def test_furniture_the_page_found_itself_is_left_as_it_was():
    number_row = replace(line("Chapter 2 | 45", 100, 40, 300), furniture=Furniture.HEADER)
    pages = [page(n, [number_row, header()]) for n in range(1, 4)]
    assert found(pages) == [{"Supply agreement NW-118 Northwind Traders": Furniture.HEADER}] * 3
