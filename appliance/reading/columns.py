"""Whether the two sides of a gutter are columns, read one after the other, or the
two halves of rows (labels and their values, item and price); and whether stacks of
lines side by side are cards, each read whole (``is_card_row``).

Why the column test matters: a receipt or a form has a white strip between its labels
and its values too ("CASH ... 30.90"), and reading all labels before all values
turns it into nonsense. Typeset columns hold prose, lines of four words and more;
labels and values have one to three. Words are counted in any script
(``lines.word_count``): Chinese and Japanese, written without spaces, by their
characters. A long run of rows that fill their side with
prose, or with a table's rows (a label and its figures) that do not go on across the
gutter, beside other matter of some length (a report's sidebar of analysts' names and
charts, a column with tables in it) is a column as well, unless that other side is a
column of figures (a receipt's prices beside long item names), or nearly all of its
rows go on across the gutter to matter that does not read on its own (a table whose
first column holds long names, with phone and e-mail beside them). A typeset column
(most rows one line of running text) is read on its own beside even one or two
lines: a headline beside it is no row of it. Two blocks of typeset lines are columns
however short, a paragraph's two lines each, the second as short as it ends
(``_text_blocks``). An address beside values that carry
their own labels (an invoice's "Invoice to" block beside its number and dates), or
beside a title ("TAX INVOICE"), or beside another address (a billing and a delivery
address, each with a street or postcode line), is a block of its own as well: its
lines are not their labels. (A test that also took sides whose lines do not share rows for columns
read FUNSD's forms worse: multi-line values and signature blocks beside a label stack
look exactly like that; and typeset columns of one leading share rows as often.)
"""

from __future__ import annotations

import re
import statistics

from appliance.page import Line
from appliance.reading.lines import (
    HEADING_RATIO, LETTER_WORD, PROSE_WORDS, centre, line_height, median_height, rows,
    word_count,
)

# Each side of a column cut has at least this many lines.
MIN_COLUMN_LINES = 3
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
# A card of a row of cards holds this many lines, one of each kind of line (figures,
# words with figures, words): an organisation chart's box, a name with its id, a
# title and a date.
CARD_LINES = 3
_DIGIT = re.compile(r"\d")
_WORD = LETTER_WORD
# An address beside values that carry their own labels (an invoice's "Invoice to" block
# beside its number and dates) is two blocks, not labels and values: an address is
# MIN_COLUMN_LINES to ADDRESS_LINES lines, one a row, aligned left, each with a word,
# none labelled but the last (the customer's VAT id); at least LABELLED_SHARE of the
# other side's rows are a label with its value ("Date of issue | 29 Mar 2020",
# "Invoice number: 2025-02-460"); and the two sides have different numbers of rows,
# or most of the other side's labels are marked as labels ("Due date:"): a table's
# first column has a cell in each row of the rest, and its cells are no labels. A
# title (one line, HEADING_RATIO times the address's print) beside an address is a
# block of its own too.
ADDRESS_LINES = 8
LABELLED_SHARE = 0.75
# What marks a label: "Due date:", "Invoice #", "Order No.", "Kunden-Nr.", "N°".
_MARK = r"(?::|#|\bno\.|\bnr\.|n°)"
_LABELLED = re.compile(rf"^[^\W\d_].{{1,30}}?{_MARK}\s*(\S.*)$", re.IGNORECASE)
_LABEL_MARK = re.compile(rf"{_MARK}\s*$", re.IGNORECASE)


def is_column_cut(left: list[Line], right: list[Line]) -> bool:
    """Whether the two sides of a gutter are columns read one after the other, rather
    than the two halves of rows (labels and their values, item and price)."""
    if not (left and right):
        return False
    if min(len(left), len(right)) < MIN_COLUMN_LINES:
        return _text_blocks(left, right) or any(
            (_running_column(side) and figure_share(other) <= MAX_FIGURE_SHARE)
            or (_address(side) and _title(other, median_height(side)))
            for side, other in ((left, right), (right, left)))
    if prose(left) and prose(right):
        return True
    if _address(left) and _address(right) and _postal(left) and _postal(right):
        return True
    if any(_address(side) and _labelled_values(other)
           and (len(rows(side)) != len(rows(other)) or _marked_labels(other))
           for side, other in ((left, right), (right, left))):
        return True
    if _row_labels(left, right):
        return False
    return any(_reads_alone(side, other) and len(other) >= SIDEBAR_LINES
               and figure_share(other) <= MAX_FIGURE_SHARE
               for side, other in ((left, right), (right, left)))


def prose(lines: list[Line]) -> bool:
    """Whether most of ``lines`` are running text (PROSE_WORDS words or more)."""
    return statistics.median(word_count(line.text) for line in lines) >= PROSE_WORDS


def _reads_alone(lines: list[Line], other: list[Line]) -> bool:
    """A run of rows that read on their own (``_fills_with_text``), unless nearly all
    of the rows that fill their side go on across the gutter and the other side does
    not read on its own: a table whose first column holds long names ("Shagun Singh
    Chadha, Senior Vice President | (203) 569-4345 | ssingh@...", "平均红细胞血红蛋白含量
    (MCH) | 仪器法 | 29.5"), under a few lines of its own (a form's head), is rows. Two
    pages of a transcript printed side by side share every row too, and both read on
    their own."""
    rows_, full = _full_rows(lines, other)
    if not _fill(rows_, full):
        return False
    height = median_height(lines)
    beyond = [centre(line) for line in other]
    going_on = sum(_goes_on(row, beyond, height) for row in full)
    return going_on < TABLE_ROW_SHARE * len(full) or _fills_with_text(other, lines)


def _row_labels(labels: list[Line], lines: list[Line]) -> bool:
    """Whether ``labels``, left of the gutter, are the first column of the table that
    ``lines`` are the rest of: ``lines`` are mostly a table's rows (a label and its
    figures: "Count 20 56 391"), and nearly all (TABLE_ROW_SHARE) of the rows of
    ``labels``, which are no prose, stand in one of them. Where a label spans two of the table's rows
    ("Alcohol use" over "Count" and "Percentage"), half of the table's rows have no
    line beside them, so the table alone reads as a column."""
    table_rows = rows(lines)
    if prose(labels) or 2 * sum(map(_table_row, table_rows)) < len(table_rows):
        return False
    height = median_height(lines)
    beside = [centre(line) for line in lines]
    label_rows = rows(labels)
    standing = sum(_goes_on(row, beside, height) for row in label_rows)
    return standing >= TABLE_ROW_SHARE * len(label_rows)


def _fills_with_text(lines: list[Line], other: list[Line]) -> bool:
    """At least COLUMN_RUN rows, at least half of which fill their side with running
    text, or with a table's row (a label and its figures) that does not go on across
    the gutter to ``other``: a table whose item names stand left of a gutter and the
    rest of each row right of it is one table, not two columns."""
    return _fill(*_full_rows(lines, other))


def _fill(rows_: list[list[Line]], full: list[list[Line]]) -> bool:
    return len(rows_) >= COLUMN_RUN and 2 * len(full) >= len(rows_)


def _full_rows(lines: list[Line], other: list[Line]
               ) -> tuple[list[list[Line]], list[list[Line]]]:
    """The side's rows, and those of them that fill it as ``_fills_with_text`` says."""
    filling = _filling_rows(lines)
    height = median_height(lines)
    beyond = [centre(line) for line in other]
    full = [row for row, fills in filling
            if fills and (_running_text(row)
                          or (_table_row(row) and not _goes_on(row, beyond, height)))]
    return [row for row, _ in filling], full


def _running_column(lines: list[Line]) -> bool:
    """A run of rows, most of them (RUNNING_SHARE) a single line of running text that
    fills the side: a typeset column, not a form's labels beside their values."""
    rows_ = _filling_rows(lines)
    full = sum(fills and len(row) == 1 and _running_text(row) for row, fills in rows_)
    return len(rows_) >= COLUMN_RUN and full >= RUNNING_SHARE * len(rows_)


def _text_blocks(left: list[Line], right: list[Line]) -> bool:
    """Two blocks of typeset lines side by side, however short (two lines each, a
    short page's last lines): each side's lines one a row, their starts aligned within
    a line height, every one but the last (a paragraph's end, however short) a line of
    running text filling PROSE_FILL of the column, whose width is the wider side's, and
    no line a label marked as one ("Address of the applicant:"). A form's labels and
    values are no such blocks: their lines are short, or do not fill a column as wide as
    the other side, or are labels."""
    height = median_height(left + right)
    width = max(_width(left), _width(right))
    return all(_text_block(side, width, height) for side in (left, right))


def _text_block(lines: list[Line], width: float, height: float) -> bool:
    rows_ = rows(lines)
    starts = [line.box[0] for line in lines]
    return (len(rows_) >= 2 and all(len(row) == 1 for row in rows_)
            and max(starts) - min(starts) <= height
            and not any(_LABEL_MARK.search(line.text) for line in lines)
            and all(_span(row) >= PROSE_FILL * width and _running_text(row)
                    for row in rows_[:-1]))


def _width(lines: list[Line]) -> float:
    return max(line.box[2] for line in lines) - min(line.box[0] for line in lines)


def _filling_rows(lines: list[Line]) -> list[tuple[list[Line], bool]]:
    """The side's rows, each with whether it spans PROSE_FILL of the side's width."""
    width = _width(lines)
    return [(row, _span(row) >= PROSE_FILL * width) for row in rows(lines)]


def _goes_on(row: list[Line], centres: list[float], height: float) -> bool:
    """Whether a line of the other side stands in ``row`` (its centre within a quarter
    of a line height of the row's)."""
    middle = statistics.fmean(centre(line) for line in row)
    return any(abs(other - middle) <= height / 4 for other in centres)


def _span(row: list[Line]) -> float:
    return max(line.box[2] for line in row) - min(line.box[0] for line in row)


def _running_text(row: list[Line]) -> bool:
    return any(word_count(line.text) >= PROSE_WORDS and _WORD.search(line.text)
               for line in row)


def _table_row(row: list[Line]) -> bool:
    """A label and two figures or more, each a line of its own."""
    return (len(row) >= 3 and sum(map(_is_figure, row)) >= 2
            and any(_WORD.search(line.text) for line in row))


def _address(lines: list[Line]) -> bool:
    """A few lines, one a row, aligned left, each with a word and none labelled but
    the last."""
    rows_ = rows(lines)
    if not MIN_COLUMN_LINES <= len(rows_) <= ADDRESS_LINES:
        return False
    if any(len(row) > 1 or not _WORD.search(row[0].text) for row in rows_):
        return False
    if any(_LABELLED.match(row[0].text) for row in rows_[:-1]):
        return False  # the last may be the customer's VAT id ("BTW: BE0821647210")
    height = median_height(lines)
    return max(line.box[0] for line in lines) - min(line.box[0] for line in lines) <= height


def _postal(lines: list[Line]) -> bool:
    """Whether a line is words with figures and no label: a street and number, a
    postcode and town ("3500 MJ Utrecht")."""
    return any(_DIGIT.search(line.text) and _WORD.search(line.text)
               and not _LABELLED.match(line.text) for line in lines)


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


def _marked_labels(lines: list[Line]) -> bool:
    """Whether most rows begin with a label marked as one ("Due date:", "Invoice #",
    "Order No.", "Kunden-Nr."): field labels, not a table's cells."""
    rows_ = rows(lines)
    return 2 * sum(bool(_LABEL_MARK.search(row[0].text) or _LABELLED.match(row[0].text))
                   for row in rows_) > len(rows_)


def _title(lines: list[Line], body: float) -> bool:
    """One line of print clearly taller than ``body``: a document's title ("TAX
    INVOICE") beside the sender's address, not a line of it."""
    return len(lines) == 1 and line_height(lines[0]) >= HEADING_RATIO * body


def figure_share(lines: list[Line]) -> float:
    """The share of the lines that are a figure or two: a column of prices or values."""
    return sum(map(_is_figure, lines)) / len(lines)


def _is_figure(line: Line) -> bool:
    return bool(_DIGIT.search(line.text)) and word_count(line.text) <= 2


def is_card_row(stacks: list[list[Line]], height: float) -> bool:
    """Whether stacks of lines side by side are cards, each read whole, rather than a
    table's columns, read row by row: two or more stacks of three lines, one a row,
    in step across the stacks, where each row holds one kind of line (all names, all
    titles, all dates) and each line of a stack is of another kind. A table is the
    other way round: a column holds one kind (its figures, under a header of words),
    a row several. (Two lines are too few to tell: a header over one row of figures
    looks the same.)"""
    if len(stacks) < 2 or any(len(stack) != CARD_LINES for stack in stacks):
        return False
    if any(len(rows(stack, height)) != CARD_LINES for stack in stacks):
        return False
    grid = [sorted(stack, key=centre) for stack in stacks]
    across = list(zip(*grid))
    if any(max(map(centre, row)) - min(map(centre, row)) > height / 2 for row in across):
        return False
    return (all(len({_kind(line) for line in row}) == 1 for row in across)
            and all(len({_kind(line) for line in stack}) == CARD_LINES for stack in grid))


def _kind(line: Line) -> str:
    """A line's kind: figures without letters ("4/9/2012"), words with figures ("Bo
    Hamilton (000131923)"), or words."""
    letters = any(c.isalpha() for c in line.text)
    figures = bool(_DIGIT.search(line.text))
    return "mixed" if letters and figures else "words" if letters else "figures"
